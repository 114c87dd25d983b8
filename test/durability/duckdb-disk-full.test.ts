// The embedded store on a full disk: DuckDB's checkpoint fails for lack of space and it invalidates the database.
// Until there is space again, reads answer 503 (not 500) and /readyz 503; once the disk grows, the collector
// recovers without a restart and stores every acknowledged trace. Needs a small tmpfs, so mount permission (root);
// test/storage/duckdb-invalidated.test.ts covers the same recovery portably.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../config/index.ts';
import { startServer, type Running } from '../../collector/server.ts';
import { createKey } from '../../collector/admin.ts';
import { sleep } from '../support/process.ts';
import { get, post } from '../support/server.ts';

describe('durability: DuckDB checkpoint on a full disk, then the disk grows', function () {
  this.timeout(360_000);
  let dir: string;
  let mounted = false;
  let running: Running | null = null;

  before(function () {
    dir = mkdtempSync(join(tmpdir(), 'tracegate-diskfull-'));
    try {
      // Room for DuckDB's WAL to reach its 16 MB checkpoint threshold, not for the checkpoint to write it out.
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', dir], { stdio: 'pipe' });
      mounted = true;
    } catch (err) {
      console.warn(`      skipped: cannot mount a tmpfs here (needs root): ${(err as Error).message.split('\n')[0]}`);
      this.skip();
    }
  });

  after(async () => {
    try {
      await running?.close();
    } finally {
      // never leave the tmpfs mounted: a lazy unmount when it is still busy
      if (mounted) try { execFileSync('umount', [dir], { stdio: 'pipe' }); } catch { execFileSync('umount', ['-l', dir], { stdio: 'pipe' }); }
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('answers reads 503 while broken and recovers without a restart, with every acknowledged trace', async () => {
    running = await startServer(loadConfig({
      TRACEGATE_PORT: '0', TRACEGATE_HOST: '127.0.0.1', TRACEGATE_DATA_DIR: dir, TRACEGATE_LOG_LEVEL: 'silent',
      TRACEGATE_FLUSH_INTERVAL_MS: '100', TRACEGATE_ENRICHMENT: 'false',
    }));
    const url = `http://127.0.0.1:${running.port}`;
    const auth = { authorization: `Bearer ${(await createKey(running.storage, 'disk-co')).key}` };
    const acked: string[] = [];
    const readStatuses: number[] = [];
    const read = async () => {
      for (const path of ['/api/traces?limit=1', '/api/audit?limit=1']) {
        const res = await get(`${url}${path}`, auth);
        readStatuses.push(res.status);
        if (res.status === 503) {
          expect(res.json.error.code).to.equal('unavailable');
          expect(res.headers.get('retry-after')).to.equal('5');
        }
      }
    };
    const ingest = async (i: number) => {
      const id = `full-${i}`;
      // Random, so it does not compress: about 200 KB a trace, in the spool and then in DuckDB's WAL.
      const res = await post(`${url}/api/traces`, { requestId: id, prompt: randomBytes(150_000).toString('base64'), response: 'r', model: 'gpt-4o-mini' }, auth);
      if (res.status === 200) acked.push(id);
      else expect(res.status, res.text).to.equal(503);
    };

    // Ingest until the checkpoint fails and reads notice.
    let i = 0;
    for (; i < 400 && !readStatuses.some((s) => s !== 200); i++) {
      await ingest(i);
      if (i % 5 === 4) { await sleep(150); await read(); }
    }
    expect(readStatuses.some((s) => s !== 200), 'the disk never filled').to.equal(true);
    // Broken for a while: more traces (into the spool while it has room, else 503), reads and readiness.
    const brokenUntil = Date.now() + 5_000;
    for (; Date.now() < brokenUntil; i++) {
      await ingest(i);
      await read();
      await sleep(200);
    }
    expect(readStatuses.filter((s) => s === 500), `read statuses: ${readStatuses.join(' ')}`).to.deep.equal([]);
    expect(readStatuses.slice(-4), 'reads while the disk is full').to.deep.equal([503, 503, 503, 503]);
    const ready = await get(`${url}/readyz`);
    expect(ready.status).to.equal(503);
    expect(ready.json.storage).to.equal('unreachable');

    execFileSync('mount', ['-o', 'remount,size=256m', dir]);
    const deadline = Date.now() + 60_000;
    while ((await get(`${url}/readyz`)).status !== 200) {
      expect(Date.now(), '/readyz 200 after the disk grew').to.be.below(deadline);
      await sleep(250);
    }
    let ids: string[] = [];
    while (true) {
      const res = await get(`${url}/api/traces?limit=1000`, auth);
      ids = res.status === 200 ? res.json.items.map((t: { traceId: string }) => t.traceId) : [];
      if (acked.every((id) => ids.includes(id))) break;
      expect(Date.now(), `stored ${ids.length} of ${acked.length} acknowledged`).to.be.below(deadline);
      await sleep(250);
    }
    expect(acked.length).to.be.above(0);
    expect(new Set(ids).size, 'duplicates').to.equal(ids.length);
    expect((await get(`${url}/api/audit?limit=1`, auth)).status).to.equal(200);
  });
});
