// Lingering close (collector/http/linger.ts): an answer given while the request body is still arriving reaches the
// client, then the rest of the body is read and discarded within TRACEGATE_LINGER_MAX_BYTES and
// TRACEGATE_LINGER_TIMEOUT_MS before the connection closes. Closed at once, as before, up to six of ten concurrent
// 60 MB fetch() POSTs to /api/traces failed with EPIPE instead of reading their 413 (73 of 250 over 25 rounds).
import { expect } from 'chai';
import { Agent, createServer, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { Worker } from 'node:worker_threads';
import { loadConfig } from '../../config/index.ts';
import { lingeringResponse } from '../../collector/http/linger.ts';
import { get, post, startTestServer, type TestServer } from '../support/server.ts';
import { sleep } from '../support/process.ts';

const KiB = 1024;
const MiB = 1024 * KiB;

interface Fetched {
  status?: number;
  connection?: string | null;
  contentType?: string | null;
  json?: any;
  error?: string;
}

interface FetchSpec {
  path: string;
  headers: Record<string, string>;
  bytes: number;
  /** Sent as a stream: chunked, no Content-Length. */
  chunked?: boolean;
}

/**
 * fetch() POSTs of `bytes` bytes each, all at once, from a thread of their own: on the server's thread, the client
 * reads the answer before it handles the reset, and the failure does not show.
 */
function fetchAll(base: string, specs: FetchSpec[]): Promise<Fetched[]> {
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    const block = new Uint8Array(1 << 20).fill(0x20);
    const blobs = new Map();
    const blob = (bytes) => {
      if (!blobs.has(bytes)) {
        const parts = Array.from({ length: Math.floor(bytes / block.length) }, () => block);
        blobs.set(bytes, new Blob([...parts, block.subarray(0, bytes % block.length)]));
      }
      return blobs.get(bytes);
    };
    const stream = (bytes) => {
      let sent = 0;
      return new ReadableStream({
        pull(c) {
          if (sent >= bytes) return c.close();
          const n = Math.min(block.length, bytes - sent);
          sent += n;
          c.enqueue(block.slice(0, n));
        },
      });
    };
    Promise.all(workerData.specs.map(async (spec) => {
      try {
        const res = await fetch(workerData.base + spec.path, {
          method: 'POST',
          headers: spec.headers,
          body: spec.chunked ? stream(spec.bytes) : blob(spec.bytes),
          duplex: 'half',
        });
        const text = await res.text();
        let json = null;
        try { json = JSON.parse(text); } catch {}
        return { status: res.status, connection: res.headers.get('connection'), contentType: res.headers.get('content-type'), json };
      } catch (err) {
        return { error: String(err.cause?.code ?? err.cause?.message ?? err.message) };
      }
    })).then((results) => parentPort.postMessage(results));
  `;
  const plain = specs.map(({ path, headers, bytes, chunked }) => ({ path, headers, bytes, chunked }));
  const worker = new Worker(code, { eval: true, workerData: { base, specs: plain } });
  return new Promise((resolve, reject) => {
    worker.once('message', (results: Fetched[]) => {
      resolve(results);
      void worker.terminate();
    });
    worker.once('error', reject);
  });
}

interface Uploaded {
  status: number;
  headers: string;
  body: any;
  /** When the whole answer had arrived, when the connection closed (ms since the upload started). */
  answeredMs: number;
  closedMs: number;
  sent: number;
  /** The socket error the client saw (a reset once a bound is passed), if any. */
  error: string | null;
  localPort: number;
}

/**
 * A raw request (`head`: a declared length, or chunked) whose body keeps coming, `total` bytes whatever the answer: as
 * fast as the connection takes them, or one `block` (`chunk` spaces) every `everyMs`. It keeps writing after the
 * server's FIN (allowHalfOpen), and reads everything the server sends until the connection closes.
 */
function rawUpload(
  port: number,
  head: string,
  opts: { total: number; chunk?: number; block?: Buffer; everyMs?: number; endWhenSent?: boolean },
): Promise<Uploaded> {
  const block = opts.block ?? Buffer.alloc(opts.chunk ?? 64 * KiB, 0x20);
  const started = Date.now();
  return new Promise((resolve) => {
    const sock: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let got = Buffer.alloc(0);
    let answeredMs = -1;
    let sent = 0;
    let error: string | null = null;
    let timer: NodeJS.Timeout | undefined;
    let localPort = 0;
    const give = () => {
      if (sock.destroyed || !sock.writable || sent >= opts.total) return false;
      const part = block.subarray(0, Math.min(block.length, opts.total - sent));
      sent += part.length;
      if (sent >= opts.total && opts.endWhenSent) {
        sock.end(part);
        return false;
      }
      return sock.write(part);
    };
    sock.once('connect', () => {
      localPort = sock.localPort ?? 0;
      sock.write(head);
      if (opts.everyMs) timer = setInterval(give, opts.everyMs);
      else {
        const pump = () => {
          while (give());
          if (!sock.destroyed && sock.writable && sent < opts.total) sock.once('drain', pump);
        };
        pump();
      }
    });
    sock.on('data', (c: Buffer) => {
      got = Buffer.concat([got, c]);
      const end = got.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(got.subarray(0, end).toString())?.[1];
      if (answeredMs < 0 && end >= 0 && length && got.length >= end + 4 + Number(length))
        answeredMs = Date.now() - started;
    });
    sock.on('error', (err: NodeJS.ErrnoException) => {
      error ??= err.code ?? err.message;
    });
    const safety = setTimeout(() => sock.destroy(), 60_000);
    sock.once('close', () => {
      clearInterval(timer);
      clearTimeout(safety);
      const text = got.toString();
      const [h = '', b = ''] = text.split('\r\n\r\n', 2);
      let body: unknown = null;
      try {
        body = JSON.parse(b);
      } catch {
        /* not JSON */
      }
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(h)?.[1] ?? 0),
        headers: h.toLowerCase(),
        body,
        answeredMs,
        closedMs: Date.now() - started,
        sent,
        error,
        localPort,
      });
    });
  });
}

/** What the server read on each connection it accepted, by the client's port, once the connection closed. */
function serverReads(s: TestServer): Map<number, number> {
  const reads = new Map<number, number>();
  s.running.server.on('connection', (sock: Socket) => {
    const port = sock.remotePort ?? 0;
    sock.once('close', () => reads.set(port, sock.bytesRead));
  });
  return reads;
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

const head = (path: string, headers: Record<string, string>) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;

describe('lingering close: an answer given while the body still arrives reaches the client', function () {
  this.timeout(120_000);

  it('TRACEGATE_LINGER_MAX_BYTES and TRACEGATE_LINGER_TIMEOUT_MS: defaults, 0 allowed, bounded', () => {
    const c = loadConfig({});
    expect(c.LINGER_MAX_BYTES).to.equal(64 * MiB);
    expect(c.LINGER_TIMEOUT_MS).to.equal(10_000);
    const off = loadConfig({ TRACEGATE_LINGER_MAX_BYTES: '0', TRACEGATE_LINGER_TIMEOUT_MS: '0' });
    expect([off.LINGER_MAX_BYTES, off.LINGER_TIMEOUT_MS]).to.deep.equal([0, 0]);
    expect(() => loadConfig({ TRACEGATE_LINGER_MAX_BYTES: String(1024 * MiB + 1) })).to.throw(
      /TRACEGATE_LINGER_MAX_BYTES/,
    );
    expect(() => loadConfig({ TRACEGATE_LINGER_TIMEOUT_MS: String(2 ** 31) })).to.throw(/TRACEGATE_LINGER_TIMEOUT_MS/);
  });

  describe('with the default bounds (64 MiB, 10 s) and the default 20 MiB body limit', function () {
    let s: TestServer;
    let key: string;
    let reads: Map<number, number>;
    before(async () => {
      s = await startTestServer('duckdb');
      key = (await s.key('linger')).key;
      reads = serverReads(s);
    });
    after(() => s?.close());

    it('discarding costs no memory: 3 rounds of 8 uploads of 60 MB answered 413 at once are read whole (1.44 GB), RSS grows by a small fraction of it, and each closes cleanly', async () => {
      const total = 60 * 1000 * 1000;
      const headers = {
        Authorization: `Bearer ${key}`,
        'Content-Type': 'application/json',
        'Content-Length': String(total),
      };
      const before = process.memoryUsage.rss();
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 10);
      try {
        for (let round = 0; round < 3; round++) {
          const ups = await Promise.all(
            Array.from({ length: 8 }, () =>
              rawUpload(s.running.port, head('/api/traces', headers), { total, chunk: MiB, endWhenSent: true }),
            ),
          );
          for (const up of ups) {
            expect(up.status).to.equal(413);
            expect(up.headers).to.include('connection: close');
            expect(up.body.error.code).to.equal('payload_too_large');
            expect(up.answeredMs).to.be.within(0, up.closedMs);
            // The whole body was taken (it is within the byte bound): no reset, and the server read all of it.
            expect(up.error).to.equal(null);
            expect(up.sent).to.equal(total);
            await until('the server side closed', () => reads.has(up.localPort));
            expect(reads.get(up.localPort)).to.be.greaterThan(total);
          }
        }
      } finally {
        clearInterval(sampler);
      }
      // 1.44 GB discarded: what grows is garbage awaiting collection (about 90 MiB here), not the bodies.
      expect(peak - before, `RSS ${before >> 20} → peak ${peak >> 20} MiB`).to.be.below(250 * MiB);
      // The budget held none of it.
      const m = /^tracegate_inflight_body_bytes (\d+)$/m.exec((await get(`${s.url}/metrics`)).text);
      expect(Number(m?.[1])).to.equal(0);
    });

    it('ten concurrent 60 MB fetch() POSTs to /api/traces all read their 413 payload_too_large (no EPIPE, no reset), three times over', async () => {
      const spec = {
        path: '/api/traces',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        bytes: 60 * 1000 * 1000,
      };
      // Before, one round in 25 or so had no failure: three rounds all clean do not happen by chance.
      for (let round = 0; round < 3; round++) {
        const results = await fetchAll(
          s.url,
          Array.from({ length: 10 }, () => spec),
        );
        expect(results.map((r) => r.status ?? r.error)).to.deep.equal(Array(10).fill(413));
        for (const r of results) {
          expect(r.connection).to.equal('close');
          expect(r.json).to.deep.equal({
            error: {
              code: 'payload_too_large',
              message: `request body exceeds ${20 * MiB} bytes (after decompression)`,
              details: { limitBytes: 20 * MiB },
            },
          });
        }
      }
    });

    it('every route family and every early answer: OTLP, proxy, 401, 404, 405, 415, and a chunked body refused part-way', async () => {
      const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const big = 60 * 1000 * 1000;
      const cases: Array<FetchSpec & { status: number; check: (r: Fetched) => void }> = [
        {
          path: '/v1/traces',
          headers: auth,
          bytes: big,
          status: 413,
          check: (r) =>
            expect(r.json)
              .to.include({ code: 11 })
              .and.to.have.property('message')
              .that.match(/exceeds/),
        },
        {
          path: '/v1/traces',
          headers: { ...auth, 'content-type': 'application/x-protobuf' },
          bytes: big,
          status: 413,
          check: (r) => expect(r.contentType).to.equal('application/x-protobuf'),
        },
        {
          path: '/api/proxy/provider/responses',
          headers: auth,
          bytes: big,
          status: 413,
          check: (r) =>
            expect(r.json.error).to.include({ type: 'tracegate_error', param: null, code: 'payload_too_large' }),
        },
        {
          path: '/api/traces',
          headers: { 'content-type': 'application/json' },
          bytes: big,
          status: 401,
          check: (r) => expect(r.json.error.code).to.equal('unauthorized'),
        },
        {
          path: '/no/such/route',
          headers: auth,
          bytes: big,
          status: 404,
          check: (r) => expect(r.json.error.code).to.equal('not_found'),
        },
        {
          path: '/healthz',
          headers: auth,
          bytes: big,
          status: 405,
          check: (r) => expect(r.json.error.code).to.equal('method_not_allowed'),
        },
        {
          path: '/api/traces',
          headers: { ...auth, 'content-type': 'text/plain' },
          bytes: big,
          status: 415,
          check: (r) => expect(r.json.error.code).to.equal('unsupported_media_type'),
        },
        {
          path: '/api/traces',
          headers: auth,
          bytes: big,
          chunked: true,
          status: 413,
          check: (r) => expect(r.json.error.code).to.equal('payload_too_large'),
        },
      ];
      const results = await fetchAll(s.url, cases);
      results.forEach((r, i) => {
        const c = cases[i]!;
        const what = `${c.path} ${JSON.stringify(c.headers['content-type'])}${c.chunked ? ' chunked' : ''}`;
        expect(r.status ?? r.error, what).to.equal(c.status);
        expect(r.connection, what).to.equal('close');
        c.check(r);
      });
    });
  });

  describe('with small bounds (8 MiB, 2 s)', function () {
    const maxBytes = 8 * MiB;
    const maxMs = 2000;
    let s: TestServer;
    let auth: Record<string, string>;
    let reads: Map<number, number>;
    before(async () => {
      s = await startTestServer('duckdb', {
        TRACEGATE_LINGER_MAX_BYTES: String(maxBytes),
        TRACEGATE_LINGER_TIMEOUT_MS: String(maxMs),
      });
      auth = { Authorization: `Bearer ${(await s.key('linger-bounds')).key}`, 'Content-Type': 'application/json' };
      reads = serverReads(s);
    });
    after(() => s?.close());

    it('a client that keeps sending fast gets the whole 413, then the connection closed once the byte bound is read', async () => {
      const up = await rawUpload(s.running.port, head('/api/traces', { ...auth, 'Content-Length': String(10 ** 10) }), {
        total: 10 ** 10,
      });
      expect(up.status).to.equal(413);
      expect(up.headers).to.include('connection: close');
      expect(up.body.error).to.deep.include({ code: 'payload_too_large', details: { limitBytes: 20 * MiB } });
      expect(up.answeredMs).to.be.within(0, up.closedMs);
      // Closed by the byte bound, long before the time bound.
      expect(up.closedMs - up.answeredMs).to.be.below(maxMs);
      await until('the server side closed', () => reads.has(up.localPort));
      const read = reads.get(up.localPort)!;
      expect(read, `${read} bytes read`).to.be.within(maxBytes, maxBytes + MiB);
      expect(up.sent).to.be.greaterThan(maxBytes);
    });

    it('a chunked body past the limit: the 413, then at most the byte bound more is read', async () => {
      // Chunks of 64 KiB of spaces, sent without end: refused once 20 MiB are read, then discarded up to 8 MiB more.
      const block = Buffer.concat([Buffer.from('10000\r\n'), Buffer.alloc(64 * KiB, 0x20), Buffer.from('\r\n')]);
      const up = await rawUpload(s.running.port, head('/api/traces', { ...auth, 'Transfer-Encoding': 'chunked' }), {
        total: 10 ** 10,
        block,
      });
      expect(up.status).to.equal(413);
      expect(up.headers).to.include('connection: close');
      expect(up.body.error.code).to.equal('payload_too_large');
      expect(up.answeredMs).to.be.within(0, up.closedMs);
      expect(up.closedMs - up.answeredMs).to.be.below(maxMs);
      await until('the server side closed', () => reads.has(up.localPort));
      const read = reads.get(up.localPort)!;
      expect(read, `${read} bytes read`).to.be.within(20 * MiB + maxBytes, 20 * MiB + maxBytes + 2 * MiB);
    });

    it('a client that keeps sending slowly gets the whole 413, then the connection closed at the time bound; meanwhile nothing else waits', async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const viaAgent = (path: string) =>
        new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
          const req = request(`${s.url}${path}`, { agent }, (res) => {
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
          });
          req.on('error', reject);
          req.end();
        });
      try {
        expect(await viaAgent('/healthz')).to.deep.equal({ status: 200, reused: false });
        // 32 KiB every 25 ms: about 2.6 MB in the 2 s, under the byte bound.
        const uploading = rawUpload(
          s.running.port,
          head('/api/traces', { ...auth, 'Content-Length': String(10 ** 9) }),
          {
            total: 10 ** 9,
            chunk: 32 * KiB,
            everyMs: 25,
          },
        );
        await sleep(500);
        // While it lingers: the keep-alive connection serves on, the budget holds none of the discarded bytes, and a
        // body of its own is read and stored.
        expect(await viaAgent('/healthz')).to.deep.equal({ status: 200, reused: true });
        const m = /^tracegate_inflight_body_bytes (\d+)$/m.exec((await get(`${s.url}/metrics`)).text);
        expect(Number(m?.[1])).to.equal(0);
        const ok = await post(
          `${s.url}/api/traces`,
          { prompt: 'while lingering', response: 'ok' },
          {
            authorization: auth.Authorization!,
          },
        );
        expect(ok.status, ok.text).to.equal(200);
        const up = await uploading;
        expect(up.status).to.equal(413);
        expect(up.headers).to.include('connection: close');
        expect(up.body.error.code).to.equal('payload_too_large');
        expect(up.answeredMs).to.be.within(0, 1000);
        // Closed at the time bound (from the answer), not before and not much after.
        expect(up.closedMs - up.answeredMs).to.be.within(maxMs - 200, maxMs + 1500);
        await until('the server side closed', () => reads.has(up.localPort));
        expect(reads.get(up.localPort)).to.be.below(maxBytes);
        // And after it: the keep-alive connection still serves.
        expect(await viaAgent('/healthz')).to.deep.equal({ status: 200, reused: true });
      } finally {
        agent.destroy();
      }
    });

    it('a small body answered early (401, received whole) keeps its keep-alive connection', async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const send = () =>
        new Promise<{ status: number; connection: string | undefined; reused: boolean }>((resolve, reject) => {
          const req = request(
            `${s.url}/api/traces`,
            { agent, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': '19' } },
            (res) => {
              res.resume();
              res.on('end', () =>
                resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, reused: req.reusedSocket }),
              );
            },
          );
          req.on('error', reject);
          req.end('{"prompt":"no key"}');
        });
      try {
        expect(await send()).to.deep.equal({ status: 401, connection: 'keep-alive', reused: false });
        expect(await send()).to.deep.equal({ status: 401, connection: 'keep-alive', reused: true });
      } finally {
        agent.destroy();
      }
    });
  });
  describe('429 and 503 answered before the body is read', function () {
    let s: TestServer;
    let key: string;
    before(async () => {
      s = await startTestServer('duckdb', {
        TRACEGATE_AUTH_FAILURE_LIMIT: '1',
        TRACEGATE_MAX_INFLIGHT_BODY_BYTES: String(21 * MiB),
      });
      key = (await s.key('linger-busy')).key;
    });
    after(() => s?.close());

    it('503 server_busy on a declared length the budget cannot take, while another body holds part of it', async () => {
      const held = request(`${s.url}/api/traces`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      });
      held.on('error', () => {});
      held.write(Buffer.alloc(2 * MiB, 0x20));
      const inflight = async () =>
        Number(/^tracegate_inflight_body_bytes (\d+)$/m.exec((await get(`${s.url}/metrics`)).text)?.[1]);
      try {
        await until('the held body buffered', async () => (await inflight()) === 2 * MiB);
        const [r] = await fetchAll(s.url, [
          {
            path: '/api/traces',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            bytes: 20 * MiB,
          },
        ]);
        expect(r!.status ?? r!.error).to.equal(503);
        expect(r!.connection).to.equal('close');
        expect(r!.json.error.code).to.equal('server_busy');
        // The discarded body took none of the budget.
        expect(await inflight()).to.equal(2 * MiB);
      } finally {
        held.destroy();
      }
      await until('the budget given back', async () => (await inflight()) === 0);
    });

    it('429 rate_limited once an address has failed authentication too often', async () => {
      expect((await post(`${s.url}/api/traces`, { prompt: 'no key' })).status).to.equal(401);
      const [r] = await fetchAll(s.url, [
        { path: '/api/traces', headers: { 'content-type': 'application/json' }, bytes: 60 * 1000 * 1000 },
      ]);
      expect(r!.status ?? r!.error).to.equal(429);
      expect(r!.connection).to.equal('close');
      expect(r!.json.error.code).to.equal('rate_limited');
    });
  });

  it('an answer streamed while its route still reads the body is left alone (no close, nothing dropped)', async () => {
    const echo = createServer({ ServerResponse: lingeringResponse({ maxBytes: 0, maxMs: 0 }) }, (req, res) => {
      // Headers go out with the first bytes echoed, while the rest of the body is still arriving.
      res.setHeader('content-type', 'application/octet-stream');
      req.pipe(res);
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    try {
      const port = (echo.address() as { port: number }).port;
      const body = Buffer.alloc(4 * MiB, 0x61);
      const res = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body });
      expect(res.headers.get('connection')).to.not.equal('close');
      expect((await res.arrayBuffer()).byteLength).to.equal(body.length);
    } finally {
      echo.closeAllConnections();
      echo.close();
    }
  });
});
