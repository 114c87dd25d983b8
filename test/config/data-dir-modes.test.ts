// DATA_DIR holds prompts (spool, embedded store), provider keys and webhook secrets: owner-only, whatever the umask.
import { expect } from 'chai';
import { chmodSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { flushed, post, startTestServer } from '../support/server.ts';

describe('data directory permissions', function () {
  this.timeout(120_000);
  it('the directory is made 0700 and what the server writes in it is owner-only', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'tracegate-modes-'));
    const dir = join(parent, 'data');
    const umask = process.umask(0o022);
    mkdirSync(dir, { mode: 0o755 });
    chmodSync(dir, 0o755);
    const s = await startTestServer('duckdb', { TRACEGATE_DATA_DIR: dir, TRACEGATE_FLUSH_INTERVAL_MS: '60000' });
    try {
      const k = await s.key();
      expect(
        (
          await post(
            `${s.url}/api/traces`,
            { requestId: 'm-1', prompt: 'p', response: 'r' },
            { authorization: `Bearer ${k.key}` },
          )
        ).status,
      ).to.equal(200);
      const walk = (d: string): string[] =>
        readdirSync(d, { withFileTypes: true }).flatMap((e) =>
          e.isDirectory() ? [join(d, e.name), ...walk(join(d, e.name))] : [join(d, e.name)],
        );
      // A state file's temporary copy can be renamed between the listing and the stat (it was written 0600 too).
      const mode = (f: string) => statSync(f, { throwIfNoEntry: false })?.mode ?? 0;
      const loose = [dir, ...walk(dir)]
        .filter((f) => (mode(f) & 0o077) !== 0)
        .map((f) => `${f.slice(dir.length) || '/'} ${(mode(f) & 0o777).toString(8)}`);
      expect(loose).to.deep.equal([]);
      expect(walk(join(dir, 'spool')).length).to.be.greaterThan(0); // the spooled trace is among the files checked
      await flushed(s);
    } finally {
      await s.close();
      process.umask(umask);
      await rm(parent, { recursive: true, force: true });
    }
  });
});
