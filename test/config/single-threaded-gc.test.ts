// `tracegate serve` with TRACEGATE_SINGLE_THREADED_GC and TRACEGATE_SEMI_SPACE_MB: the process replaces itself
// with one started with V8's flags for them (same pid), or keeps its own arguments when neither is wanted.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from '../support/process.ts';

async function serveArgs(setting: string, extra: Record<string, string> = {}, nodeArgs: string[] = []): Promise<{ pid: number; childPid: number; args: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'tracegate-gc-'));
  const child = spawn(process.execPath, [...nodeArgs, 'bin/tracegate.ts', 'serve'], {
    // Without the compile cache, which restarts the process too (test/config/compile-cache.test.ts).
    env: { ...process.env, NODE_DISABLE_COMPILE_CACHE: '1', TRACEGATE_DATA_DIR: dir, TRACEGATE_PORT: '0', TRACEGATE_HOST: '127.0.0.1', TRACEGATE_LOG_LEVEL: 'silent', TRACEGATE_SINGLE_THREADED_GC: setting, ...extra },
    stdio: 'ignore',
  });
  try {
    const file = join(dir, 'server.json');
    for (let i = 0; i < 300 && !existsSync(file); i++) await sleep(50);
    const { pid } = JSON.parse(readFileSync(file, 'utf8')) as { pid: number };
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    return { pid, childPid: child.pid!, args };
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('serve: V8 flags from the start (single-threaded garbage collection, the HTTP thread\'s young generation)', function () {
  this.timeout(60_000);
  const script = join(process.cwd(), 'bin/tracegate.ts');
  it('true: the server runs with --single-threaded-gc and 16 MB semi-spaces, in the process that was started', async () => {
    const r = await serveArgs('true');
    expect(r.pid).to.equal(r.childPid);
    expect(r.args.slice(1, 4)).to.deep.equal(['--single-threaded-gc', '--max-semi-space-size=16', script]);
    expect(r.args.at(-1)).to.equal('serve');
  });

  it('false: the server keeps V8\'s helper threads; another semi-space size when configured', async () => {
    const r = await serveArgs('false', { TRACEGATE_SEMI_SPACE_MB: '24' });
    expect(r.pid).to.equal(r.childPid);
    expect(r.args.slice(1, 3)).to.deep.equal(['--max-semi-space-size=24', script]);
  });

  it('neither wanted (or a semi-space size given to node itself): its arguments as started', async () => {
    for (const extra of [{ TRACEGATE_SEMI_SPACE_MB: '0' }, { NODE_OPTIONS: '--max-semi-space-size=32' }] as Array<Record<string, string>>) {
      const r = await serveArgs('false', extra);
      expect(r.pid).to.equal(r.childPid);
      expect(r.args.slice(1), JSON.stringify(extra)).to.deep.equal(['bin/tracegate.ts', 'serve']);
    }
    const r = await serveArgs('false', {}, ['--max_semi_space_size=32']);
    expect(r.args.slice(1)).to.deep.equal(['--max_semi_space_size=32', 'bin/tracegate.ts', 'serve']);
  });
});
