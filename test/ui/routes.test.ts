// The web UI's routes over real HTTP: the security headers, what may be served (the ui/ folder and the vendor
// allow-list, nothing reached by a crafted path), and the session cookie on the routes the UI calls: reads take it as
// they take the key, feedback takes it only from the server's own origin.
import { expect } from 'chai';
import { request } from 'node:http';
import { BACKENDS, flushed, startTestServer, type TestServer } from '../support/server.ts';
import { call, signIn } from '../support/sessions.ts';

/** A GET with the path sent exactly as written (fetch and URL would normalize `..` and `%2e`). */
function rawGet(
  base: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, any>; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, method: 'GET', headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

for (const backend of BACKENDS)
  describe(`web UI routes (HTTP, ${backend})`, function () {
    this.timeout(30_000);
    let s: TestServer;
    let key: { workspaceId: string; key: string };
    let cookie: string;
    const bearer = () => ({ authorization: `Bearer ${key.key}` });

    before(async () => {
      s = await startTestServer(backend, { TRACEGATE_AUTH_FAILURE_LIMIT: '1000' });
      key = await s.key('ui-routes');
      cookie = await signIn(s.url, key.key);
      const a = await call(s.url, '/api/traces', {
        method: 'POST',
        headers: bearer(),
        body: { requestId: 'ui-r1', model: 'gpt-4o-mini', prompt: 'hi', response: 'hello' },
      });
      expect(a.status, a.text).to.equal(200);
      await flushed(s);
    });
    after(() => s?.close());

    it('the shell page: CSP with no inline script but the import map (by its hash), nosniff, no framing, no-store', async () => {
      const res = await rawGet(s.url, '/ui/traces/abc?span=1');
      expect(res.status).to.equal(200);
      expect(res.headers['content-type']).to.equal('text/html; charset=utf-8');
      const csp = String(res.headers['content-security-policy']);
      const map = /<script type="importmap">(.*?)<\/script>/.exec(res.body)![1]!;
      const { createHash } = await import('node:crypto');
      const hash = createHash('sha256').update(map).digest('base64');
      expect(csp).to.equal(
        `default-src 'none'; script-src 'self' 'sha256-${hash}'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'`,
      );
      expect(csp).not.to.include('unsafe');
      // Every other script is external: no inline code, no event-handler attributes.
      expect(res.body.match(/<script[^>]*>/g)).to.deep.equal([
        '<script type="importmap">',
        '<script type="module" src="/ui/app.js">',
      ]);
      expect(res.body).not.to.match(/\son[a-z]+=/);
      expect(res.headers).to.include({
        'x-content-type-options': 'nosniff',
        'x-frame-options': 'DENY',
        'referrer-policy': 'same-origin',
        'cache-control': 'no-store',
      });
      expect(res.body).to.include('data-session="none"');
      const withCookie = await call(s.url, '/ui/', { cookie });
      expect(withCookie.text).to.include('data-session="cookie"');
    });

    it('serves ui/ files and the allow-listed vendor modules with their types; revalidates with Last-Modified', async () => {
      const app = await fetch(`${s.url}/ui/app.js`);
      expect([app.status, app.headers.get('content-type')]).to.deep.equal([200, 'text/javascript; charset=utf-8']);
      expect(app.headers.get('x-content-type-options')).to.equal('nosniff');
      // (fetch would add Cache-Control: max-age=0 to a conditional request)
      const again = await rawGet(s.url, '/ui/app.js', { 'if-modified-since': app.headers.get('last-modified')! });
      expect(again.status).to.equal(304);
      for (const [path, type] of [
        ['/ui/vendor/preact.mjs', 'text/javascript; charset=utf-8'],
        ['/ui/vendor/virtual-core/utils.js', 'text/javascript; charset=utf-8'],
        ['/ui/vendor/uplot.css', 'text/css; charset=utf-8'],
        ['/ui/style.css', 'text/css; charset=utf-8'],
        ['/favicon.ico', 'image/svg+xml'],
      ] as const) {
        const r = await fetch(`${s.url}${path}`);
        expect([path, r.status, r.headers.get('content-type')]).to.deep.equal([path, 200, type]);
      }
      // Text is gzipped for a client that takes it (the same bytes once inflated), as it is without.
      const { gunzipSync } = await import('node:zlib');
      const plain = await rawGet(s.url, '/ui/vendor/uplot.mjs');
      const packed = await new Promise<{ headers: Record<string, any>; body: Buffer }>((resolve, reject) => {
        const { hostname, port } = new URL(s.url);
        request(
          { host: hostname, port, path: '/ui/vendor/uplot.mjs', headers: { 'accept-encoding': 'gzip, br' } },
          (res) => {
            const parts: Buffer[] = [];
            res.on('data', (c: Buffer) => parts.push(c));
            res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(parts) }));
          },
        )
          .on('error', reject)
          .end();
      });
      expect([
        plain.headers['content-encoding'],
        packed.headers['content-encoding'],
        packed.headers.vary,
      ]).to.deep.equal([undefined, 'gzip', 'Accept-Encoding']);
      expect(gunzipSync(packed.body).toString('utf8')).to.equal(plain.body);
      expect(packed.body.length).to.be.below(plain.body.length / 2);
      const redirect = await fetch(`${s.url}/ui`, { redirect: 'manual' });
      expect([redirect.status, redirect.headers.get('location')]).to.deep.equal([302, '/ui/']);
    });

    it('no crafted path reaches a file outside the lists: dots, encoded dots and slashes, vendor paths, index.html', async () => {
      const paths = [
        '/ui/../package.json',
        '/ui/%2e%2e/package.json',
        '/ui/%2E%2E%2Fpackage.json',
        '/ui/..%2fpackage.json',
        '/ui/vendor/../../package.json',
        '/ui/vendor/%2e%2e/%2e%2e/package.json',
        '/ui/vendor/preact/package.json',
        '/ui/vendor/preact/dist/preact.mjs',
        '/ui/vendor/virtual-core/index.d.ts',
        '/ui/lib/../../config/index.ts',
        '/ui/lib/%2e%2e/%2e%2e/config/index.ts',
        '/ui/traces/../../package.json',
        '/ui/traces/a/b',
        '/ui//etc/passwd',
        '/ui/%00',
        '/ui/app.js%00.html',
        '/ui/index.html',
      ];
      for (const path of paths) {
        const res = await rawGet(s.url, path);
        expect([path, res.status], res.body.slice(0, 200)).to.deep.equal([path, 404]);
        expect(res.body).not.to.include('"name": "tracegate"');
        expect(JSON.parse(res.body).error.code).to.equal('not_found');
      }
      // Koa/Node may normalize nothing: the raw path is only ever a key of the lists.
      const post = await call(s.url, '/ui/app.js', { method: 'POST', body: {} });
      expect(post.status).to.equal(405);
    });

    it('read routes take the session cookie as they take the key; none: 401', async () => {
      for (const path of [
        '/api/traces',
        '/api/traces/ui-r1',
        '/api/findings',
        '/api/analytics/usage',
        '/api/security-alerts',
      ]) {
        const withCookie = await call(s.url, path, { cookie });
        expect([path, withCookie.status], withCookie.text).to.deep.equal([path, 200]);
        const withKey = await call(s.url, path, { headers: bearer() });
        expect([path, withKey.status]).to.deep.equal([path, 200]);
        expect([path, (await call(s.url, path)).status]).to.deep.equal([path, 401]);
      }
    });

    it('GET /api/analytics/activity and /api/analytics/findings: rows per bucket; a bad bucket or reversed range: 400', async () => {
      const activity = await call(s.url, '/api/analytics/activity?bucket=day', { cookie });
      expect(activity.status, activity.text).to.equal(200);
      expect(activity.json.bucket).to.equal('day');
      expect(activity.json.rows).to.have.length(1);
      expect(activity.json.rows[0]).to.include({ traces: 1, spans: 1, toolCalls: 0, securityAlerts: 0 });
      const findings = await call(s.url, '/api/analytics/findings', { cookie });
      const source = backend === 'clickhouse' ? 'rollup' : 'findings';
      expect([findings.status, findings.json.source, findings.json.rows]).to.deep.equal([200, source, []]);
      const bad = await call(s.url, '/api/analytics/activity?bucket=week', { cookie });
      expect([bad.status, bad.json.error.code]).to.deep.equal([400, 'invalid_query']);
      const reversed = await call(s.url, '/api/analytics/activity?from=2025-01-02&to=2025-01-01', { cookie });
      expect(reversed.status).to.equal(400);
    });

    it('feedback takes the session cookie from this origin only (403 cross-site or without Origin/Referer); the key path is unchanged', async () => {
      const vote = { id: 'ui-vote', trace_id: 'ui-r1', value: 'up', source: 'ui' };
      const own = await call(s.url, '/api/ingest/feedback', { cookie, body: vote });
      expect(own.status, own.text).to.equal(200);
      expect(own.json.feedback).to.deep.equal({ id: 'ui-vote', traceId: 'ui-r1', status: 'recorded' });
      const cross = await call(s.url, '/api/ingest/feedback', { cookie, body: vote, origin: 'http://evil.example' });
      expect([cross.status, cross.json.error.code]).to.deep.equal([403, 'cross_site_request']);
      const otherPort = await call(s.url, '/api/ingest/feedback', {
        cookie,
        body: vote,
        origin: `http://127.0.0.1:${s.running.port + 1}`,
      });
      expect(otherPort.status).to.equal(403);
      const bare = await call(s.url, '/api/ingest/feedback', { cookie, body: vote, origin: null });
      expect(bare.status).to.equal(403);
      const referer = await call(s.url, '/api/ingest/feedback', {
        cookie,
        body: { ...vote, value: null },
        origin: null,
        referer: `${s.url}/ui/traces/ui-r1`,
      });
      expect(referer.status, referer.text).to.equal(200);
      // A form post (no JSON) with the cookie: 415, whatever its origin.
      const form = await call(s.url, '/api/ingest/feedback', { cookie, body: 'value=up', contentType: 'text/plain' });
      expect(form.status).to.equal(415);
      const withKey = await call(s.url, '/api/ingest/feedback', { headers: bearer(), body: vote, origin: null });
      expect(withKey.status, withKey.text).to.equal(200);
    });

    it('GET /api/spans/:spanId/trace finds the trace of a span; unknown: 404; include=signals adds votes and findings', async () => {
      const trace = (await call(s.url, '/api/traces/ui-r1', { cookie })).json.trace;
      const spanId = trace.spans[0].spanId;
      const found = await call(s.url, `/api/spans/${spanId}/trace`, { cookie });
      expect([found.status, found.json]).to.deep.equal([200, { spanId, traceId: 'ui-r1' }]);
      const missing = await call(s.url, '/api/spans/0000000000000000/trace', { cookie });
      expect([missing.status, missing.json.error.code]).to.deep.equal([404, 'not_found']);
      // The other workspace's span is not found.
      const other = await s.key('ui-routes-other');
      const foreign = await call(s.url, `/api/spans/${spanId}/trace`, {
        headers: { authorization: `Bearer ${other.key}` },
      });
      expect(foreign.status).to.equal(404);
      await flushed(s);
      const listed = await call(s.url, '/api/traces?include=signals', { cookie });
      const item = listed.json.items.find((t: any) => t.traceId === 'ui-r1');
      expect(item).to.include({ feedbackUp: 1, feedbackDown: 0, findings: 0 });
      const plain = (await call(s.url, '/api/traces', { cookie })).json.items[0];
      expect(plain).not.to.have.property('feedbackUp');
      const tooMany = await call(s.url, '/api/traces?include=signals&limit=500', { cookie });
      expect([tooMany.status, tooMany.json.error.code]).to.deep.equal([400, 'invalid_query']);
    });
  });
