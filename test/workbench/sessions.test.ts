// Sessions over real HTTP on both storage engines: signing in (a key, a one-time link), who am I, signing out, every
// way a cookie is refused, the same-origin rule, JSON only, the CLI (online and offline), and two collectors sharing
// one ClickHouse database seeing a sign-out and a revocation at once.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { storageUnreachable } from '../../core/errors.ts';
import { DuckDbStorage } from '../../storage/duckdb.ts';
import { newSession } from '../../collector/workspaces/sessions.ts';
import { loadConfig } from '../../config/index.ts';
import { startServer } from '../../collector/server.ts';
import {
  BACKENDS,
  type Backend,
  cli,
  flushed,
  post,
  startTestServer,
  type TestServer,
  testEnv,
} from '../support/server.ts';
import { type Answer, call, cookieOf, linkToken, signIn } from '../support/sessions.ts';

/** Many refusals in a row from 127.0.0.1 are the point here: the address must not be throttled for them. */
const QUIET = { TRACEGATE_AUTH_FAILURE_LIMIT: '100000' };
const ws = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;
const refused = (a: Answer, status: number, code: string, message?: RegExp) => {
  expect(a.status, a.text).to.equal(status);
  expect(a.json.error.code).to.equal(code);
  if (message) expect(a.json.error.message).to.match(message);
};

/** A session put straight into storage, so a test can age it: its cookie. */
async function plantSession(s: TestServer, workspaceId: string, over: { lastSeenAgoMs?: number; ageMs?: number }) {
  const now = Date.now();
  const { token, record } = newSession(workspaceId, { idleMs: 1800_000, maxMs: 8 * 3600_000 }, now - (over.ageMs ?? 0));
  record.lastSeenAtMs = now - (over.lastSeenAgoMs ?? 0);
  await s.running.storage.putSession(record);
  return { cookie: `tg_session=${token}`, record };
}

for (const backend of BACKENDS) {
  describe(`sessions: ${backend}`, function () {
    this.timeout(180_000);
    let s: TestServer;
    let key: { workspaceId: string; keyId: string; key: string };
    before(async () => {
      s = await startTestServer(backend, QUIET);
      key = await s.key(ws('sess'));
    });
    after(() => s?.close());

    it('signs in with the workspace key: 201 and the cookie (HttpOnly, SameSite=Strict, Path=/, no Secure over HTTP)', async () => {
      const a = await call(s.url, '/api/auth/session', {
        method: 'POST',
        headers: { authorization: `Bearer ${key.key}` },
      });
      expect(a.status, a.text).to.equal(201);
      const [set] = a.headers.getSetCookie();
      expect(set).to.match(/^tg_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=28800$/);
      expect(a.headers.get('cache-control')).to.equal('no-store');
      expect(a.json.session).to.deep.include({ workspaceId: key.workspaceId, state: 'active', revokedAt: null });
      expect(a.json.session.id).to.match(/^ses_[0-9a-f]{16}$/);
      expect(a.text).not.to.include(cookieOf(a).slice('tg_session='.length)); // the token only in the cookie
      // Only its hash is stored.
      const stored = await s.running.storage.listSessions({ workspaceId: key.workspaceId, nowMs: Date.now() });
      expect(JSON.stringify(stored)).not.to.include(cookieOf(a).slice('tg_session='.length));
    });

    it('GET says who is signed in: the session, its workspace and when it ends', async () => {
      const cookie = await signIn(s.url, key.key);
      const a = await call(s.url, '/api/auth/session', { cookie });
      expect(a.status, a.text).to.equal(200);
      const ses = a.json.session;
      expect(ses).to.deep.include({ workspaceId: key.workspaceId, state: 'active' });
      expect(ses.workspace).to.match(/^sess-/);
      const created = Date.parse(ses.createdAt);
      expect(Date.parse(ses.expiresAt) - created).to.equal(8 * 3600_000);
      expect(Date.parse(ses.idleExpiresAt) - Date.parse(ses.lastSeenAt)).to.equal(1800_000);
    });

    it('the cookie reads like the key on the read routes, within its own workspace only', async () => {
      const other = await s.key(ws('other'));
      const auth = { authorization: `Bearer ${key.key}` };
      expect(
        (await post(`${s.url}/api/traces`, { requestId: 'by-key', prompt: 'p', response: 'r' }, auth)).status,
      ).to.equal(200);
      await flushed(s);
      const mine = await signIn(s.url, key.key);
      const theirs = await signIn(s.url, other.key);
      expect((await call(s.url, '/api/traces/by-key', { cookie: mine })).status).to.equal(200);
      expect((await call(s.url, '/api/traces/by-key', { cookie: theirs })).status).to.equal(404);
      const list = await call(s.url, '/api/traces', { cookie: mine });
      expect(list.json.items.map((t: { traceId: string }) => t.traceId)).to.include('by-key');
      expect((await call(s.url, '/api/audit?limit=5', { cookie: mine })).status).to.equal(200);
      // Neither credential: 401.
      expect((await call(s.url, '/api/traces')).status).to.equal(401);
    });

    it('refuses every cookie that is not a live session: missing, forged, malformed, expired, idle, revoked (401)', async () => {
      const run = (cookie?: string) => call(s.url, '/api/local/run', { cookie, body: { prompt: 'Hi' } });
      refused(await run(), 401, 'unauthorized', /missing session cookie/);
      refused(await run(`tg_session=${randomBytes(32).toString('base64url')}`), 401, 'unauthorized', /invalid session/);
      refused(await run('tg_session=not-a-token'), 401, 'unauthorized', /invalid session/);
      const expired = await plantSession(s, key.workspaceId, { ageMs: 8 * 3600_000 + 1000, lastSeenAgoMs: 1000 });
      refused(await run(expired.cookie), 401, 'unauthorized', /has expired/);
      const idle = await plantSession(s, key.workspaceId, { lastSeenAgoMs: 1800_000 + 1000 });
      refused(await run(idle.cookie), 401, 'unauthorized', /time unused/);
      const revoked = await plantSession(s, key.workspaceId, {});
      await s.running.storage.revokeSession(revoked.record.sessionId, Date.now());
      refused(await run(revoked.cookie), 401, 'unauthorized', /signed out or revoked/);
      // The same refusals on a read route that also takes the key.
      refused(await call(s.url, '/api/traces', { cookie: idle.cookie }), 401, 'unauthorized');
    });

    it('/api/local/run takes the cookie only: a workspace key alone is refused (401)', async () => {
      const a = await call(s.url, '/api/local/run', {
        body: { prompt: 'Hi' },
        headers: { authorization: `Bearer ${key.key}` },
      });
      refused(a, 401, 'unauthorized', /takes no API key/);
      const models = await call(s.url, '/api/local/models', { headers: { authorization: `Bearer ${key.key}` } });
      refused(models, 401, 'unauthorized');
    });

    it('a cookie request that changes state must come from this origin: another Origin, Referer or neither → 403', async () => {
      const cookie = await signIn(s.url, key.key);
      const body = { prompt: 'Hi' }; // names no model (the server has no default): a request let through gets 400
      const at = (o: Parameters<typeof call>[2]) => call(s.url, '/api/local/run', { cookie, body, ...o });
      refused(await at({ origin: 'http://evil.example' }), 403, 'cross_site_request', /not this server's origin/);
      const port = Number(new URL(s.url).port);
      refused(await at({ origin: `http://127.0.0.1:${port + 1}` }), 403, 'cross_site_request');
      refused(await at({ origin: 'null' }), 403, 'cross_site_request');
      refused(await at({ origin: null, referer: 'http://evil.example/x' }), 403, 'cross_site_request', /Referer/);
      refused(await at({ origin: null }), 403, 'cross_site_request', /neither Origin nor Referer/);
      expect((await at({ origin: null, referer: `${s.url}/ui/workbench` })).json.error.code).to.equal(
        'invalid_request',
      );
      expect((await at({})).json.error.code).to.equal('invalid_request');
      // Sign-out too; reads need no Origin.
      refused(
        await call(s.url, '/api/auth/session', { method: 'DELETE', cookie, origin: 'http://evil.example' }),
        403,
        'cross_site_request',
      );
      expect((await call(s.url, '/api/auth/session', { cookie, origin: null })).status).to.equal(200);
    });

    it('takes JSON bodies only (415), before anything else is read', async () => {
      const cookie = await signIn(s.url, key.key);
      const as = (contentType: string, body: string) => call(s.url, '/api/local/run', { cookie, body, contentType });
      refused(await as('text/plain', '{"prompt":"Hi"}'), 415, 'unsupported_media_type');
      refused(await as('application/x-www-form-urlencoded', 'prompt=Hi'), 415, 'unsupported_media_type');
      refused(await as('multipart/form-data; boundary=x', '--x--'), 415, 'unsupported_media_type');
    });

    it('signs out: DELETE revokes the session and removes the cookie; the cookie is refused from then on', async () => {
      const cookie = await signIn(s.url, key.key);
      const out = await call(s.url, '/api/auth/session', { method: 'DELETE', cookie });
      expect(out.status, out.text).to.equal(200);
      expect(out.json.revoked).to.match(/^ses_/);
      expect(out.headers.getSetCookie()[0]).to.equal('tg_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0');
      refused(await call(s.url, '/api/auth/session', { cookie }), 401, 'unauthorized', /signed out/);
      refused(await call(s.url, '/api/auth/session', { method: 'DELETE', cookie }), 401, 'unauthorized');
    });

    it('a one-time sign-in link (sessions create, through the running server): good once, from this origin only', async () => {
      const created = await cli(s, ['sessions', 'create', '--workspace', key.workspaceId, '--json']);
      expect(created.code, created.stderr).to.equal(0);
      const link = JSON.parse(created.stdout) as { link: string; workspaceId: string; expiresAt: string };
      expect(link.workspaceId).to.equal(key.workspaceId);
      // TRACEGATE_PUBLIC_ORIGIN unset: this machine at the server's port (the test server listens on 127.0.0.1)
      expect(link.link).to.match(/^http:\/\/127\.0\.0\.1:\d+\/ui\/signin#token=[A-Za-z0-9_-]{43}$/);
      expect(Number(new URL(link.link).port)).to.equal(s.running.port);
      expect(Date.parse(link.expiresAt) - Date.now()).to.be.within(590_000, 600_000);
      const linkToken_ = linkToken(link.link);
      const exchange = (o: Parameters<typeof call>[2] = {}) =>
        call(s.url, '/api/auth/session', { method: 'POST', body: { linkToken: linkToken_ }, ...o });
      refused(await exchange({ origin: 'http://evil.example' }), 403, 'cross_site_request');
      refused(await exchange({ contentType: 'text/plain' }), 415, 'unsupported_media_type');
      const first = await exchange();
      expect(first.status, first.text).to.equal(201);
      expect(first.json.session.workspaceId).to.equal(key.workspaceId);
      expect((await call(s.url, '/api/auth/session', { cookie: cookieOf(first) })).status).to.equal(200);
      refused(await exchange(), 401, 'unauthorized', /already used/);
      refused(await exchange({ body: { linkToken: randomBytes(32).toString('base64url') } }), 401, 'unauthorized');
      refused(await exchange({ body: { token: 'x' } }), 400, 'invalid_request', /linkToken/);
      // No key, no body: 401.
      refused(await call(s.url, '/api/auth/session', { method: 'POST' }), 401, 'unauthorized');
      const none = await cli(s, ['sessions', 'create', '--workspace', 'no-such-workspace']);
      expect(none.code).to.equal(1);
      expect(none.stderr).to.match(/no workspace "no-such-workspace"/);
    });

    it('sessions list and revoke through the running server: a revoked session is refused at once', async () => {
      const cookie = await signIn(s.url, key.key);
      const me = (await call(s.url, '/api/auth/session', { cookie })).json.session;
      const listed = await cli(s, ['sessions', 'list', '--workspace', key.workspaceId, '--json']);
      expect(listed.code, listed.stderr).to.equal(0);
      const sessions = JSON.parse(listed.stdout) as Array<{ id: string; state: string }>;
      expect(sessions.find((x) => x.id === me.id)).to.deep.include({ state: 'active' });
      expect(listed.stdout).not.to.match(/tokenHash|token_hash/);
      const text = await cli(s, ['sessions', 'list', '--workspace', key.workspaceId]);
      expect(text.stdout).to.match(new RegExp(`${me.id}  ${key.workspaceId}  active`));
      const revoked = await cli(s, ['sessions', 'revoke', me.id]);
      expect([revoked.code, revoked.stdout.trim()]).to.deep.equal([0, `revoked ${me.id}`]);
      refused(await call(s.url, '/api/auth/session', { cookie }), 401, 'unauthorized', /revoked/);
      const again = await cli(s, ['sessions', 'list', '--workspace', key.workspaceId, '--json']);
      expect(
        (JSON.parse(again.stdout) as Array<{ id: string; state: string }>).find((x) => x.id === me.id)!.state,
      ).to.equal('revoked');
      const unknown = await cli(s, ['sessions', 'revoke', 'ses_0000000000000000']);
      expect([unknown.code, unknown.stderr.trim()]).to.deep.equal([1, 'no session ses_0000000000000000']);
    });

    it('audits sign-in and sign-out in the workspace, and refused cookies', async () => {
      const cookie = await signIn(s.url, key.key);
      const id = (await call(s.url, '/api/auth/session', { cookie })).json.session.id as string;
      await call(s.url, '/api/auth/session', { method: 'DELETE', cookie });
      await call(s.url, '/api/auth/session', { cookie }); // refused: revoked
      await flushed(s);
      const audit = (await s.running.storage.listAudit(key.workspaceId, { limit: 200 })).items;
      const created = audit.find((a) => a.action === 'session.create' && JSON.parse(a.details).sessionId === id);
      expect(created).to.deep.include({ actor: key.keyId, route: 'POST /api/auth/session', outcome: 'ok' });
      const signedOut = audit.find((a) => a.action === 'session.revoke' && JSON.parse(a.details).sessionId === id);
      expect(signedOut).to.deep.include({ actor: id, route: 'DELETE /api/auth/session' });
      const rejected = audit.find((a) => a.action === 'auth.rejected' && a.actor === id);
      expect(JSON.parse(rejected!.details).reason).to.equal('revoked_session');
    });
  });
}

describe('sessions: storage that cannot check the cookie', function () {
  this.timeout(60_000);
  let dir: string;
  let real: DuckDbStorage;
  let s: TestServer;
  let mode: 'ok' | 'fail' | 'hang' = 'ok';
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tracegate-session-outage-'));
    real = new DuckDbStorage(join(dir, 'db.duckdb'));
    const storage = new Proxy(real, {
      get: (target, prop, recv) => {
        const v = Reflect.get(target, prop, recv);
        if (prop !== 'getSession') return typeof v === 'function' ? v.bind(target) : v;
        return async (...args: unknown[]) => {
          if (mode === 'fail') throw storageUnreachable('connection refused');
          if (mode === 'hang') await new Promise((r) => setTimeout(r, 3000));
          return (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        };
      },
    });
    s = await startTestServer('duckdb', QUIET, storage);
  });
  after(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('failing or past the lookup deadline: 503 with Retry-After, never let in; answering again: the session works', async () => {
    const cookie = await signIn(s.url, (await s.key(ws('outage'))).key);
    mode = 'fail';
    const failed = await call(s.url, '/api/auth/session', { cookie });
    expect([failed.status, failed.headers.get('retry-after')]).to.deep.equal([503, '5']);
    mode = 'hang';
    const t0 = Date.now();
    const slow = await call(s.url, '/api/traces', { cookie });
    expect(slow.status).to.equal(503);
    expect(Date.now() - t0).to.be.within(1900, 2900); // LOOKUP_DEADLINE_MS
    mode = 'ok';
    expect((await call(s.url, '/api/auth/session', { cookie })).status).to.equal(200);
  });
});

describe('sessions: offline CLI, and TRACEGATE_PUBLIC_ORIGIN', function () {
  this.timeout(180_000);

  it('sessions create without a server: the link, used once the server runs', async () => {
    const env = { ...testEnv('duckdb'), TRACEGATE_PUBLIC_ORIGIN: 'https://tg.example.test' };
    const name = ws('offline');
    expect((await cli(null, ['keys', 'create', '--workspace', name], env)).code).to.equal(0);
    const created = await cli(null, ['sessions', 'create', '--workspace', name, '--json'], env);
    expect(created.code, created.stderr).to.equal(0);
    const link = JSON.parse(created.stdout).link as string;
    expect(link).to.match(/^https:\/\/tg\.example\.test\/ui\/signin#token=/);
    const text = await cli(null, ['sessions', 'create', '--workspace', name], env);
    expect(text.stdout).to.match(
      /^workspace offline-\w+ \(ws_[0-9a-f]{16}\)\nsign-in link, good once until .*\nhttps:\/\/tg\.example\.test\/ui\/signin#token=/,
    );
    const running = await startServer(loadConfig(env));
    try {
      const url = `http://127.0.0.1:${running.port}`;
      const origin = 'https://tg.example.test'; // behind a proxy: the public origin is the one browsers send
      const a = await call(url, '/api/auth/session', { method: 'POST', body: { linkToken: linkToken(link) }, origin });
      expect(a.status, a.text).to.equal(201);
      // Secure: the browser reaches the server over https at its public origin.
      expect(a.headers.getSetCookie()[0]).to.match(/; Secure$/);
      const cookie = cookieOf(a);
      // The server's own address is not the public origin: refused.
      const own = await call(url, '/api/auth/session', { method: 'DELETE', cookie, origin: url });
      expect(own.status, own.text).to.equal(403);
      const listed = await cli(null, ['sessions', 'list', '--json'], env); // online now, through the admin routes
      expect((JSON.parse(listed.stdout) as unknown[]).length).to.equal(1);
      expect((await call(url, '/api/auth/session', { method: 'DELETE', cookie, origin })).status).to.equal(200);
    } finally {
      await running.close();
    }
    // Offline again: list and revoke on storage directly.
    const listed = JSON.parse((await cli(null, ['sessions', 'list', '--json'], env)).stdout) as Array<{
      id: string;
      state: string;
    }>;
    expect(listed.map((x) => x.state)).to.deep.equal(['revoked']);
    expect((await cli(null, ['sessions', 'revoke', listed[0]!.id], env)).code).to.equal(0);
  });
});

describe('sessions across collectors sharing one ClickHouse database', function () {
  this.timeout(180_000);
  let a: TestServer;
  let b: TestServer;
  before(async () => {
    a = await startTestServer('clickhouse' satisfies Backend, QUIET);
    b = await startTestServer('clickhouse', { ...QUIET, TRACEGATE_CLICKHOUSE_DATABASE: a.config.CLICKHOUSE_DATABASE });
  });
  after(async () => {
    await b?.close();
    await a?.close();
  });

  it('a session made on one is honoured by the other; signed out on one, refused by the other at once', async () => {
    const k = await a.key(ws('shared'));
    const cookie = await signIn(a.url, k.key);
    expect((await call(b.url, '/api/auth/session', { cookie })).status).to.equal(200);
    expect((await call(a.url, '/api/auth/session', { method: 'DELETE', cookie })).status).to.equal(200);
    refused(await call(b.url, '/api/auth/session', { cookie }), 401, 'unauthorized', /signed out or revoked/);
    refused(await call(b.url, '/api/traces', { cookie }), 401, 'unauthorized');
  });

  it('revoked through the CLI on one, refused by the other at its next request', async () => {
    const k = await a.key(ws('shared'));
    const cookie = await signIn(b.url, k.key);
    const id = (await call(b.url, '/api/auth/session', { cookie })).json.session.id as string;
    expect((await cli(a, ['sessions', 'revoke', id])).code).to.equal(0);
    refused(await call(b.url, '/api/auth/session', { cookie }), 401, 'unauthorized', /revoked/);
  });

  it('a sign-in link posted to both at once signs in once', async () => {
    const k = await a.key(ws('shared'));
    const created = JSON.parse((await cli(a, ['sessions', 'create', '--workspace', k.workspaceId, '--json'])).stdout);
    const body = { linkToken: linkToken(created.link) };
    const answers = await Promise.all(
      [a, b, a, b].map((s) => call(s.url, '/api/auth/session', { method: 'POST', body })),
    );
    expect(answers.filter((x) => x.status === 201)).to.have.length.at.most(1);
    expect(answers.every((x) => x.status === 201 || x.status === 401)).to.equal(true);
  });
});
