// Rate limits shared through Redis across two servers, and the in-memory insurance when Redis goes away.
import { expect } from 'chai';
import { startRedis, type TestRedis } from '../support/redis.ts';
import { get, post, startTestServer, type TestServer } from '../support/server.ts';
import { loadConfig } from '../../config/index.ts';
import { createKey } from '../../collector/workspaces/admin.ts';

describe('rate limiting with Redis', function () {
  this.timeout(120_000);
  let redis: TestRedis;
  let a: TestServer;
  let b: TestServer;
  before(async () => {
    redis = await startRedis();
    const env = {
      TRACEGATE_REDIS_URL: redis.url,
      TRACEGATE_RATE_LIMIT_POINTS: '4',
      TRACEGATE_RATE_LIMIT_WINDOW_SECONDS: '60',
    };
    a = await startTestServer('clickhouse', env);
    // A second instance on the same ClickHouse database: the same key works on both, the limit is shared.
    b = await startTestServer('clickhouse', { ...env, TRACEGATE_CLICKHOUSE_DATABASE: a.config.CLICKHOUSE_DATABASE });
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await redis?.stop();
  });

  it('counts requests to either instance against one limit per key and route', async () => {
    const k = await createKey(a.running.storage, 'redis-co');
    const h = { authorization: `Bearer ${k.key}` };
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await post(`${(i % 2 ? b : a).url}/api/traces`, { prompt: 'p' }, h)).status);
    expect(statuses).to.deep.equal([200, 200, 200, 200, 429]);
  });

  it('answers at once and keeps limiting when Redis hangs (accepts, never answers), and goes back to it when it answers', async function () {
    if (redis.external) this.skip();
    const k = await createKey(a.running.storage, 'redis-hung-co');
    const h = { authorization: `Bearer ${k.key}` };
    redis.pause();
    try {
      const statuses: number[] = [];
      const started = Date.now();
      for (let i = 0; i < 5; i++) statuses.push((await post(`${a.url}/api/traces`, { prompt: 'p' }, h)).status);
      // the first request waits out one command timeout (200 ms); the others skip Redis
      expect(Date.now() - started).to.be.below(2000);
      expect(statuses).to.deep.equal([200, 200, 200, 200, 429]);
      // a bad key's failed-authentication count does not hang either
      const bad = await post(
        `${a.url}/api/traces`,
        { prompt: 'p' },
        { authorization: 'Bearer tg_0000000000000000_bad' },
      );
      expect(bad.status).to.equal(401);
    } finally {
      redis.resume();
    }
    // after the skip window Redis counts again: one limit across both instances
    await new Promise((r) => setTimeout(r, 5200));
    const k2 = await createKey(a.running.storage, 'redis-back-co');
    const h2 = { authorization: `Bearer ${k2.key}` };
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await post(`${(i % 2 ? b : a).url}/api/traces`, { prompt: 'p' }, h2)).status);
    expect(statuses).to.deep.equal([200, 200, 200, 200, 429]);
  });

  it('keeps limiting, per instance, when Redis is gone (insurance limiter), never failing requests', async () => {
    const k = await createKey(a.running.storage, 'redis-down-co');
    const h = { authorization: `Bearer ${k.key}` };
    await redis.stop();
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await post(`${a.url}/api/traces`, { prompt: 'p' }, h);
      statuses.push(res.status);
      expect(res.headers.get('x-ratelimit-remaining')).to.match(/^\d+$/);
    }
    expect(statuses).to.deep.equal([200, 200, 200, 200, 429]);
    // ... and says so: a counter on /metrics (the log has a warning, at most once a minute)
    const metrics = (await get(`${a.url}/metrics`)).text;
    expect(Number(/^tracegate_rate_limit_redis_failures_total (\d+)/m.exec(metrics)?.[1])).to.be.greaterThan(0);
  });
});

describe('TRACEGATE_REDIS_URL', () => {
  it('must be a redis:// or rediss:// URL', () => {
    expect(() => loadConfig({ TRACEGATE_REDIS_URL: 'http://localhost:6379' })).to.throw(/TRACEGATE_REDIS_URL/);
    expect(loadConfig({ TRACEGATE_REDIS_URL: 'rediss://user:pw@cache:6380/2' }).REDIS_URL).to.equal(
      'rediss://user:pw@cache:6380/2',
    );
  });
});
