// scripts/node-bin.sh: the Makefile's choice of Node. bin/tracegate.ts runs as TypeScript directly, which Node does
// without a flag from 22.18 (and 23.6) on; an older machine Node must make it pick the Node 24 in .tools/.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

describe('Node version floor', () => {
  let root: string;
  let bash: string;
  before(() => {
    // A copy of the script in a scratch root whose .tools/node is already "installed", so nothing is downloaded.
    root = mkdtempSync(join(tmpdir(), 'tracegate-node-bin-'));
    mkdirSync(join(root, 'scripts'));
    copyFileSync('scripts/node-bin.sh', join(root, 'scripts', 'node-bin.sh'));
    mkdirSync(join(root, '.tools', 'node', 'bin'), { recursive: true });
    writeFileSync(join(root, '.tools', 'node', 'bin', 'node'), '#!/bin/sh\nexit 0\n');
    chmodSync(join(root, '.tools', 'node', 'bin', 'node'), 0o755);
    // The machine's `node`: answers `node -p …` as the script asks it, for the version in FAKE_NODE_VERSION.
    mkdirSync(join(root, 'machine'));
    writeFileSync(join(root, 'machine', 'node'), '#!/bin/sh\necho "$FAKE_NODE_VERSION" | cut -d. -f1,2 | tr . " "\n');
    chmodSync(join(root, 'machine', 'node'), 0o755);
    // Only the tools the script and the fake use, so a real node elsewhere on this machine's PATH cannot answer.
    mkdirSync(join(root, 'tools'));
    for (const tool of ['dirname', 'cut', 'tr'])
      symlinkSync(
        execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim(),
        join(root, 'tools', tool),
      );
    bash = execFileSync('sh', ['-c', 'command -v bash'], { encoding: 'utf8' }).trim();
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  const pick = (version: string | null) =>
    execFileSync(bash, [join(root, 'scripts', 'node-bin.sh')], {
      env: {
        PATH: `${version ? join(root, 'machine') + ':' : ''}${join(root, 'tools')}`,
        FAKE_NODE_VERSION: version ?? '',
      },
      encoding: 'utf8',
    }).trim();

  it('keeps a machine Node that runs .ts without flags (22.18+, 23.6+, 24+)', () => {
    for (const v of ['22.18.0', '22.20.1', '23.6.0', '24.0.0', '25.1.0']) expect(pick(v), v).to.equal('');
  });

  it('treats older ones as too old and puts .tools/node first', () => {
    for (const v of ['20.20.2', '22.0.0', '22.17.1', '23.5.0'])
      expect(pick(v), v).to.equal(join(root, '.tools', 'node', 'bin'));
    expect(pick(null)).to.equal(join(root, '.tools', 'node', 'bin')); // no node at all
  });

  it('package.json engines says the same floor', () => {
    expect(JSON.parse(readFileSync('package.json', 'utf8')).engines.node).to.equal('^22.18.0 || >=23.6.0');
  });
});
