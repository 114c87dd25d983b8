// Rate limits shared through Redis across two servers, and the in-memory insurance when Redis goes away.
import { expect } from 'chai';
import { startRedis, type TestRedis } from '../support/redis.ts';
import { post, startTestServer, type TestServer } from '../support/server.ts';
import { createKey } from '../../collector/admin.ts';

describe('rate limiting with Redis', function () {
  this.timeout(60_000);
  let redis: TestRedis;
  let a: TestServer;
  let b: TestServer;
  before(async () => {
    redis = await startRedis();
    const env = { TRACEGATE_REDIS_URL: redis.url, TRACEGATE_RATE_LIMIT_POINTS: '4', TRACEGATE_RATE_LIMIT_WINDOW_SECONDS: '60' };
    a = await startTestServer('clickhouse', env);
    // A second instance on the same ClickHouse database: the same key works on both, the limit is shared.
    b = await startTestServer('clickhouse', { ...env, TRACEGATE_CLICKHOUSE_DATABASE: a.config.CLICKHOUSE_DATABASE });
  });
  after(async () => { await a?.close(); await b?.close(); await redis?.stop(); });

  it('counts requests to either instance against one limit per key and route', async () => {
    const k = await createKey(a.running.storage, 'redis-co');
    const h = { authorization: `Bearer ${k.key}` };
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await post(`${(i % 2 ? b : a).url}/api/traces`, { prompt: 'p' }, h)).status);
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
  });
});
