// Native-route limits over HTTP: batch item count (413), Content-Encoding (415), and rate limits kept per route.
import { expect } from 'chai';
import { flushed, post, startTestServer, type TestServer } from '../support/server.ts';

const otlpJson = (name: string) => ({
  resourceSpans: [
    {
      scopeSpans: [
        {
          spans: [
            {
              traceId: '5b8efff798038103d269b633813fc60c',
              spanId: 'eee19b7ec3c1b174',
              name,
              kind: 3,
              startTimeUnixNano: '1763787000000000000',
              endTimeUnixNano: '1763787000800000000',
            },
          ],
        },
      ],
    },
  ],
});

describe('native batch and encoding limits', function () {
  let s: TestServer;
  let auth: Record<string, string>;
  let wsId: string;
  before(async () => {
    s = await startTestServer('duckdb', { TRACEGATE_MAX_BATCH_ITEMS: '3' });
    const k = await s.key('limits');
    auth = { authorization: `Bearer ${k.key}` };
    wsId = k.workspaceId;
  });
  after(() => s.close());

  it('413 too_many_items over TRACEGATE_MAX_BATCH_ITEMS, storing none of them; the limit itself is fine', async () => {
    const items = (n: number, tag: string) =>
      Array.from({ length: n }, (_, i) => ({ requestId: `${tag}-${i}`, prompt: 'p', response: 'r' }));
    const over = await post(`${s.url}/api/traces`, items(4, 'over'), auth);
    expect(over.status).to.equal(413);
    expect(over.json.error).to.include({ code: 'too_many_items' });
    expect(over.json.error.message).to.include('4 items').and.include('3');
    expect(over.json.error.details).to.deep.equal({ limit: 3 });
    const at = await post(`${s.url}/api/traces`, items(3, 'at'), auth);
    expect(at.status).to.equal(200);
    expect(at.json.accepted).to.equal(3);
    await flushed(s);
    const page = await s.running.storage.listTraces(wsId, { limit: 100 });
    expect(page.items.map((t) => t.traceId).sort()).to.deep.equal(['at-0', 'at-1', 'at-2']);
  });

  it('415 unsupported_encoding for a Content-Encoding other than gzip/deflate (br)', async () => {
    const res = await post(`${s.url}/api/traces`, JSON.stringify({ prompt: 'p' }), {
      ...auth,
      'content-encoding': 'br',
    });
    expect(res.status).to.equal(415);
    expect(res.json.error.code).to.equal('unsupported_encoding');
    expect(res.json.error.message).to.include('br');
  });
});

describe('rate limits are per route', function () {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('duckdb', {
      TRACEGATE_RATE_LIMIT_POINTS: '2',
      TRACEGATE_RATE_LIMIT_WINDOW_SECONDS: '60',
    });
  });
  after(() => s.close());

  it('using up POST /api/traces leaves POST /v1/traces usable for the same key', async () => {
    const auth = { authorization: `Bearer ${(await s.key('per-route-a')).key}` };
    for (let i = 0; i < 2; i++) expect((await post(`${s.url}/api/traces`, { prompt: 'p' }, auth)).status).to.equal(200);
    expect((await post(`${s.url}/api/traces`, { prompt: 'p' }, auth)).status).to.equal(429);
    const otlp = await post(`${s.url}/v1/traces`, otlpJson('a'), auth);
    expect(otlp.status).to.equal(200);
    expect(otlp.headers.get('x-ratelimit-remaining')).to.equal('1');
  });

  it('using up POST /v1/traces (and its alias) leaves POST /api/traces usable for the same key', async () => {
    const auth = { authorization: `Bearer ${(await s.key('per-route-b')).key}` };
    expect((await post(`${s.url}/v1/traces`, otlpJson('b1'), auth)).status).to.equal(200);
    expect((await post(`${s.url}/api/integrations/otlp/v1/traces`, otlpJson('b2'), auth)).status).to.equal(200);
    const limited = await post(`${s.url}/v1/traces`, otlpJson('b3'), auth);
    expect(limited.status).to.equal(429);
    expect(limited.headers.get('x-ratelimit-remaining')).to.equal('0');
    const native = await post(`${s.url}/api/traces`, { prompt: 'p' }, auth);
    expect(native.status).to.equal(200);
    expect(native.headers.get('x-ratelimit-remaining')).to.equal('1');
  });
});
