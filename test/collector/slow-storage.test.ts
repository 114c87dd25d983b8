// Key and settings lookups against a slow storage: the real DuckDB store, its reads delayed on demand.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDbStorage } from '../../storage/duckdb.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { createKey, revokeKey } from '../../collector/workspaces/admin.ts';
import { LastKnown } from '../../collector/workspaces/last-known.ts';
import { KeyVerifier } from '../../collector/auth/key-verifier.ts';
import { SettingsStore } from '../../collector/workspaces/settings.ts';
import { loadConfig } from '../../config/index.ts';
import { sleep } from '../support/process.ts';
import { get, startTestServer } from '../support/server.ts';

describe('lookups against a slow storage', () => {
  let dir: string;
  let real: DuckDbStorage;
  let delayMs = 0;
  let slow: Storage;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tracegate-slow-'));
    real = new DuckDbStorage(join(dir, 'db.duckdb'));
    await real.init();
    // Reads answer `delayMs` late, as a busy storage would: what they read is from when they were asked.
    slow = new Proxy(real, {
      get: (target, prop, recv) => {
        const v = Reflect.get(target, prop, recv);
        if (prop !== 'getApiKey' && prop !== 'getSettings') return typeof v === 'function' ? v.bind(target) : v;
        return async (...args: unknown[]) => {
          const wait = delayMs;
          const read = await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          await sleep(wait);
          return read;
        };
      },
    });
  });
  after(async () => {
    await real.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a key revoked here while a slow lookup runs stays revoked once that lookup lands', async () => {
    const k = await createKey(real, 'slow-keys');
    const keys = new KeyVerifier(slow, 30_000, undefined, 50); // deadline 50 ms
    expect(await keys.verify(k.key)).to.include({ keyId: k.keyId });
    // A cache entry past its time: as after 30 s (forget() would also drop the lookup, so age it instead).
    (keys as unknown as { cache: Map<string, { until: number }> }).cache.get(k.keyId)!.until = 0;
    delayMs = 300;
    const during = keys.verify(k.key); // past the deadline: the stale (valid) record answers
    await sleep(100);
    await real.revokeApiKey(k.keyId, Date.now());
    await keys.forget(k.keyId); // as the admin route does
    expect(await during).to.include({ keyId: k.keyId }); // it started before the revoke
    delayMs = 0;
    expect(await keys.verify(k.key)).to.equal(null);
    await sleep(400); // the lookup begun before the revoke has landed by now
    expect(await keys.verify(k.key)).to.equal(null);
  });

  it('a key revoked here is refused while storage is too slow to answer, also by the last-known copy after a restart', async () => {
    const k = await createKey(real, 'slow-revoked');
    const path = join(dir, 'cache', 'last-known-revoked.json');
    const keys = new KeyVerifier(slow, 30_000, new LastKnown(path), 50); // deadline 50 ms
    expect(await keys.verify(k.key)).to.include({ keyId: k.keyId }); // read from storage: now in the last-known copy
    const at = await revokeKey(real, k.keyId);
    expect(at).to.be.a('number');
    await keys.forget(k.keyId, at!); // as the admin route does
    delayMs = 300; // every lookup now misses the deadline: only the last-known copy answers
    try {
      expect(await keys.verify(k.key)).to.equal(null);
      // A collector started afresh reads the copy from disk: the key stays refused there too.
      const restarted = new KeyVerifier(slow, 30_000, new LastKnown(path), 50);
      expect(await restarted.verify(k.key)).to.equal(null);
      expect(restarted.rejection(k.key)).to.deep.include({ reason: 'revoked_key' });
    } finally {
      delayMs = 0;
    }
  });

  it('a flood of unknown key ids neither evicts known keys nor makes them unknown (the throttled lookup budget spares them)', async () => {
    const k = await createKey(real, 'flood-keys');
    let lookups = 0;
    // Unknown ids answer at once (as storage would, without the query's cost): the flood takes a moment, not 15 s.
    const counting = new Proxy(real, {
      get: (t, p, r) =>
        p === 'getApiKey'
          ? (id: string) => {
              lookups++;
              return id === k.keyId ? t.getApiKey(id) : Promise.resolve(null);
            }
          : ((v) => (typeof v === 'function' ? v.bind(t) : v))(Reflect.get(t, p, r)),
    });
    const keys = new KeyVerifier(counting, 30_000);
    expect(await keys.verify(k.key)).to.include({ keyId: k.keyId });
    for (let i = 0; i < 10_050; i++) await keys.verify(`tg_${i.toString(16).padStart(16, '0')}_${'A'.repeat(43)}`);
    lookups = 0;
    expect(await keys.verify(k.key)).to.include({ keyId: k.keyId });
    expect(lookups).to.equal(0); // still cached
    (keys as unknown as { cache: Map<string, { until: number }> }).cache.get(k.keyId)!.until = 0; // as after 30 s
    expect(keys.known(k.key)).to.equal(true);
    expect(keys.known(`tg_${'f'.repeat(16)}_${'A'.repeat(43)}`)).to.equal(false);
  });

  it('settings updated here while a slow lookup runs are not replaced by what it read', async () => {
    const config = loadConfig({ TRACEGATE_DATA_DIR: dir });
    const store = new SettingsStore(slow, config, 5_000, undefined, undefined, 50); // deadline 50 ms
    const ws = (await createKey(real, 'slow-settings')).workspaceId;
    await store.update(ws, (d) => ({ ...d, alertWebhookUrl: 'https://hooks.example/1' }));
    (store as unknown as { cache: Map<string, { until: number }> }).cache.get(ws)!.until = 0; // past its time
    delayMs = 300;
    const during = store.forWorkspace(ws);
    await sleep(100);
    delayMs = 0;
    const updated = await store.update(ws, (d) => ({ ...d, alertWebhookUrl: 'https://hooks.example/2' }));
    await during;
    await sleep(400);
    expect((await store.forWorkspace(ws)).version).to.equal(updated.version);
    expect((await store.forWorkspace(ws)).doc.alertWebhookUrl).to.equal('https://hooks.example/2');
  });
});

describe('random key ids while storage is too slow to check them', function () {
  this.timeout(60_000);
  it('count against the address: once it is over TRACEGATE_AUTH_FAILURE_LIMIT, a few lookups a window, then 429 unchecked', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-slow-keys-'));
    const real = new DuckDbStorage(join(dir, 'db.duckdb'));
    await real.init();
    let lookups = 0;
    // Key lookups answer after the 2 s deadline, as a storage kept busy would.
    const storage = new Proxy(real, {
      get: (t, p, r) =>
        p === 'getApiKey'
          ? async (id: string) => {
              lookups++;
              await sleep(2_500);
              return t.getApiKey(id);
            }
          : ((v) => (typeof v === 'function' ? v.bind(t) : v))(Reflect.get(t, p, r)),
    });
    const s = await startTestServer('duckdb', { TRACEGATE_AUTH_FAILURE_LIMIT: '3' }, storage);
    try {
      const random = (i: number) => ({
        authorization: `Bearer tg_${(0xabc000 + i).toString(16).padStart(16, '0')}_${'B'.repeat(43)}`,
      });
      const first: number[] = [];
      for (let i = 0; i < 4; i++) first.push((await get(`${s.url}/api/traces`, random(i))).status);
      expect(first).to.deep.equal([503, 503, 503, 503]); // unknown, and cannot be checked in time: retryable
      const next = await Promise.all(
        Array.from({ length: 15 }, (_, i) => get(`${s.url}/api/traces`, random(100 + i)).then((res) => res.status)),
      );
      expect(next.filter((x) => x === 429)).to.have.length(5);
      expect(lookups).to.equal(4 + 10);
    } finally {
      await s.close();
      await real.close().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
