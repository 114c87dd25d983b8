// The id-hash key file created by several processes at once (child processes): they all end up with one key.
// The rest of applyGovernance and traceIdForRequestId: test/unit/governance/apply.test.ts.
import { expect } from 'chai';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

describe('governance traceIdForRequestId', () => {
  it('processes starting together agree on one key', async function () {
    this.timeout(90_000);
    const { execFile } = await import('node:child_process');
    const dir = join(mkdtempSync(join(tmpdir(), 'tg-idkey-')), 'keys');
    const code = `import('${new URL('../../processors/signing.ts', import.meta.url).href}').then((m) => process.stdout.write(m.loadIdHashKey(${JSON.stringify(dir)}).toString()))`;
    const run = () =>
      new Promise<string>((resolve, reject) =>
        execFile(process.execPath, ['-e', code], (err, out) => (err ? reject(err) : resolve(out))),
      );
    const keys = await Promise.all(Array.from({ length: 6 }, run));
    expect(new Set(keys).size).to.equal(1);
    expect(keys[0]).to.match(/^[0-9a-f]{64}$/);
  });
});
