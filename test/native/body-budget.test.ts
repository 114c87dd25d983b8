// TRACEGATE_MAX_INFLIGHT_BODY_BYTES: one budget for the decompressed body bytes buffered at once, across requests
// and routes. 120 parallel gzip bombs, each answered 413 at the body limit, used to take RSS from 0.26 to 2.77 GB.
import { expect } from 'chai';
import { request, type ClientRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import { get, post, startTestServer, type TestServer } from '../support/server.ts';
import { sleep } from '../support/process.ts';

const KiB = 1024;
const MiB = 1024 * KiB;

/** tracegate_inflight_body_bytes from /metrics. */
async function inflight(s: TestServer): Promise<number> {
  const m = /^tracegate_inflight_body_bytes (\d+)$/m.exec((await get(`${s.url}/metrics`)).text);
  expect(m, 'tracegate_inflight_body_bytes in /metrics').to.not.equal(null);
  return Number(m![1]);
}

async function until(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

interface Upload {
  req: ClientRequest;
  done: Promise<{ status: number; body: string }>;
}

/** A chunked POST whose body is sent in parts: `first` now, the rest when finish() is called. */
function upload(s: TestServer, path: string, headers: Record<string, string>, first: Buffer): Upload {
  const req = request(`${s.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
  });
  const done = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
  req.write(first);
  return { req, done };
}

describe('in-flight body budget', function () {
  let s: TestServer;
  let auth: Record<string, string>;
  before(async () => {
    s = await startTestServer('duckdb', {
      TRACEGATE_MAX_BODY_BYTES: String(MiB),
      TRACEGATE_MAX_INFLIGHT_BODY_BYTES: String(2 * MiB),
    });
    auth = { authorization: `Bearer ${(await s.key('budget')).key}` };
  });
  after(() => s.close());

  it('is exposed in /metrics and is 0 when idle', async () => {
    expect(await inflight(s)).to.equal(0);
  });

  it('with the budget taken by bodies being received, a large body gets 503 + Retry-After: 1 while a small one passes; all of it is given back', async () => {
    // Two bodies of 700 KiB of leading whitespace (valid JSON once finished), held open: 1.4 MiB of the 2 MiB.
    const pad = Buffer.alloc(700 * KiB, 0x20);
    const a = upload(s, '/api/traces', auth, pad);
    const b = upload(s, '/api/traces', auth, pad);
    await until('both bodies buffered', async () => (await inflight(s)) === 2 * pad.length);

    // Declared length that cannot fit: refused before reading.
    const large = `{"prompt":"${'x'.repeat(800 * KiB)}"}`;
    const declared = await post(`${s.url}/api/traces`, large, auth);
    expect(declared.status).to.equal(503);
    expect(declared.headers.get('retry-after')).to.equal('1');
    expect(declared.json.error).to.deep.equal({
      code: 'server_busy',
      message: 'too many request bodies are being received or processed at once; retry shortly',
      details: { inflightLimitBytes: 2 * MiB },
    });
    // No declared length (gzip): refused when the inflated bytes reach the budget.
    const zipped = await post(`${s.url}/api/traces`, gzipSync(large), { ...auth, 'content-encoding': 'gzip' });
    expect(zipped.status).to.equal(503);
    expect(zipped.json.error.code).to.equal('server_busy');
    // The OTLP route reads through the same budget; 503 is UNAVAILABLE (14), retryable for OTLP exporters.
    const otlp = await post(`${s.url}/v1/traces`, `{"resourceSpans":[]${' '.repeat(800 * KiB)}}`, auth);
    expect(otlp.status).to.equal(503);
    expect(otlp.headers.get('retry-after')).to.equal('1');
    expect(otlp.json).to.include({ code: 14 });
    expect(otlp.json.message).to.include('too many request bodies');

    // A small body fits in what is left.
    const small = await post(`${s.url}/api/traces`, { prompt: 'small', response: 'ok' }, auth);
    expect(small.status, small.text).to.equal(200);
    expect(await inflight(s)).to.equal(2 * pad.length);

    // The held bodies finish normally and give their bytes back.
    a.req.end('{"prompt":"a","response":"r"}');
    b.req.end('{"prompt":"b","response":"r"}');
    expect((await a.done).status).to.equal(200);
    expect((await b.done).status).to.equal(200);
    await until('the budget back to 0', async () => (await inflight(s)) === 0);

    // And the large body now goes through.
    expect((await post(`${s.url}/api/traces`, large, auth)).status).to.equal(200);
    expect(await inflight(s)).to.equal(0);
  });

  it('bytes of a body whose client goes away mid-way are given back (plain and gzip)', async () => {
    const plain = upload(s, '/api/traces', auth, Buffer.alloc(300 * KiB, 0x20));
    // A gzip stream flushed part-way: the inflater has output, the request is not complete.
    const { createGzip, constants } = await import('node:zlib');
    const gz = createGzip();
    const zipped = upload(s, '/api/traces', { ...auth, 'content-encoding': 'gzip' }, Buffer.alloc(0));
    gz.on('data', (c: Buffer) => zipped.req.write(c));
    gz.write(Buffer.alloc(500 * KiB, 0x20));
    gz.flush(constants.Z_SYNC_FLUSH);
    await until('both bodies buffered', async () => (await inflight(s)) === 800 * KiB);
    plain.req.on('error', () => {});
    zipped.req.on('error', () => {});
    plain.done.catch(() => {});
    zipped.done.catch(() => {});
    plain.req.destroy();
    zipped.req.destroy();
    await until('the budget back to 0', async () => (await inflight(s)) === 0);
    expect((await post(`${s.url}/api/traces`, { prompt: 'after' }, auth)).status).to.equal(200);
  });

  it('parallel gzip bombs are each answered (413 at the body limit or 503 past the budget), and the budget ends at 0', async function () {
    this.timeout(120_000);
    const bomb = gzipSync(Buffer.alloc(20 * MiB, 0x20)); // 20 MiB of whitespace: ~20 KiB gzip
    const answers = await Promise.all(
      Array.from({ length: 24 }, () => post(`${s.url}/api/traces`, bomb, { ...auth, 'content-encoding': 'gzip' })),
    );
    const statuses = answers.map((r) => r.status);
    expect(
      statuses.every((st) => st === 413 || st === 503),
      statuses.join(','),
    ).to.equal(true);
    expect(statuses).to.include(413);
    for (const r of answers) expect(r.json.error.code).to.equal(r.status === 413 ? 'payload_too_large' : 'server_busy');
    await until('the budget back to 0', async () => (await inflight(s)) === 0);
    expect((await post(`${s.url}/api/traces`, { prompt: 'after bombs' }, auth)).status).to.equal(200);
  });
});

describe('in-flight body budget, held until the answer', function () {
  let s: TestServer;
  let fake: Awaited<ReturnType<typeof import('../support/fake-responses.ts')['startFakeResponses']>>;
  let auth: Record<string, string>;
  before(async () => {
    const { startFakeResponses } = await import('../support/fake-responses.ts');
    fake = await startFakeResponses();
    s = await startTestServer('duckdb', {
      TRACEGATE_MAX_BODY_BYTES: String(16 * MiB),
      TRACEGATE_MAX_INFLIGHT_BODY_BYTES: String(20 * MiB),
      TRACEGATE_MAX_SPANS_PER_REQUEST: '100000',
      TRACEGATE_PROVIDER_BASE_URL: fake.url,
      TRACEGATE_PROVIDER_API_KEY: 'sk-fake',
    });
    auth = { authorization: `Bearer ${(await s.key('held')).key}` };
  });
  after(async () => {
    await s?.close();
    await fake?.close();
  });

  it('a body read whole keeps its bytes while its request is decoded, enriched and spooled, then gives them back', async () => {
    const { buildOtlpTemplate } = await import('../../bench/otlp.ts');
    const t = buildOtlpTemplate();
    const body = Buffer.concat(Array.from({ length: Math.floor((12 * MiB) / t.body.length) }, () => t.body)); // ~12 MiB, ~8,000 spans
    let peak = 0;
    let done = false;
    const sent = post(`${s.url}/v1/traces`, body, { ...auth, 'content-type': 'application/x-protobuf' }).finally(() => {
      done = true;
    });
    while (!done) {
      peak = Math.max(peak, await inflight(s));
      await sleep(10);
    }
    expect((await sent).status).to.equal(200);
    // Seen while the request was being processed, after its body had been read in full.
    expect(peak).to.equal(body.length);
    await until('the budget back to 0', async () => (await inflight(s)) === 0);
  });

  it('the proxy gives its bytes back once the request is forwarded: a slow provider holds none of the budget', async () => {
    const input = 'tell me a story '.repeat(500_000); // 8 MB
    const slow = post(
      `${s.url}/api/proxy/provider/responses`,
      { model: 'gpt-4o-mini', input, metadata: { delay_ms: '1500' } },
      auth,
    );
    await until('the provider called', async () => fake.requests.length > 0);
    expect(await inflight(s)).to.equal(0);
    // 14 MiB more: past the budget if the waiting request still held its 8 MB.
    const { buildOtlpTemplate } = await import('../../bench/otlp.ts');
    const t = buildOtlpTemplate();
    const big = Buffer.concat(
      Array.from({ length: Math.floor((14 * MiB) / t.body.length) }, (_, i) => {
        const b = Buffer.from(t.body);
        b.writeUInt32BE(i + 1000, t.traceIdOffsets[0]!);
        return b;
      }),
    );
    const res = await post(`${s.url}/v1/traces`, big, { ...auth, 'content-type': 'application/x-protobuf' });
    expect(res.status, res.text).to.equal(200);
    expect((await slow).status).to.equal(200);
    expect(await inflight(s)).to.equal(0);
  });
});

describe('a client gone before its body is read', () => {
  it('a compressed body whose client left while the request waited (auth, lookups) settles at once', async () => {
    const Koa = (await import('koa')).default;
    const { readBody } = await import('../../collector/http/body.ts');
    const { createServer } = await import('node:http');
    const outcomes: string[] = [];
    const app = new Koa();
    app.use(async (ctx) => {
      await sleep(300); // the request waits (a slow key lookup) while the client goes away
      try {
        await readBody(ctx, MiB);
        outcomes.push('read');
      } catch (err) {
        outcomes.push((err as { code?: string }).code ?? 'error');
      }
      ctx.status = 204;
    });
    const server = createServer(app.callback()).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const port = (server.address() as { port: number }).port;
      const req = request(`http://127.0.0.1:${port}/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      });
      req.on('error', () => {});
      req.write(gzipSync(Buffer.from('{"prompt":"' + 'x'.repeat(10_000) + '"}')).subarray(0, 10));
      await sleep(50);
      req.destroy();
      await until('the handler to settle', async () => outcomes.length === 1, 2_000);
      expect(outcomes).to.deep.equal(['request_aborted']);
    } finally {
      server.close();
    }
  });
});
