// DuckDB invalidates its database after a fatal error (a checkpoint that hit a full disk): every later statement
// fails until the database is reopened. The store must reopen it (with backoff) without a restart, and answer the
// meantime as a storage outage (503), not as a bug (500). DuckDB's own checkpoint fault trigger
// (debug_checkpoint_abort) makes the failure real and portable; the disk-full case is test/durability/duckdb-disk-full.test.ts.
import { expect } from 'chai';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { isStorageOutage } from '../../core/errors.ts';
import { emptySpan } from '../../core/record.ts';
import { DuckDbStorage } from '../../storage/duckdb.ts';
import { sleep } from '../support/process.ts';
import { get, post, startTestServer, type TestServer } from '../support/server.ts';

/** Makes the next commit checkpoint, and that checkpoint fail fatally (settings of this instance only: a reopen drops them). */
async function failNextCheckpoint(storage: DuckDbStorage): Promise<void> {
  const conn = (storage as unknown as { conn: DuckDBConnection }).conn;
  await conn.run("SET checkpoint_threshold = '0b'");
  await conn.run("SET debug_checkpoint_abort = 'before_header'");
}

const isLost = (storage: DuckDbStorage) => (storage as unknown as { lost: unknown }).lost !== null;

/** Keeps the database directory from being opened: a regular file where the directory was. */
function blockDir(dir: string): () => void {
  renameSync(dir, `${dir}.away`);
  writeFileSync(dir, '');
  return () => {
    rmSync(dir);
    renameSync(`${dir}.away`, dir);
  };
}

async function until(what: string, probe: () => Promise<boolean> | boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const span = (traceId: string) => ({
  ...emptySpan('ws', 'native'),
  traceId,
  spanId: 's1',
  startTimeNs: '1000000',
  endTimeNs: '2000000',
});

describe('DuckDB: an invalidated database is reopened without a restart', function () {
  this.timeout(120_000);
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'tracegate-invalidated-'));
  });
  afterEach(() => {
    rmSync(root, { recursive: true, force: true });
  });

  it('fails as an outage while it cannot reopen, backs off, then reopens with the data', async () => {
    const dbDir = join(root, 'db');
    const storage = new DuckDbStorage(join(dbDir, 'tracegate.duckdb'));
    await storage.init();
    try {
      await storage.insertSpans([span('t1')]);
      await failNextCheckpoint(storage);
      // Blocked before the failure, so no reopen can succeed early however slow this machine is.
      const unblock = blockDir(dbDir);
      let waiting: Error;
      try {
        const fatal = await storage.insertSpans([span('t2')]).then(
          () => null,
          (e: unknown) => e as Error,
        );
        expect(fatal?.message).to.match(/^FATAL Error: [\s\S]*checkpoint/i);
        expect(isStorageOutage(fatal)).to.equal(true);
        // Before the backoff is over: refused at once, without touching DuckDB.
        waiting = (await storage.countSpans('ws').then(
          () => null,
          (e: unknown) => e as Error,
        )) as Error;
        expect(waiting.message).to.match(/^DuckDB database unavailable \(reopening in [01] s\): /);
        expect(isStorageOutage(waiting)).to.equal(true);
        expect(await storage.ping()).to.equal(false);
        // After it: a reopen, which fails here, and a longer wait for the next one.
        await sleep(1_100);
        waiting = (await storage.countSpans('ws').then(
          () => null,
          (e: unknown) => e as Error,
        )) as Error;
        expect(waiting.message).to.match(/^DuckDB database unavailable \(reopening in [12] s\): /);
        expect(waiting.message).to.not.match(/FATAL/);
        expect(isStorageOutage(waiting)).to.equal(true);
      } finally {
        unblock();
      }
      await until('the reopen', () => storage.ping());
      expect((await storage.getTrace('ws', 't1')).map((s) => s.spanId)).to.deep.equal(['s1']);
      await storage.insertSpans([span('t2'), span('t3')]); // the retry of t2; the fault trigger went with the old instance
      expect(await storage.countSpans('ws')).to.equal(3);
      expect(isLost(storage)).to.equal(false);
    } finally {
      await storage.close();
    }
  });

  describe('through the HTTP server', () => {
    let s: TestServer;
    let storage: DuckDbStorage;
    let dbDir: string;
    beforeEach(async () => {
      dbDir = join(root, 'db');
      storage = new DuckDbStorage(join(dbDir, 'tracegate.duckdb'));
      s = await startTestServer('duckdb', { TRACEGATE_FLUSH_INTERVAL_MS: '50' }, storage);
    });
    afterEach(async () => {
      await s.close();
    });

    it('answers reads 503 while broken, then reads, /readyz and every acknowledged trace come back', async () => {
      const k = await s.key('inv-co');
      const auth = { authorization: `Bearer ${k.key}` };
      const acked: string[] = [];
      const ingest = async (n: number) => {
        for (let i = 0; i < n; i++) {
          const id = `inv-${acked.length}`;
          const res = await post(
            `${s.url}/api/traces`,
            { requestId: id, prompt: 'p', response: 'r', model: 'gpt-4o-mini' },
            auth,
          );
          expect(res.status, res.text).to.equal(200);
          acked.push(id);
        }
      };
      await ingest(5);
      await s.running.pipeline.flush();
      expect((await get(`${s.url}/api/traces?limit=100`, auth)).json.items).to.have.length(5);

      await failNextCheckpoint(storage);
      const unblock = blockDir(dbDir); // before the failure: no reopen can succeed early on a slow machine
      try {
        await ingest(5); // the writer's next commit checkpoints, fails, and invalidates the database
        await until('the database to be invalidated', () => isLost(storage));
        await ingest(5); // acknowledged into the spool
        for (const path of ['/api/traces', '/api/audit']) {
          const res = await get(`${s.url}${path}`, auth);
          expect(res.status, `${path}: ${res.text}`).to.equal(503);
          expect(res.json.error.code).to.equal('unavailable');
          expect(res.headers.get('retry-after')).to.equal('5');
        }
        const ready = await get(`${s.url}/readyz`);
        expect(ready.status).to.equal(503);
        expect(ready.json.storage).to.equal('unreachable');
      } finally {
        unblock();
      }

      await until('/readyz 200', async () => (await get(`${s.url}/readyz`)).status === 200);
      let ids: string[] = [];
      await until('every acknowledged trace', async () => {
        const res = await get(`${s.url}/api/traces?limit=100`, auth);
        ids = res.status === 200 ? res.json.items.map((t: { traceId: string }) => t.traceId) : [];
        return acked.every((id) => ids.includes(id));
      });
      expect([...ids].sort()).to.deep.equal([...acked].sort());
      expect((await get(`${s.url}/api/audit`, auth)).status).to.equal(200);
    });
  });
});
