// Signed webhook deliveries across collectors: two running instances on one ClickHouse database refuse a delivery the
// other accepted (storage claims, or Redis when TRACEGATE_REDIS_URL is set), share the sealed secrets through
// TRACEGATE_SECRETS_KEY, and see a revocation made through the other within its cache's few seconds.
import { expect } from 'chai';
import { createHmac, randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { startRedis, type TestRedis } from '../support/redis.ts';
import { cli, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';

const sign = (secret: string, ts: string, body: string) =>
  `v1=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`;

function suite(name: string, redis: boolean) {
  describe(`webhook deliveries on two collectors sharing one ClickHouse database (${name})`, function () {
    this.timeout(240_000);
    const key = randomBytes(32).toString('hex');
    let r: TestRedis | null = null;
    let a: TestServer;
    let b: TestServer;
    let auth: Record<string, string>;
    let secret: string;
    let secretId: string;
    const workspace = `replay-${redis ? 'redis' : 'storage'}`;

    before(async () => {
      r = redis ? await startRedis() : null;
      const extra = { TRACEGATE_SECRETS_KEY: key, ...(r ? { TRACEGATE_REDIS_URL: r.url } : {}) };
      a = await startTestServer('clickhouse', extra);
      b = await startTestServer('clickhouse', {
        ...extra,
        TRACEGATE_CLICKHOUSE_DATABASE: a.config.CLICKHOUSE_DATABASE,
      });
      auth = {
        authorization: `Bearer ${JSON.parse((await cli(a, ['keys', 'create', '--workspace', workspace, '--json'])).stdout).key}`,
      };
      ({ secret, secretId } = JSON.parse(
        (await cli(a, ['webhooks', 'secret', 'add', '--workspace', workspace, '--json'])).stdout,
      ));
    });
    after(async () => {
      await b?.close();
      await a?.close();
      await r?.stop();
    });

    const deliver = (s: TestServer, body: string, ts: string, sig = sign(secret, ts, body)) =>
      post(`${s.url}/api/ingest/webhooks`, body, {
        ...auth,
        'x-service-delivery-timestamp': ts,
        'x-service-signature': sig,
      });
    const stored = async (title: string) => {
      await flushed(a);
      await flushed(b);
      const items = (await get(`${a.url}/api/security-alerts?limit=200`, auth)).json.items as Array<{ title: string }>;
      return items.filter((x) => x.title === title).length;
    };

    it('verifies on either collector with the secret made through one (a shared TRACEGATE_SECRETS_KEY)', async () => {
      const body = JSON.stringify({ title: 'made on a, verified on b' });
      const res = await deliver(b, body, String(Math.floor(Date.now() / 1000)));
      expect(res.status, res.text).to.equal(200);
      expect(res.json.alert).to.include({ signature: 'verified', secretId });
    });

    it('refuses on one collector the delivery the other accepted, and stores it once', async () => {
      const body = JSON.stringify({ title: 'replayed across', severity: 'high' });
      const ts = String(Math.floor(Date.now() / 1000));
      const first = await deliver(a, body, ts);
      expect(first.status, first.text).to.equal(200);
      const replay = await deliver(b, body, ts);
      expect(replay.status, replay.text).to.equal(409);
      expect(replay.json.error.code).to.equal('replayed_delivery');
      expect((await deliver(a, body, ts)).status).to.equal(409);
      expect(await stored('replayed across')).to.equal(1);
      if (r) {
        const client = new Redis(r.url);
        const keys = await client.keys('tracegate:webhook-delivery:*');
        await client.quit();
        expect(keys.length).to.be.greaterThan(0);
      }
    });

    it('lets at most one of two simultaneous copies through, and stores it once', async () => {
      for (let i = 0; i < 8; i++) {
        const title = `race ${i}`;
        const body = JSON.stringify({ title, n: i });
        const ts = String(Math.floor(Date.now() / 1000));
        const answers = await Promise.all([deliver(a, body, ts), deliver(b, body, ts)]);
        const statuses = answers.map((x) => x.status);
        expect(
          statuses.every((s) => s === 200 || s === 409),
          JSON.stringify(statuses),
        ).to.equal(true);
        expect(statuses.filter((s) => s === 200).length, JSON.stringify(statuses)).to.be.at.most(1);
        expect(await stored(title)).to.equal(1);
        // And a third copy later is refused by both.
        expect((await deliver(a, body, ts)).status).to.equal(409);
        expect((await deliver(b, body, ts)).status).to.equal(409);
      }
    });

    it('sees a secret revoked through the other collector within its cache time', async () => {
      const out = await cli(a, ['webhooks', 'secret', 'revoke', secretId]);
      expect(out.code, out.stderr).to.equal(0);
      // The workspace's only secret: a signed delivery is then taken as unverified (spec: headers but no secrets).
      const signatureOn = async (s: TestServer) => {
        const res = await deliver(
          s,
          JSON.stringify({ title: 'after revoke', r: Math.random() }),
          String(Math.floor(Date.now() / 1000)),
        );
        expect(res.status, res.text).to.equal(200);
        return res.json.alert.signature;
      };
      expect(await signatureOn(a)).to.equal('unverified');
      await new Promise((resolve) => setTimeout(resolve, 5_500));
      expect(await signatureOn(b)).to.equal('unverified');
    });
  });
}

suite('claims in storage', false);
suite('claims in Redis', true);

describe('webhook secrets sealed with another key', function () {
  this.timeout(120_000);
  it('answer 503 naming TRACEGATE_SECRETS_KEY, not 401, when a collector cannot open them', async () => {
    const a = await startTestServer('clickhouse', { TRACEGATE_SECRETS_KEY: randomBytes(32).toString('hex') });
    const b = await startTestServer('clickhouse', {
      TRACEGATE_CLICKHOUSE_DATABASE: a.config.CLICKHOUSE_DATABASE,
      TRACEGATE_SECRETS_KEY: randomBytes(32).toString('hex'),
    });
    try {
      const auth = { authorization: `Bearer ${(await a.key('sealed')).key}` };
      const { secret } = JSON.parse(
        (await cli(a, ['webhooks', 'secret', 'add', '--workspace', 'sealed', '--json'])).stdout,
      );
      const body = '{"title":"x"}';
      const ts = String(Math.floor(Date.now() / 1000));
      const headers = { ...auth, 'x-service-delivery-timestamp': ts, 'x-service-signature': sign(secret, ts, body) };
      expect((await post(`${a.url}/api/ingest/webhooks`, body, headers)).status).to.equal(200);
      const res = await post(`${b.url}/api/ingest/webhooks`, body, headers);
      expect(res.status).to.equal(503);
      expect(res.json.error.code).to.equal('secrets_key_mismatch');
      expect(res.json.error.message).to.match(/TRACEGATE_SECRETS_KEY/);
      expect(res.text).to.not.include(secret);
    } finally {
      await b.close();
      await a.close();
    }
  });
});
