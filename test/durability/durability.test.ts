// "An acknowledged record is never lost": a server SIGKILLed right after acknowledging, and
// ClickHouse stopped in the middle of ingestion, both end with every acknowledged trace stored once.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../config/index.ts';
import { startServer } from '../../collector/server.ts';
import { createKey } from '../../collector/workspaces/admin.ts';
import { createStorage } from '../../storage/index.ts';
import { startClickHouse, type TestClickHouse } from '../support/clickhouse.ts';
import { freePort, killNow, sleep, terminate, waitReady } from '../support/process.ts';
import { BACKENDS, get, post, testEnv } from '../support/server.ts';
import { useSharedClickHouse } from '../support/shared.ts';

function spawnServer(env: Record<string, string>, logFile: string): ChildProcess {
  const fd = openSync(logFile, 'a');
  const child = spawn(process.execPath, ['bin/tracegate.ts', 'serve'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  return child;
}

async function listAll(url: string, auth: Record<string, string>): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { json: { items: Array<{ traceId: string }>; nextCursor: string | null } } = await get(
      `${url}/api/traces?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      auth,
    );
    ids.push(...page.json.items.map((t) => t.traceId));
    cursor = page.json.nextCursor;
  } while (cursor);
  return ids;
}

for (const backend of BACKENDS) {
  describe(`durability: SIGKILL right after acknowledging (${backend})`, function () {
    this.timeout(240_000);
    if (backend === 'clickhouse') useSharedClickHouse();
    it('comes back with every acknowledged trace stored exactly once', async () => {
      const port = await freePort();
      // A long flush interval so acknowledged data is still only in the spool when the process dies.
      const env = testEnv(backend, {
        TRACEGATE_PORT: String(port),
        TRACEGATE_FLUSH_INTERVAL_MS: '60000',
        TRACEGATE_LOG_LEVEL: 'info',
      });
      const config = loadConfig(env);
      const storage = createStorage(config);
      await storage.init();
      const k = await createKey(storage, 'crash-co');
      await storage.close();
      const auth = { authorization: `Bearer ${k.key}` };
      const url = `http://127.0.0.1:${port}`;
      const log = join(config.DATA_DIR, 'server.log');

      let child = spawnServer(env, log);
      await waitReady(child, async () => (await fetch(`${url}/healthz`)).ok, 'tracegate', log);
      const acked = new Set<string>();
      const N = 300;
      // Fire everything at once; kill the moment the N/2-th acknowledgement arrives, with requests still in flight.
      let killed = false;
      await Promise.all(
        Array.from({ length: N }, async (_, i) => {
          const id = `crash-${i}`;
          try {
            const res = await post(
              `${url}/api/traces`,
              { requestId: id, prompt: `p${i}`, response: 'r', model: 'gpt-4o-mini' },
              auth,
            );
            if (res.status === 200 && !killed) {
              acked.add(id);
              if (acked.size === N / 2) {
                killed = true;
                child.kill('SIGKILL');
              }
            }
          } catch {
            /* connection reset by the kill: not acknowledged */
          }
        }),
      );
      await killNow(child);
      expect(acked.size).to.be.at.least(N / 2);

      child = spawnServer({ ...env, TRACEGATE_FLUSH_INTERVAL_MS: '100' }, log);
      try {
        await waitReady(child, async () => (await fetch(`${url}/readyz`)).ok, 'tracegate', log);
        let ids: string[] = [];
        for (let i = 0; i < 100; i++) {
          ids = await listAll(url, auth);
          if ([...acked].every((id) => ids.includes(id))) break;
          await sleep(100);
        }
        for (const id of acked) expect(ids, `acknowledged ${id} missing`).to.include(id);
        expect(new Set(ids).size, 'duplicates').to.equal(ids.length);
        for (const id of ids) expect(id).to.match(/^crash-\d+$/);
      } finally {
        await terminate(child);
        rmSync(config.DATA_DIR, { recursive: true, force: true });
      }
    });
  });
}

describe('durability: ClickHouse hung (accepting connections, answering nothing)', function () {
  this.timeout(240_000);
  let ch: TestClickHouse;
  before(async function () {
    ch = await startClickHouse();
    if (ch.external) this.skip(); // SIGSTOP needs a server this helper runs
  });
  after(async () => {
    await ch?.resume().catch(() => {});
    await ch?.dispose();
  });

  it('keeps answering within seconds (stale settings, fast 503 for an unknown key, readyz 503) and loses nothing', async () => {
    const config = loadConfig(
      testEnv('clickhouse', { TRACEGATE_CLICKHOUSE_URL: ch.url, TRACEGATE_FLUSH_INTERVAL_MS: '200' }),
    );
    const running = await startServer(config);
    const url = `http://127.0.0.1:${running.port}`;
    try {
      const known = await createKey(running.storage, 'hung-co');
      const fresh = await createKey(running.storage, 'hung-co');
      const auth = { authorization: `Bearer ${known.key}` };
      expect((await post(`${url}/api/traces`, { requestId: 'h-0', prompt: 'p', response: 'r' }, auth)).status).to.equal(
        200,
      );
      await running.pipeline.flush();
      await ch.pause();
      await sleep(5_500); // the settings cache (5 s) has expired; the key cache (30 s) has not
      const timed = async <T>(f: () => Promise<T>) => {
        const t = performance.now();
        const v = await f();
        return { v, ms: performance.now() - t };
      };
      const ok = await timed(() => post(`${url}/api/traces`, { requestId: 'h-1', prompt: 'p', response: 'r' }, auth));
      expect(ok.v.status).to.equal(200);
      expect(ok.ms).to.be.below(5_000);
      const unknown = await timed(() =>
        post(`${url}/api/traces`, { requestId: 'h-2', prompt: 'p' }, { authorization: `Bearer ${fresh.key}` }),
      );
      expect(unknown.v.status).to.equal(503);
      expect(unknown.v.headers.get('retry-after')).to.equal('5');
      expect(unknown.ms).to.be.below(5_000);
      const ready = await timed(() => get(`${url}/readyz`));
      expect(ready.v.status).to.equal(503);
      expect(ready.ms).to.be.below(5_000);
      await ch.resume();
      await running.pipeline.flush();
      expect((await running.storage.getTraces(known.workspaceId, ['h-0', 'h-1'])).size).to.equal(2);
    } finally {
      await ch.resume();
      await running.close();
    }
  });
});

describe('durability: ClickHouse stopped during ingestion, then restarted', function () {
  this.timeout(360_000);
  let ch: TestClickHouse;
  before(async () => {
    ch = await startClickHouse();
  });
  after(async () => {
    await ch?.dispose();
  });

  it('keeps acknowledging into the spool, reports not ready, and loses nothing', async () => {
    const env = testEnv('clickhouse', { TRACEGATE_CLICKHOUSE_URL: ch.url, TRACEGATE_FLUSH_INTERVAL_MS: '200' });
    const config = loadConfig(env);
    const running = await startServer(config);
    const url = `http://127.0.0.1:${running.port}`;
    try {
      const k = await createKey(running.storage, 'outage-co');
      const auth = { authorization: `Bearer ${k.key}` };
      const acked: string[] = [];
      const send = async (from: number, to: number) => {
        for (let i = from; i < to; i += 20) {
          const batch = Array.from({ length: 20 }, (_, j) => ({ requestId: `o-${i + j}`, prompt: 'p', response: 'r' }));
          const res = await post(`${url}/api/traces`, batch, auth);
          if (res.status === 200) acked.push(...batch.map((b) => b.requestId));
        }
      };
      await send(0, 200);
      await running.pipeline.flush();
      await ch.stop();
      await send(200, 600);
      expect(acked.length).to.equal(600);
      const ready = await get(`${url}/readyz`);
      expect(ready.status).to.equal(503);
      expect(ready.json.storage).to.equal('unreachable');
      await ch.restart();
      let ids: string[] = [];
      for (let i = 0; i < 200; i++) {
        const r = await get(`${url}/api/traces?limit=1000`, auth).catch(() => null);
        if (r?.status === 200) {
          ids = await listAll(url, auth);
          if (ids.length >= acked.length) break;
        }
        await sleep(150);
      }
      expect(new Set(ids)).to.deep.equal(new Set(acked));
      expect(ids.length).to.equal(acked.length);
      expect((await get(`${url}/readyz`)).status).to.equal(200);
    } finally {
      await running.close();
      rmSync(config.DATA_DIR, { recursive: true, force: true });
    }
  });

  it('starts while ClickHouse is down: known keys keep ingesting into the spool, unknown ones get 503; then it migrates, replays and serves', async () => {
    const env = testEnv('clickhouse', { TRACEGATE_CLICKHOUSE_URL: ch.url, TRACEGATE_FLUSH_INTERVAL_MS: '100' });
    const config = loadConfig(env);
    let running = await startServer(config);
    const k = await createKey(running.storage, 'cold-start-co');
    const never = await createKey(running.storage, 'cold-start-other'); // never used before the outage
    const auth = { authorization: `Bearer ${k.key}` };
    try {
      const acked: string[] = [];
      // Used once while storage answers: the key is then known to this process through the outage.
      expect(
        (
          await post(
            `http://127.0.0.1:${running.port}/api/traces`,
            { requestId: 'cs-first', prompt: 'p', response: 'r' },
            auth,
          )
        ).status,
      ).to.equal(200);
      acked.push('cs-first');
      await ch.stop();
      for (let i = 0; i < 30; i++) {
        const res = await post(
          `http://127.0.0.1:${running.port}/api/traces`,
          { requestId: `cs-${i}`, prompt: 'p', response: 'r' },
          auth,
        );
        if (res.status === 200) acked.push(`cs-${i}`);
      }
      expect(acked.length).to.equal(31);
      await running.close(); // the final flush fails: the spool keeps the rows
      running = await startServer(config); // ClickHouse still down
      const url = `http://127.0.0.1:${running.port}`;
      expect((await get(`${url}/healthz`)).status).to.equal(200);
      expect((await get(`${url}/readyz`)).status).to.equal(503);
      // The key and its workspace settings were read before the restart (DATA_DIR/cache/last-known.json).
      const during = await post(`${url}/api/traces`, { requestId: 'cs-during', prompt: 'p', response: 'r' }, auth);
      expect(during.status, during.text).to.equal(200);
      acked.push('cs-during');
      const refused = await post(
        `${url}/api/traces`,
        { requestId: 'cs-new', prompt: 'p', response: 'r' },
        { authorization: `Bearer ${never.key}` },
      );
      expect(refused.status).to.equal(503);
      expect(Number(refused.headers.get('retry-after'))).to.be.greaterThan(0);
      await ch.restart();
      let ids: string[] = [];
      for (let i = 0; i < 300 && ids.length < acked.length; i++) {
        const r = await get(`${url}/api/traces?limit=1000`, auth).catch(() => null);
        if (r?.status === 200) ids = await listAll(url, auth);
        else await sleep(150);
      }
      expect(new Set(ids)).to.deep.equal(new Set(acked));
      expect(
        (
          await post(
            `${url}/api/traces`,
            { requestId: 'cs-new', prompt: 'p', response: 'r' },
            { authorization: `Bearer ${never.key}` },
          )
        ).status,
      ).to.equal(200);
      expect((await get(`${url}/readyz`)).status).to.equal(200);
    } finally {
      await running.close();
      rmSync(config.DATA_DIR, { recursive: true, force: true });
    }
  });

  it('answers 503 with Retry-After once the spool bound is reached, and nothing stored is harmed', async () => {
    const env = testEnv('clickhouse', {
      TRACEGATE_CLICKHOUSE_URL: ch.url,
      TRACEGATE_FLUSH_INTERVAL_MS: '100',
      TRACEGATE_SPOOL_MAX_BYTES: String(1024 * 1024),
    });
    const config = loadConfig(env);
    const running = await startServer(config);
    const url = `http://127.0.0.1:${running.port}`;
    try {
      const k = await createKey(running.storage, 'bound-co');
      const auth = { authorization: `Bearer ${k.key}` };
      await post(`${url}/api/traces`, { requestId: 'before-outage', prompt: 'p', response: 'r' }, auth);
      await running.pipeline.flush();
      await ch.stop();
      let status = 200;
      let res: Awaited<ReturnType<typeof post>> | null = null;
      const acked: string[] = [];
      for (let i = 0; i < 200 && status === 200; i++) {
        const id = `b-${i}`;
        res = await post(`${url}/api/traces`, { requestId: id, prompt: 'x'.repeat(20_000), response: 'r' }, auth);
        status = res.status;
        if (status === 200) acked.push(id);
      }
      expect(status).to.equal(503);
      expect(Number(res!.headers.get('retry-after'))).to.be.greaterThan(0);
      expect(res!.json.error.code).to.equal('unavailable');
      await ch.restart();
      let ids: string[] = [];
      for (let i = 0; i < 200; i++) {
        const r = await get(`${url}/api/traces?limit=1000`, auth).catch(() => null);
        if (r?.status === 200) {
          ids = await listAll(url, auth);
          if (ids.length >= acked.length + 1) break;
        }
        await sleep(150);
      }
      expect(new Set(ids)).to.deep.equal(new Set([...acked, 'before-outage']));
    } finally {
      await running.close();
      rmSync(config.DATA_DIR, { recursive: true, force: true });
    }
  });
});
