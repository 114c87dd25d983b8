// Collectors scaling out: several instances, each with its own DATA_DIR, on one ClickHouse database.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';

/** PATCH /admin/settings on the server's loopback admin port (what the CLI uses). */
async function patchSettings(s: TestServer, workspace: string, patch: object): Promise<{ status: number; json: any }> {
  const { adminPort, adminToken } = JSON.parse(readFileSync(join(s.dataDir, 'server.json'), 'utf8')) as {
    adminPort: number;
    adminToken: string;
  };
  const res = await fetch(`http://127.0.0.1:${adminPort}/admin/settings?workspace=${workspace}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(patch),
  });
  return { status: res.status, json: await res.json() };
}

describe('collectors sharing one ClickHouse database', function () {
  this.timeout(240_000);
  let a: TestServer;
  let b: TestServer;
  before(async () => {
    a = await startTestServer('clickhouse');
    b = await startTestServer('clickhouse', { TRACEGATE_CLICKHOUSE_DATABASE: a.config.CLICKHOUSE_DATABASE });
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  it('each verifies the chains the other signed (keys are published in storage)', async () => {
    const created = await cli(a, ['keys', 'create', '--workspace', 'shared-verify', '--json']); // audited, as verify expects
    const k = JSON.parse(created.stdout) as { key: string };
    const auth = { authorization: `Bearer ${k.key}` };
    const trace = { prompt: 'p', response: 'r', model: 'gpt-4o-mini' };
    expect((await post(`${a.url}/api/traces`, { ...trace, requestId: 'on-a' }, auth)).status).to.equal(200);
    expect((await post(`${b.url}/api/traces`, { ...trace, requestId: 'on-b' }, auth)).status).to.equal(200);
    await flushed(a);
    await flushed(b);
    // Both publish at start: each lists both keys.
    const keysOn = async (s: TestServer) =>
      ((await get(`${s.url}/api/verification/keys`, auth)).json.keys as Array<{ keyId: string }>).map((x) => x.keyId);
    const [onA, onB] = [await keysOn(a), await keysOn(b)];
    expect(onA).to.have.length(2);
    expect(onB).to.deep.equal(onA);
    // B's records are checked by A (and the reverse) without an unknown key.
    for (const [s, traceId] of [
      [a, 'on-b'],
      [b, 'on-a'],
    ] as const) {
      const res = await get(`${s.url}/api/traces/${traceId}/verification`, auth);
      expect(res.status, res.text).to.equal(200);
      expect(
        res.json.problems.filter((p: { kind: string }) => p.kind === 'unknown_key'),
        res.text,
      ).to.deep.equal([]);
    }
    // Once B has signed its chain heads (at shutdown), `verify` through A finds every chain of the workspace sound.
    await b.close();
    b = await startTestServer('clickhouse', { TRACEGATE_CLICKHOUSE_DATABASE: a.config.CLICKHOUSE_DATABASE });
    const out = await cli(a, ['verify', '--workspace', 'shared-verify', '--json']);
    expect(out.code, out.stdout + out.stderr).to.equal(0);
    expect(await keysOn(a)).to.have.length(3); // the new B has a DATA_DIR, and so a key, of its own
  });

  it('make one workspace of a new name created through both at once', async () => {
    for (let i = 0; i < 5; i++) {
      const [x, y] = await Promise.all([a.key(`race-${i}`), b.key(`race-${i}`)]);
      expect(y.workspaceId).to.equal(x.workspaceId);
    }
  });

  it('never lose a settings change silently: changes racing through one collector both count, through two the loser is 409', async () => {
    const ws = (await a.key('settings-race')).workspaceId;
    const redact = { policy: { version: 1, defaultAction: 'flag', actions: { email: 'redact' } } };
    const rules = (n: number) => ({ alertRules: [{ id: `r${n}`, kind: 'error_rate', threshold: 0.5 }] });
    // Through one collector: applied one after the other, both kept.
    const [one, two] = await Promise.all([patchSettings(a, ws, redact), patchSettings(a, ws, rules(0))]);
    expect([one.status, two.status]).to.deep.equal([200, 200]);
    let now = await a.running.settings.forWorkspace(ws);
    expect([now.policy.actions.email, now.doc.alertRules?.[0]?.id]).to.deep.equal(['redact', 'r0']);
    // Through two: a change answered 200 is in the settings that count; one answered otherwise is a 409 conflict
    // (both may be, when each saw the other), and retrying it gets it in.
    const untilKept = async (s: TestServer, patch: object) => {
      for (let tries = 1; ; tries++) {
        const r = await patchSettings(s, ws, patch);
        if (r.status === 200) return tries;
        expect([r.status, r.json.error.code], JSON.stringify(r.json)).to.deep.equal([409, 'conflict']);
        expect(tries).to.be.below(20);
        await new Promise((done) => setTimeout(done, Math.random() * 50));
      }
    };
    for (let n = 1; n <= 6; n++) {
      const email = n % 2 ? 'block' : 'redact';
      await Promise.all([
        untilKept(a, { policy: { version: 1, defaultAction: 'flag', actions: { email } } }),
        untilKept(b, rules(n)),
      ]);
      a.running.settings.forget(ws);
      now = await a.running.settings.forWorkspace(ws);
      expect([now.policy.actions.email, now.doc.alertRules?.[0]?.id], `round ${n}`).to.deep.equal([email, `r${n}`]);
    }
    // In storage: a version written a second time does not count, and every reader takes the first write.
    const v = (await a.running.storage.getSettings(ws))!.version + 1;
    expect(await a.running.storage.putSettings(ws, JSON.stringify({ alertRules: [] }), v, 1000)).to.equal(true);
    expect(await b.running.storage.putSettings(ws, JSON.stringify({}), v, 2000)).to.equal(false);
    expect(await a.running.storage.getSettings(ws)).to.deep.equal({
      doc: JSON.stringify({ alertRules: [] }),
      version: v,
    });
    expect(await b.running.storage.getSettings(ws)).to.deep.equal({
      doc: JSON.stringify({ alertRules: [] }),
      version: v,
    });
  });
});
