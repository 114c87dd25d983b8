// tracegate webhooks secret add | list | revoke, with a server running (its loopback admin routes) and without
// (storage opened directly): the secret shown once, stored sealed, the key file made owner-only, every change audited.
import { expect } from 'chai';
import { createHmac } from 'node:crypto';
import { readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../config/index.ts';
import { createStorage } from '../../storage/index.ts';
import { cli, get, post, startTestServer, testEnv } from '../support/server.ts';

const sign = (secret: string, ts: string, body: string) =>
  `v1=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`;

describe('tracegate webhooks secret', function () {
  this.timeout(180_000);

  it('adds, lists and revokes offline; a server started after verifies with the secret, and audits the changes', async () => {
    const env = testEnv('duckdb');
    const run = (args: string[]) => cli(null, args, env);
    try {
      const key = JSON.parse((await run(['keys', 'create', '--workspace', 'acme', '--json'])).stdout) as {
        key: string;
      };
      const missing = await run(['webhooks', 'secret', 'add', '--workspace', 'nobody', '--json']);
      expect(missing.code).to.equal(1);
      expect(missing.stderr).to.match(/no workspace "nobody"/);
      const added = await run(['webhooks', 'secret', 'add', '--workspace', 'acme', '--json']);
      expect(added.code, added.stderr).to.equal(0);
      const { secretId, secret } = JSON.parse(added.stdout) as { secretId: string; secret: string };
      expect(Object.keys(JSON.parse(added.stdout))).to.deep.equal(['secretId', 'secret']);
      expect(secretId).to.match(/^whs_[0-9a-f]{16}$/);
      const keyFile = join(env.TRACEGATE_DATA_DIR!, 'keys', 'secrets.key');
      expect(statSync(keyFile).mode & 0o077).to.equal(0);
      const human = await run(['webhooks', 'secret', 'add', '--workspace', 'acme']);
      expect(human.stdout)
        .to.match(/secret id {2}whs_/)
        .and.match(/not shown again/);
      const listed = await run(['webhooks', 'secret', 'list', '--workspace', 'acme']);
      expect(listed.stdout).to.include(secretId).and.include('active');
      expect(listed.stdout).to.not.include(secret);
      // Stored sealed: the secret is nowhere in the database file.
      const storage = createStorage(loadConfig(env));
      await storage.init();
      const rows = await storage.listWebhookSecrets();
      await storage.close();
      expect(rows.find((r) => r.secretId === secretId)!.sealed).to.not.include(secret.slice(6));
      expect(readFileSync(join(env.TRACEGATE_DATA_DIR!, 'tracegate.duckdb')).includes(secret)).to.equal(false);

      const s = await startTestServer('duckdb', env);
      try {
        const auth = { authorization: `Bearer ${key.key}` };
        const body = '{"title":"offline secret"}';
        const ts = String(Math.floor(Date.now() / 1000));
        const res = await post(`${s.url}/api/ingest/webhooks`, body, {
          ...auth,
          'x-service-delivery-timestamp': ts,
          'x-service-signature': sign(secret, ts, body),
        });
        expect(res.status, res.text).to.equal(200);
        expect(res.json.alert).to.include({ signature: 'verified', secretId });
        // Online now: revoke through the running server, which stops verifying with it at once.
        const revoked = await cli(s, ['webhooks', 'secret', 'revoke', secretId]);
        expect(revoked.code, revoked.stderr).to.equal(0);
        const again = await post(`${s.url}/api/ingest/webhooks`, '{"title":"again"}', {
          ...auth,
          'x-service-delivery-timestamp': ts,
          'x-service-signature': sign(secret, ts, '{"title":"again"}'),
        });
        expect(again.status).to.equal(401); // the other secret (added above) is still active
        const list = JSON.parse((await cli(s, ['webhooks', 'secret', 'list', '--json'])).stdout) as Array<{
          secretId: string;
          revokedAtMs: number;
        }>;
        expect(list.find((x) => x.secretId === secretId)!.revokedAtMs).to.be.greaterThan(0);
        const audit = (await get(`${s.url}/api/audit?limit=100`, auth)).json.items.map((x: any) => x.action);
        expect(audit).to.include.members(['webhook_secret.create', 'webhook_secret.revoke']);
        expect(JSON.stringify((await get(`${s.url}/api/audit?limit=100`, auth)).json)).to.not.include(secret);
      } finally {
        await s.running.close();
      }
    } finally {
      rmSync(env.TRACEGATE_DATA_DIR!, { recursive: true, force: true });
    }
  });

  it('revoking the last active secret says that signed deliveries are then taken as unverified', async () => {
    const s = await startTestServer('duckdb');
    try {
      await s.key('solo');
      const { secretId } = JSON.parse(
        (await cli(s, ['webhooks', 'secret', 'add', '--workspace', 'solo', '--json'])).stdout,
      );
      const out = await cli(s, ['webhooks', 'secret', 'revoke', secretId]);
      expect(out.code).to.equal(0);
      expect(out.stderr).to.match(/no active webhook secret now/);
      expect((await cli(s, ['webhooks', 'secret', 'revoke', 'whs_nope'])).code).to.equal(1);
      const usage = await cli(s, ['webhooks', 'secret', 'rotate']);
      expect(usage.code).to.equal(2);
      expect(usage.stderr).to.match(/unknown command: webhooks secret rotate/);
    } finally {
      await s.close();
    }
  });
});
