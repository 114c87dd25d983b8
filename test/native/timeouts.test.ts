// Clients that stall: an upload that stops sending, a client that stops reading its response. Neither may hold
// the server's memory (the body budget, a buffered response) for long; the proxy still waits out a slow provider.
import { expect } from 'chai';
import { connect } from 'node:net';
import { request } from 'node:http';
import { get, post, startTestServer, type TestServer } from '../support/server.ts';
import { startFakeResponses, type FakeResponses } from '../support/fake-responses.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDbStorage } from '../../storage/duckdb.ts';
import type { Storage } from '../../core/ports/storage.ts';

describe('stalled clients', function () {
  this.timeout(120_000);
  let s: TestServer;
  let fake: FakeResponses;
  let auth: Record<string, string>;
  before(async () => {
    fake = await startFakeResponses();
    s = await startTestServer('duckdb', {
      TRACEGATE_BODY_IDLE_TIMEOUT_MS: '400',
      TRACEGATE_SOCKET_IDLE_TIMEOUT_MS: '1500',
      TRACEGATE_MAX_STRING_BYTES: String(8 << 20),
      TRACEGATE_MAX_BODY_BYTES: String(20 << 20),
      TRACEGATE_PROVIDER_BASE_URL: fake.url,
      TRACEGATE_PROVIDER_API_KEY: 'sk-fake',
    });
    auth = { authorization: `Bearer ${(await s.key()).key}` };
  });
  after(async () => {
    await s?.close();
    await fake?.close();
  });

  it('an upload that stops sending is answered 408 request_timeout after TRACEGATE_BODY_IDLE_TIMEOUT_MS, its bytes given back', async () => {
    const started = Date.now();
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${s.url}/api/traces`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'content-length': '100000' },
      });
      req.on('response', (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body });
          req.destroy();
        });
      });
      req.on('error', reject);
      req.write('{"prompt":"' + 'x'.repeat(5000)); // then nothing more
    });
    expect(answer.status).to.equal(408);
    expect(JSON.parse(answer.body).error.code).to.equal('request_timeout');
    expect(Date.now() - started).to.be.within(300, 5000);
    expect(/^tracegate_inflight_body_bytes (\d+)$/m.exec((await get(`${s.url}/metrics`)).text)?.[1]).to.equal('0');
  });

  it('a client that stops reading a large response is disconnected after TRACEGATE_SOCKET_IDLE_TIMEOUT_MS', async () => {
    const big = 'p'.repeat(7 << 20);
    expect(
      (await post(`${s.url}/api/traces`, { requestId: 'big-answer', prompt: big, response: big }, auth)).status,
    ).to.equal(200);
    await s.running.pipeline.flush();
    // Paused for 5 s (more than the idle limit), then reading again: the server has given up on the response, so
    // what arrives is what the kernels had buffered, well short of the whole answer, and then the connection ends.
    const received = await new Promise<number>((resolve, reject) => {
      let got = 0;
      const sock = connect(s.running.port, '127.0.0.1', () => {
        sock.write(`GET /api/traces/big-answer HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth.authorization}\r\n\r\n`);
        sock.pause();
        setTimeout(() => sock.resume(), 5000);
      });
      sock.on('data', (d: Buffer) => {
        got += d.length;
      });
      sock.on('close', () => resolve(got));
      sock.on('error', () => {}); // a reset is as good as an end here
      setTimeout(() => reject(new Error('the stalled reader was never disconnected')), 30_000).unref();
    });
    expect(received).to.be.below(28 << 20);
    expect((await get(`${s.url}/healthz`)).status).to.equal(200);
  });

  it('the proxy still waits for a provider silent longer than the idle limit', async () => {
    const res = await post(
      `${s.url}/api/proxy/provider/responses`,
      { model: 'gpt-4o-mini', input: 'hi', metadata: { delay_ms: '2500' } },
      auth,
    );
    expect(res.status, res.text).to.equal(200);
    expect(res.json.object).to.equal('response');
  });
});

describe('a handler slower than the idle limit', function () {
  this.timeout(120_000);
  it('still answers: the limit applies while the answer is written, not while it is worked out (a long verify)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-slow-'));
    const real = new DuckDbStorage(join(dir, 'db.duckdb'));
    const slow = new Proxy(real, {
      get: (target, prop, recv) => {
        const v = Reflect.get(target, prop, recv);
        if (typeof v !== 'function') return v;
        if (prop !== 'listTraces') return v.bind(target);
        return async (...args: unknown[]) => {
          await new Promise((r) => setTimeout(r, 2500));
          return (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        };
      },
    }) as Storage;
    const s = await startTestServer('duckdb', { TRACEGATE_SOCKET_IDLE_TIMEOUT_MS: '1000' }, slow);
    try {
      const auth = { authorization: `Bearer ${(await s.key()).key}` };
      const res = await get(`${s.url}/api/traces`, auth);
      expect(res.status, res.text).to.equal(200);
      // and the connection is kept alive afterwards for Node's keep-alive time, not the idle limit
      expect((await get(`${s.url}/healthz`)).status).to.equal(200);
    } finally {
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
