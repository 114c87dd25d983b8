// The read routes' contract beyond their data: a rate limit per route and key, reversed ranges refused, storage
// failures told apart from bugs (503 vs 500, a read deadline), and 405 with Allow for a known path's other methods.
import { fromWire, storageUnreachable, toWire } from '../../core/errors.ts';
import { classifyStorageError } from '../../storage/errors.ts';
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDbStorage } from '../../storage/duckdb.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { READ_DEADLINE_MS } from '../../collector/http/read-gate.ts';
import { get, post, startTestServer, flushed, type TestServer } from '../support/server.ts';

async function call(url: string, method: string, headers: Record<string, string> = {}, body?: string) {
  const res = await fetch(url, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** Every authenticated GET route (a trace id where the path has one). */
const READ_PATHS = [
  '/api/traces',
  '/api/traces/rl-1',
  '/api/traces/rl-1/verification',
  '/api/audit',
  '/api/alerts',
  '/api/findings',
  '/api/policy',
  '/api/verification/keys',
  '/api/analytics/usage',
];

describe('read routes: rate limit per route and key', function () {
  this.timeout(120_000);
  let s: TestServer;
  let auth: Record<string, string>;
  before(async () => {
    s = await startTestServer('duckdb', {
      TRACEGATE_RATE_LIMIT_POINTS: '5',
      TRACEGATE_RATE_LIMIT_WINDOW_SECONDS: '60',
    });
    auth = { authorization: `Bearer ${(await s.key()).key}` };
    expect(
      (await post(`${s.url}/api/traces`, { requestId: 'rl-1', prompt: 'p', response: 'r' }, auth)).status,
    ).to.equal(200);
    await flushed(s);
  });
  after(async () => {
    await s.close();
  });

  it('the 6th GET /api/traces within the window is 429 with Retry-After; every answer carries X-RateLimit-Remaining', async () => {
    const answers = [];
    for (let i = 0; i < 8; i++) answers.push(await get(`${s.url}/api/traces`, auth));
    expect(answers.map((a) => a.status)).to.deep.equal([200, 200, 200, 200, 200, 429, 429, 429]);
    expect(answers.map((a) => a.headers.get('x-ratelimit-remaining'))).to.deep.equal([
      '4',
      '3',
      '2',
      '1',
      '0',
      '0',
      '0',
      '0',
    ]);
    for (const a of answers.slice(5)) {
      expect(a.json.error.code).to.equal('rate_limited');
      expect(Number(a.headers.get('retry-after'))).to.be.within(1, 60);
    }
  });

  it("each read route has its own budget, apart from ingestion's", async () => {
    for (const path of READ_PATHS.slice(1)) {
      const res = await get(`${s.url}${path}`, auth);
      expect(res.status, path).to.equal(200);
      expect(res.headers.get('x-ratelimit-remaining'), path).to.equal('4');
    }
    // POST /api/traces spent one point in before(); the 8 GETs spent none of it.
    const ingest = await post(`${s.url}/api/traces`, { requestId: 'rl-2', prompt: 'p' }, auth);
    expect(ingest.status).to.equal(200);
    expect(ingest.headers.get('x-ratelimit-remaining')).to.equal('3');
  });

  it('is per key: another key of the workspace still reads', async () => {
    const other = { authorization: `Bearer ${(await s.key()).key}` };
    const res = await get(`${s.url}/api/traces`, other);
    expect(res.status).to.equal(200);
    expect(res.headers.get('x-ratelimit-remaining')).to.equal('4');
  });

  it('OpenAPI documents 429 on every read route, and 503 on those that query storage', async () => {
    const doc = (await get(`${s.url}/openapi.json`)).json;
    const openapiPath = (p: string) => p.replace('rl-1', '{traceId}');
    for (const path of READ_PATHS) {
      const op = doc.paths[openapiPath(path)].get;
      expect(op.responses, path).to.have.property('429');
      if (path === '/api/verification/keys') continue;
      expect(op.responses, path).to.have.property('503');
    }
  });
});

describe('read routes: reversed time ranges', function () {
  this.timeout(120_000);
  let s: TestServer;
  let auth: Record<string, string>;
  before(async () => {
    s = await startTestServer('duckdb');
    auth = { authorization: `Bearer ${(await s.key()).key}` };
  });
  after(async () => {
    await s.close();
  });

  for (const path of ['/api/traces', '/api/audit', '/api/alerts', '/api/findings']) {
    it(`${path}: a cursor that is not one of ours is 400 invalid_query naming it, like every other bad parameter`, async () => {
      for (const cursor of ['garbage', Buffer.from('{"s":"x","t":"y"}').toString('base64url')]) {
        const res = await get(`${s.url}${path}?cursor=${cursor}`, auth);
        expect([res.status, res.json.error.code, res.json.error.details]).to.deep.equal([
          400,
          'invalid_query',
          [{ field: 'cursor', message: 'invalid cursor' }],
        ]);
      }
    });
  }

  it('ISO bounds keep their fraction to the nanosecond (spans are stored in ns); ms-time records get the same range', async () => {
    const start = '1763787000123456789'; // 2025-11-22T04:50:00.123456789Z
    const span = {
      traceId: 'ab'.repeat(16),
      spanId: 'cd'.repeat(8),
      name: 'ns',
      kind: 1,
      startTimeUnixNano: start,
      endTimeUnixNano: '1763787000200000000',
    };
    const res = await post(`${s.url}/v1/traces`, { resourceSpans: [{ scopeSpans: [{ spans: [span] }] }] }, auth);
    expect(res.status, res.text).to.equal(200);
    await flushed(s);
    const at = (q: string) => get(`${s.url}/api/traces?${q}`, auth).then((r) => r.json.items.length);
    expect(await at('from=2025-11-22T04:50:00.1234Z&to=2025-11-22T04:50:00.123456790Z')).to.equal(1);
    expect(await at('from=2025-11-22T04:50:00.123456789Z&to=2025-11-22T04:50:00.12345679Z')).to.equal(1);
    expect(await at('from=2025-11-22T04:50:00.1234568Z&to=2025-11-22T04:50:00.2Z')).to.equal(0);
    expect(await at('from=2025-11-22T04:50:00.1234Z&to=2025-11-22T04:50:00.123456789Z')).to.equal(0); // to is exclusive
    expect(await at('from=2025-11-22T05:50:00.1234%2B01:00&to=2025-11-22T04:50:00.1235-00:00')).to.equal(1);
    // a reversed range by 400 ns names both bounds to the nanosecond
    const rev = await get(
      `${s.url}/api/traces?from=2024-02-01T00:00:00.0000005Z&to=2024-02-01T00:00:00.0000001Z`,
      auth,
    );
    expect(rev.status).to.equal(400);
    expect(rev.json.error.message)
      .to.include('2024-02-01T00:00:00.000000500Z')
      .and.include('2024-02-01T00:00:00.000000100Z');
    // records timed in whole ms (audit here): a bound inside a millisecond excludes that millisecond from `from`
    const audit = (await get(`${s.url}/api/audit?limit=1`, auth)).json.items[0];
    const iso = (ms: number, frac: string) => `${new Date(ms).toISOString().slice(0, -1)}${frac}Z`;
    const audits = (q: string) =>
      get(`${s.url}/api/audit?limit=1000&${q}`, auth).then(
        (r) => r.json.items.filter((x: { hash: string }) => x.hash === audit.hash).length,
      );
    expect(await audits(`from=${iso(audit.atMs, '')}&to=${iso(audit.atMs, '0001')}`)).to.equal(1);
    expect(await audits(`from=${iso(audit.atMs, '0001')}`)).to.equal(0);
    expect(await audits(`to=${iso(audit.atMs, '')}`)).to.equal(0);
  });

  for (const path of ['/api/traces', '/api/audit', '/api/alerts', '/api/findings', '/api/analytics/usage']) {
    it(`${path}: from after to is 400 invalid_query naming both (ms, ISO date-times and dates)`, async () => {
      for (const range of [
        'from=5&to=1',
        'from=2024-02-01T00:00:00Z&to=2024-01-01T00:00:00%2B00:00',
        'from=2024-02-02&to=2024-02-01',
      ]) {
        const res = await get(`${s.url}${path}?${range}`, auth);
        expect(res.status, range).to.equal(400);
        expect(res.json.error.code).to.equal('invalid_query');
        expect(res.json.error.message)
          .to.match(/\bfrom\b/)
          .and.to.match(/\bto\b/);
        expect(res.json.error.details.map((d: { field: string }) => d.field)).to.deep.equal(['from', 'to']);
      }
      // An equal pair is an empty range (to is exclusive), not a reversed one; one bound alone is fine.
      expect((await get(`${s.url}${path}?from=5&to=5`, auth)).status).to.equal(200);
      expect((await get(`${s.url}${path}?from=5`, auth)).status).to.equal(200);
      expect((await get(`${s.url}${path}?to=1`, auth)).status).to.equal(200);
    });

    it(`${path}: a bound past what a date can hold, an empty one, or not decimal digits is 400 invalid_query`, async () => {
      for (const range of [
        'from=8700000000000000&to=1',
        'from=8700000000000000',
        'to=',
        'from=',
        'from=1e3',
        'to=0x10',
        'from=-1',
      ]) {
        const res = await get(`${s.url}${path}?${range}`, auth);
        expect(res.status, range).to.equal(400);
        expect(res.json.error.code, range).to.equal('invalid_query');
      }
      expect((await get(`${s.url}${path}?from=8640000000000000`, auth)).status).to.equal(200);
    });

    if (path !== '/api/analytics/usage') {
      it(`${path}: limit is decimal digits, 1 to 1000`, async () => {
        for (const q of ['limit=0x3', 'limit=3e0', 'limit=3.0', 'limit=%203', 'limit=0', 'limit=1001', 'limit=']) {
          const res = await get(`${s.url}${path}?${q}`, auth);
          expect([res.status, res.json.error?.code], q).to.deep.equal([400, 'invalid_query']);
        }
        expect((await get(`${s.url}${path}?limit=1000`, auth)).status).to.equal(200);
      });
    }
  }
});

describe('read routes: storage failures are 503, bugs stay 500', function () {
  this.timeout(120_000);
  let dir: string;
  let s: TestServer;
  let auth: Record<string, string>;
  /** What the next listTraces/listAudit/usage call does instead of reading. */
  let fault: (() => Promise<unknown>) | null = null;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tracegate-readfault-'));
    const real = new DuckDbStorage(join(dir, 'db.duckdb'));
    const faulty = new Proxy(real, {
      get: (target, prop, recv) => {
        const v = Reflect.get(target, prop, recv);
        if (typeof v !== 'function') return v;
        if (prop !== 'listTraces' && prop !== 'listAudit' && prop !== 'usage') return v.bind(target);
        return (...args: unknown[]) =>
          fault ? fault() : (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      },
    }) as Storage;
    s = await startTestServer('duckdb', {}, faulty);
    auth = { authorization: `Bearer ${(await s.key()).key}` };
  });
  afterEach(() => {
    fault = null;
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const outages: Array<[string, () => Error]> = [
    [
      'connection refused (as the ClickHouse client throws it)',
      () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8123'), { code: 'ECONNREFUSED' }),
    ],
    [
      'connection refused, classified by the storage thread and carried across it',
      () =>
        fromWire(
          toWire(
            classifyStorageError(
              Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8123'), { code: 'ECONNREFUSED' }),
            ),
          ),
        ),
    ],
    ['connection reset', () => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
    ['the ClickHouse client timing out', () => new Error('Timeout error.')],
    [
      'the storage worker gone (as WorkerStorage reports it)',
      () => storageUnreachable('storage worker exited (code 1)'),
    ],
  ];
  for (const [what, make] of outages) {
    it(`${what}: 503 unavailable with Retry-After, at once`, async () => {
      fault = () => Promise.reject(make());
      for (const path of ['/api/traces', '/api/audit', '/api/analytics/usage']) {
        const t = performance.now();
        const res = await get(`${s.url}${path}`, auth);
        expect(res.status, path).to.equal(503);
        expect(res.json.error.code).to.equal('unavailable');
        expect(res.headers.get('retry-after')).to.equal('5');
        expect(performance.now() - t).to.be.below(1_000);
      }
      fault = null;
      expect((await get(`${s.url}/api/traces`, auth)).status).to.equal(200); // storage back: reads again
    });
  }

  for (const [what, make] of [
    ['a TypeError', () => new TypeError("Cannot read properties of undefined (reading 'x')")],
    ['a query error from storage', () => new Error('Code: 62. DB::Exception: Syntax error: failed at position 1')],
    ['a RangeError mentioning a timeout', () => new RangeError('Timeout error.')],
  ] as Array<[string, () => Error]>) {
    it(`${what} is still 500 internal`, async () => {
      fault = () => Promise.reject(make());
      const res = await get(`${s.url}/api/traces`, auth);
      expect(res.status).to.equal(500);
      expect(res.json.error.code).to.equal('internal');
      expect(res.headers.get('retry-after')).to.equal(null);
    });
  }

  it("an answer that cannot be serialized (too large for one string) is the JSON 500, not Koa's plain text", async () => {
    // What JSON.stringify throws past ~512 MB: 10,000 spans of 60 KB in one part did so while Koa wrote the answer.
    fault = async () => ({
      items: [
        {
          toJSON: () => {
            throw new RangeError('Invalid string length');
          },
        },
      ],
      nextCursor: null,
    });
    const res = await get(`${s.url}/api/traces`, auth);
    expect([res.status, res.headers.get('content-type'), res.json?.error]).to.deep.equal([
      500,
      'application/json; charset=utf-8',
      { code: 'internal', message: 'internal error', details: null },
    ]);
    fault = null;
    expect((await get(`${s.url}/api/traces`, auth)).json).to.deep.equal({ items: [], nextCursor: null });
  });

  it(`a read still unanswered after READ_DEADLINE_MS (${READ_DEADLINE_MS / 1000} s) is 503; storage answering again serves the next read`, async function () {
    this.timeout(READ_DEADLINE_MS + 30_000);
    let release: () => void = () => {};
    const hung = new Promise<never>((_, reject) => {
      release = () => reject(new Error('connect ECONNREFUSED 127.0.0.1:8123'));
    });
    hung.catch(() => {});
    fault = () => hung;
    try {
      const t = performance.now();
      const res = await get(`${s.url}/api/traces`, auth);
      const ms = performance.now() - t;
      expect(res.status).to.equal(503);
      expect(res.json.error.code).to.equal('unavailable');
      expect(res.headers.get('retry-after')).to.equal('5');
      expect(ms).to.be.within(READ_DEADLINE_MS - 100, READ_DEADLINE_MS + 3_000);
      // DuckDB's ping answers: the next read goes to storage again (and is answered as soon as storage does).
      fault = null;
      expect((await get(`${s.url}/api/traces`, auth)).status).to.equal(200);
    } finally {
      release();
    }
  });
});

describe('405 Method Not Allowed', function () {
  this.timeout(120_000);
  let s: TestServer;
  before(async () => {
    s = await startTestServer('duckdb');
  });
  after(async () => {
    await s.close();
  });

  const allowOf = (h: Headers) =>
    (h.get('allow') ?? '')
      .split(/\s*,\s*/)
      .filter(Boolean)
      .sort();

  it('PUT, PATCH and DELETE on /api/traces: 405, Allow lists GET and POST, the JSON error body', async () => {
    for (const method of ['PUT', 'PATCH', 'DELETE']) {
      const res = await call(`${s.url}/api/traces`, method);
      expect(res.status, method).to.equal(405);
      expect(allowOf(res.headers)).to.include.members(['GET', 'HEAD', 'POST']);
      expect(allowOf(res.headers)).to.not.include(method);
      expect(res.json.error.code).to.equal('method_not_allowed');
      expect(res.json.error.message).to.include(method);
    }
  });

  it('POST on a read-only path (/api/traces/:id, /api/audit): 405 with Allow GET', async () => {
    for (const path of ['/api/traces/abc', '/api/audit', '/api/traces/abc/verification']) {
      const res = await call(`${s.url}${path}`, 'POST', { 'content-type': 'application/json' }, '{}');
      expect(res.status, path).to.equal(405);
      expect(allowOf(res.headers)).to.include.members(['GET', 'HEAD']);
      expect(res.json.error.code).to.equal('method_not_allowed');
    }
  });

  it('GET on the OTLP paths: 405 with Allow POST, as a google.rpc.Status', async () => {
    for (const path of ['/v1/traces', '/api/integrations/otlp/v1/traces']) {
      const res = await call(`${s.url}${path}`, 'GET');
      expect(res.status, path).to.equal(405);
      expect(allowOf(res.headers)).to.include('POST');
      expect(res.headers.get('content-type')).to.match(/^application\/json/);
      expect(res.json.code).to.equal(12); // UNIMPLEMENTED
      expect(res.json.message).to.include('GET');
      expect(res.json).to.not.have.property('error');
    }
    const proto = await call(`${s.url}/v1/traces`, 'PUT', { 'content-type': 'application/x-protobuf' }, '');
    expect(proto.status).to.equal(405);
    expect(proto.headers.get('content-type')).to.equal('application/x-protobuf');
  });

  it("GET on /api/proxy/provider/responses: 405 with Allow POST, in the provider's error shape", async () => {
    const res = await call(`${s.url}/api/proxy/provider/responses`, 'GET');
    expect(res.status).to.equal(405);
    expect(allowOf(res.headers)).to.include('POST');
    expect(res.json.error).to.include({ code: 'method_not_allowed', param: null });
    expect(res.json.error.type).to.be.a('string');
    expect(res.json.error.message).to.include('GET');
    const item = await call(`${s.url}/api/proxy/provider/responses/resp_1`, 'PUT');
    expect(item.status).to.equal(405);
    expect(allowOf(item.headers)).to.include.members(['GET', 'DELETE']);
    expect(item.json.error.code).to.equal('method_not_allowed');
  });

  it('OPTIONS on a known path: 204 with Allow', async () => {
    const res = await call(`${s.url}/api/traces`, 'OPTIONS');
    expect(res.status).to.equal(204);
    expect(allowOf(res.headers)).to.include.members(['GET', 'POST']);
  });

  it('an unknown path is still 404, without Allow', async () => {
    for (const method of ['GET', 'PUT', 'POST']) {
      const res = await call(`${s.url}/api/nothing-here`, method);
      expect(res.status, method).to.equal(404);
      expect(res.headers.get('allow')).to.equal(null);
      expect(res.json.error.code).to.equal('not_found');
    }
  });
});

describe('GET /api/traces/:id reads a large trace in parts (TRACEGATE_MAX_TRACE_SPANS)', function () {
  this.timeout(120_000);
  for (const backend of ['duckdb', 'clickhouse'] as const) {
    it(`${backend}: a part also ends once its spans' stored size reaches TRACEGATE_MAX_TRACE_PART_BYTES, the cursor going on from there`, async () => {
      const s = await startTestServer(backend, { TRACEGATE_MAX_TRACE_PART_BYTES: '65536' });
      try {
        const auth = { authorization: `Bearer ${(await s.key()).key}` };
        const traceId = '1af7651916cd43dd8448eb211c80319c';
        const t0 = 1_763_787_000_000_000_000n;
        // 12 spans of 20 KB: 60 KB before the fourth, 80 KB before the fifth
        const spans = Array.from({ length: 12 }, (_, i) => ({
          traceId,
          spanId: (0x2000 + i).toString(16).padStart(16, '0'),
          name: `step ${i}`,
          kind: 1,
          startTimeUnixNano: String(t0 + BigInt(i) * 1_000_000n),
          endTimeUnixNano: String(t0 + BigInt(i + 1) * 1_000_000n),
          attributes: [{ key: 'note', value: { stringValue: String(i).padEnd(20_000, '.') } }],
        }));
        const res = await post(`${s.url}/v1/traces`, { resourceSpans: [{ scopeSpans: [{ spans }] }] }, auth);
        expect(res.status, res.text).to.equal(200);
        await flushed(s);
        const parts: string[][] = [];
        let url = `${s.url}/api/traces/${traceId}`;
        for (let guard = 0; guard < 12; guard++) {
          const part = await get(url, auth);
          expect(part.status, part.text).to.equal(200);
          expect(Buffer.byteLength(part.text)).to.be.below(100_000);
          expect(part.json.trace.summary).to.include({ spanCount: 12 });
          parts.push(part.json.trace.spans.map((x: { spanId: string }) => x.spanId));
          if (!part.json.trace.nextSpanCursor) break;
          url = `${s.url}/api/traces/${traceId}?spanCursor=${part.json.trace.nextSpanCursor}`;
        }
        expect(parts.map((p) => p.length)).to.deep.equal([4, 4, 4]);
        expect(parts.flat()).to.deep.equal(spans.map((x) => x.spanId));
        // with spanLimit, whichever comes first
        const two = await get(`${s.url}/api/traces/${traceId}?spanLimit=2`, auth);
        expect(two.json.trace.spans.map((x: { spanId: string }) => x.spanId)).to.deep.equal(parts[0]!.slice(0, 2));
      } finally {
        await s.close();
      }
    });

    it(`${backend}: parts of at most the limit, in start order, each span once; the summary is the whole trace's`, async () => {
      const s = await startTestServer(backend, { TRACEGATE_MAX_TRACE_SPANS: '10' });
      try {
        const auth = { authorization: `Bearer ${(await s.key()).key}` };
        const traceId = '0af7651916cd43dd8448eb211c80319c';
        const t0 = 1_763_787_000_000_000_000n;
        const spans = Array.from({ length: 25 }, (_, i) => ({
          traceId,
          spanId: (0x1000 + i).toString(16).padStart(16, '0'),
          parentSpanId: i ? '0000000000001000' : '',
          name: i ? `chat ${i}` : 'agent',
          kind: 1,
          // pairs of spans start together: ties are broken by span id
          startTimeUnixNano: String(t0 + BigInt(Math.floor(i / 2)) * 1_000_000n),
          endTimeUnixNano: String(t0 + BigInt(i + 1) * 1_000_000n),
          attributes: i
            ? [
                { key: 'gen_ai.operation.name', value: { stringValue: 'chat' } },
                { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
                { key: 'gen_ai.usage.input_tokens', value: { intValue: '10' } },
                { key: 'gen_ai.usage.output_tokens', value: { intValue: '2' } },
                { key: 'input.value', value: { stringValue: `question ${i}` } },
              ]
            : [],
          status: { code: i === 20 ? 2 : 0 },
        }));
        const body = {
          resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ scope: { name: 't' }, spans }] }],
        };
        const res = await post(`${s.url}/v1/traces`, body, auth);
        expect(res.status, res.text).to.equal(200);
        await flushed(s);

        const first = await get(`${s.url}/api/traces/${traceId}`, auth);
        expect(first.status, first.text).to.equal(200);
        const { summary } = first.json.trace;
        expect(summary).to.include({
          spanCount: 25,
          errorCount: 1,
          status: 'error',
          name: 'agent',
          promptTokens: 240,
          completionTokens: 48,
        });
        const seen: string[] = [];
        const decided: string[] = [];
        let part = first.json.trace;
        for (let guard = 0; guard < 10; guard++) {
          expect(part.spans.length).to.be.at.most(10);
          // the whole trace's roll-up on every part; prompt and response from the part's own spans
          const { prompt: _p, response: _r, ...rollup } = part.summary;
          expect({ ...summary, ...rollup }).to.deep.equal(summary);
          const mine = part.spans.map((x: { spanId: string }) => x.spanId);
          seen.push(...mine);
          // the policy decisions of this part's spans only (every span with text has one)
          for (const p of part.policy) expect(mine).to.include(p.spanId);
          decided.push(...part.policy.map((p: { spanId: string }) => p.spanId));
          if (!part.nextSpanCursor) break;
          const next = await get(`${s.url}/api/traces/${traceId}?spanCursor=${part.nextSpanCursor}`, auth);
          expect(next.status, next.text).to.equal(200);
          part = next.json.trace;
        }
        expect(seen).to.deep.equal(spans.map((x) => x.spanId));
        expect([...decided].sort()).to.deep.equal(
          spans
            .slice(1)
            .map((x) => x.spanId)
            .sort(),
        );
        // a smaller part on request; more than the limit is refused
        const small = await get(`${s.url}/api/traces/${traceId}?spanLimit=3`, auth);
        expect(small.json.trace.spans.map((x: { spanId: string }) => x.spanId)).to.deep.equal(seen.slice(0, 3));
        expect(
          small.json.trace.tree.map((n: { spanId: string; children: unknown[] }) => [n.spanId, n.children.length]),
        ).to.deep.equal([[seen[0], 2]]);
        expect((await get(`${s.url}/api/traces/${traceId}?spanLimit=11`, auth)).status).to.equal(400);
        // a trace within the limit is one part, as before
        expect(
          (await post(`${s.url}/api/traces`, { requestId: 'small-one', prompt: 'p', response: 'r' }, auth)).status,
        ).to.equal(200);
        await flushed(s);
        const one = await get(`${s.url}/api/traces/small-one`, auth);
        expect(one.json.trace.nextSpanCursor).to.equal(null);
        expect(one.json.trace.summary).to.include({ spanCount: 1, errorCount: 0, prompt: 'p', response: 'r' });
        // another workspace's key sees nothing, cursor or not
        const other = { authorization: `Bearer ${(await s.key('other-co')).key}` };
        expect((await get(`${s.url}/api/traces/${traceId}`, other)).status).to.equal(404);
        expect(
          (await get(`${s.url}/api/traces/${traceId}?spanCursor=${first.json.trace.nextSpanCursor}`, other)).status,
        ).to.equal(404);
      } finally {
        await s.close();
      }
    });
  }
});
