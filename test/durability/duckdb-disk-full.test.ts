// The embedded store on a full disk. With a 16 MiB checkpoint threshold, DuckDB's checkpoint fails for lack of
// space and it invalidates the database: until there is space again, reads answer 503 (not 500) and /readyz 503.
// With the default (128 MiB), the disk fills before a checkpoint: the spool and DuckDB's log cannot grow, ingestion
// answers 503. Either way, once the disk grows the collector recovers without a restart and stores every
// acknowledged trace once. Needs a small tmpfs, so mount permission (root); test/storage/duckdb-invalidated.test.ts
// covers the invalidated database's recovery portably.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../config/index.ts';
import { startServer, type Running } from '../../collector/server.ts';
import { createKey } from '../../collector/workspaces/admin.ts';
import { sleep } from '../support/process.ts';
import { get, post } from '../support/server.ts';

describe('durability: the embedded store on a full disk, then the disk grows', function () {
  this.timeout(360_000);
  let dir: string;
  let mounted = false;
  let running: Running | null = null;

  beforeEach(function () {
    mounted = false;
    running = null;
    dir = mkdtempSync(join(tmpdir(), 'tracegate-diskfull-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', dir], { stdio: 'pipe' });
      mounted = true;
    } catch (err) {
      console.warn(`      skipped: cannot mount a tmpfs here (needs root): ${(err as Error).message.split('\n')[0]}`);
      this.skip();
    }
  });

  afterEach(async () => {
    try {
      await running?.close();
    } finally {
      // never leave the tmpfs mounted: a lazy unmount when it is still busy
      if (mounted)
        try {
          execFileSync('umount', [dir], { stdio: 'pipe' });
        } catch {
          execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
        }
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** A server on the tmpfs, a key, and the helpers both cases use. */
  async function start(env: Record<string, string>) {
    running = await startServer(
      loadConfig({
        TRACEGATE_PORT: '0',
        TRACEGATE_HOST: '127.0.0.1',
        TRACEGATE_DATA_DIR: dir,
        TRACEGATE_LOG_LEVEL: 'silent',
        TRACEGATE_FLUSH_INTERVAL_MS: '100',
        TRACEGATE_ENRICHMENT: 'false',
        ...env,
      }),
    );
    const url = `http://127.0.0.1:${running.port}`;
    const auth = { authorization: `Bearer ${(await createKey(running.storage, 'disk-co')).key}` };
    const acked: string[] = [];
    const refused: number[] = [];
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
      const res = await post(
        `${url}/api/traces`,
        { requestId: id, prompt: randomBytes(150_000).toString('base64'), response: 'r', model: 'gpt-4o-mini' },
        auth,
      );
      if (res.status === 200) acked.push(id);
      else {
        expect(res.status, res.text).to.equal(503);
        refused.push(i);
      }
    };
    /** The disk grows: ready again without a restart, every acknowledged trace stored once. */
    const recovers = async () => {
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
      await ingest(100_000);
      expect(acked.at(-1), 'ingests again').to.equal('full-100000');
    };
    return { acked, refused, readStatuses, read, ingest, recovers, url };
  }

  it('a checkpoint failing for space (16 MiB threshold): reads 503 while broken, recovers without a restart, every acknowledged trace stored', async () => {
    // Room for DuckDB's WAL to reach its 16 MiB checkpoint threshold, not for the checkpoint to write it out.
    const t = await start({ TRACEGATE_DUCKDB_CHECKPOINT_MB: '16' });
    // Ingest until the checkpoint fails and reads notice.
    let i = 0;
    for (; i < 400 && !t.readStatuses.some((s) => s !== 200); i++) {
      await t.ingest(i);
      if (i % 5 === 4) {
        await sleep(150);
        await t.read();
      }
    }
    expect(
      t.readStatuses.some((s) => s !== 200),
      'the disk never filled',
    ).to.equal(true);
    // Broken for a while: more traces (into the spool while it has room, else 503), reads and readiness.
    const brokenUntil = Date.now() + 5_000;
    for (; Date.now() < brokenUntil; i++) {
      await t.ingest(i);
      await t.read();
      await sleep(200);
    }
    expect(
      t.readStatuses.filter((s) => s === 500),
      `read statuses: ${t.readStatuses.join(' ')}`,
    ).to.deep.equal([]);
    expect(t.readStatuses.slice(-4), 'reads while the disk is full').to.deep.equal([503, 503, 503, 503]);
    const ready = await get(`${t.url}/readyz`);
    expect(ready.status).to.equal(503);
    expect(ready.json.storage).to.equal('unreachable');
    await t.recovers();
  });

  it('the disk full before any checkpoint (the default threshold): ingestion 503, never a 500, recovers without a restart', async () => {
    const t = await start({});
    let i = 0;
    for (; i < 400 && t.refused.length < 5; i++) {
      await t.ingest(i);
      if (i % 5 === 4) {
        await sleep(150);
        await t.read();
      }
    }
    expect(t.refused.length, 'the disk never filled').to.equal(5);
    expect(
      t.readStatuses.filter((s) => s !== 200 && s !== 503),
      `read statuses: ${t.readStatuses.join(' ')}`,
    ).to.deep.equal([]);
    await t.recovers();
  });
});
