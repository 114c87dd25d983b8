// The TypeScript SDK when things go wrong: the server down, hanging or refusing the key, a 429 storm, answers lost
// after the server stored the batch, a full queue, and a process that exits with traces still queued.
import { spawn } from 'node:child_process';
import { expect } from 'chai';
import { Tracegate, type TracegateError } from '../../packages/sdk/src/index.ts';
import { freePort } from '../support/process.ts';
import { flushed, startTestServer, type TestServer } from '../support/server.ts';
import {
  accepted,
  countingFetch,
  listTraces,
  type Receiver,
  reply,
  startLossyForwarder,
  startReceiver,
} from './support/receiver.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('sdk (TypeScript): delivery when things go wrong', function () {
  this.timeout(90_000);
  let s: TestServer;
  const clients: Tracegate[] = [];
  const closers: Array<{ close(): Promise<void> }> = [];
  const client = (opts: ConstructorParameters<typeof Tracegate>[0]) => {
    const tg = new Tracegate({ flushOnExit: false, retryBaseDelayMs: 50, ...opts });
    clients.push(tg);
    return tg;
  };
  const receiver = async (...args: Parameters<typeof startReceiver>): Promise<Receiver> => {
    const r = await startReceiver(...args);
    closers.push(r);
    return r;
  };

  before(async () => {
    s = await startTestServer('duckdb');
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.shutdown(500)));
    await Promise.all(closers.splice(0).map((c) => c.close()));
  });
  after(async () => {
    await s.close();
  });

  it('server down: calls return, flush() and shutdown() resolve in bounded time, the loss is reported', async () => {
    const port = await freePort();
    const errors: TracegateError[] = [];
    const tg = client({
      apiKey: 'tg_any',
      baseUrl: `http://127.0.0.1:${port}`,
      onError: (e) => errors.push(e),
      maxRetries: 2,
    });
    for (let i = 0; i < 30; i++) tg.trace('m', `p${i}`);
    tg.feedback({ traceId: 'x', value: 'up' });
    tg.toolCall({ name: 'lookup' });
    let started = Date.now();
    await tg.flush(5000);
    expect(Date.now() - started).to.be.below(5000); // gave up after 3 attempts: well before the deadline
    expect(errors.map((e) => [e.code, e.count])).to.have.deep.members([
      ['retries_exhausted', 30],
      ['retries_exhausted', 1],
      ['retries_exhausted', 1],
    ]);
    expect(errors[0]!.message).to.match(/could not reach \/api\/\S+: ECONNREFUSED; gave up after 3 attempts/);
    expect(tg.stats).to.deep.include({ sent: 0, failed: 32, retries: 6, queued: 0 });

    // With a long backoff, flush() returns at its deadline and shutdown() drops what is left, reporting it.
    const slow = client({
      apiKey: 'tg_any',
      baseUrl: `http://127.0.0.1:${port}`,
      onError: (e) => errors.push(e),
      retryBaseDelayMs: 60_000,
    });
    slow.trace('m', 'never sent');
    started = Date.now();
    await slow.flush(300);
    expect(Date.now() - started).to.be.within(250, 2000);
    await slow.shutdown(300);
    expect(Date.now() - started).to.be.below(3000);
    expect(errors.at(-1)).to.include({ code: 'shutdown', count: 1 });
    expect(slow.stats).to.deep.include({ failed: 1, queued: 0 });
  });

  it('a server that never answers: each request times out (timeoutMs), flush() still returns at its deadline', async () => {
    const hang = await receiver(() => undefined);
    const errors: TracegateError[] = [];
    const tg = client({
      apiKey: 'tg_any',
      baseUrl: hang.url,
      timeoutMs: 200,
      maxRetries: 1,
      onError: (e) => errors.push(e),
    });
    tg.trace('m', 'p');
    const started = Date.now();
    await tg.flush(3000);
    expect(Date.now() - started).to.be.within(350, 2500);
    expect(errors.map((e) => e.code)).to.deep.equal(['retries_exhausted']);
    expect(errors[0]!.message).to.match(/no answer from \/api\/traces within 200 ms/);
    expect(hang.requests).to.have.length(2);
  });

  it('a wrong key: 401 is reported once per batch and not retried', async () => {
    const counting = countingFetch();
    const errors: TracegateError[] = [];
    const tg = client({
      apiKey: 'tg_wrong_key',
      baseUrl: s.url,
      fetch: counting.fetch,
      onError: (e) => errors.push(e),
    });
    for (let i = 0; i < 5; i++) tg.trace('m', `p${i}`);
    await tg.flush();
    expect(counting.calls.map((c) => c.status)).to.deep.equal([401]);
    expect(errors).to.have.length(1);
    expect(errors[0]).to.include({ code: 'unauthorized', status: 401, count: 5, route: '/api/traces' });
    expect(tg.stats).to.deep.include({ sent: 0, failed: 5, retries: 0 });
  });

  it("a 429 storm from tracegate's own rate limit: every trace stored once, each wait honouring Retry-After", async () => {
    const limited = await startTestServer('duckdb', {
      TRACEGATE_RATE_LIMIT_POINTS: '2',
      TRACEGATE_RATE_LIMIT_WINDOW_SECONDS: '1',
    });
    closers.push(limited);
    const { key } = await limited.key();
    const counting = countingFetch();
    const errors: TracegateError[] = [];
    const tg = client({
      apiKey: key,
      baseUrl: limited.url,
      fetch: counting.fetch,
      flushAt: 5,
      maxBatchSize: 5,
      maxRetries: 10,
      onError: (e) => errors.push(e),
    });
    const ids = Array.from({ length: 40 }, (_, i) => tg.trace('m', `storm ${i}`));
    await tg.flush(60_000);
    expect(errors).to.deep.equal([]);
    const limitedCalls = counting.calls.filter((c) => c.status === 429);
    expect(limitedCalls.length).to.be.greaterThan(0);
    expect(tg.stats).to.deep.include({ sent: 40, failed: 0, retries: limitedCalls.length });
    // The server said Retry-After: 1 (its window); no retry came sooner.
    counting.calls.forEach((c, i) => {
      if (c.status === 429 && counting.calls[i + 1])
        expect(counting.calls[i + 1]!.startMs - c.startMs).to.be.at.least(990);
    });
    await flushed(limited);
    const stored = (await listTraces(limited.url, key)).map((t) => t.traceId);
    expect(stored).to.have.length(40);
    expect(new Set(stored)).to.deep.equal(new Set(ids));
  });

  it('Retry-After as an HTTP date and as seconds is waited for, and capped at retryMaxDelayMs', async () => {
    const plan = [
      (res: any) => reply(res, 503, {}, { 'retry-after': new Date(Date.now() + 2000).toUTCString() }),
      (res: any) => reply(res, 429, {}, { 'retry-after': '1' }),
      (res: any) => reply(res, 429, {}, { 'retry-after': '3600' }),
    ];
    const r = await receiver((req, i, res) => (plan[i] ? plan[i]!(res) : reply(res, 200, accepted(req))));
    const tg = client({ apiKey: 'k', baseUrl: r.url, retryMaxDelayMs: 1500 });
    tg.trace('m', 'p');
    await tg.flush(15_000);
    expect(r.requests).to.have.length(4);
    const gaps = r.requests.slice(1).map((q, i) => q.atMs - r.requests[i]!.atMs);
    // An HTTP date has whole seconds: the wait is at least the second it names, less what rounding took off.
    expect(gaps[0]).to.be.within(1000, 3000);
    expect(gaps[1]).to.be.within(1000, 1800); // 1 s plus at most 10 %, plus a loaded machine's delay
    expect(gaps[2]).to.be.within(1450, 2300); // 3600 s capped at 1.5 s
    expect(tg.stats).to.deep.include({ sent: 1, retries: 3 });
  });

  it('network errors and 5xx back off exponentially; after maxRetries the batch is given up and reported', async () => {
    const r = await receiver((_req, _i, res) =>
      reply(res, 502, { error: { code: 'bad_gateway', message: 'upstream' } }),
    );
    const errors: TracegateError[] = [];
    const tg = client({
      apiKey: 'k',
      baseUrl: r.url,
      maxRetries: 3,
      retryBaseDelayMs: 100,
      onError: (e) => errors.push(e),
    });
    tg.trace('m', 'p');
    await tg.flush(10_000);
    expect(r.requests).to.have.length(4);
    const gaps = r.requests.slice(1).map((q, i) => q.atMs - r.requests[i]!.atMs);
    // base·2^n, half of it random: [50,100], [100,200], [200,400] ms.
    for (const [i, min] of [50, 100, 200].entries()) expect(gaps[i]).to.be.within(min - 5, min * 2 + 400);
    expect(errors).to.have.length(1);
    expect(errors[0]).to.include({ code: 'retries_exhausted', status: 502, count: 1 });
    expect(errors[0]!.message).to.equal('/api/traces answered 502 (bad_gateway: upstream); gave up after 4 attempts');
  });

  it('an answer lost after the server stored the batch: the retry replaces, never duplicates (requestId)', async () => {
    const { key } = await s.key();
    const lossy = await startLossyForwarder(s.url, (i) => i === 0 || i === 2);
    closers.push(lossy);
    const errors: TracegateError[] = [];
    const tg = client({ apiKey: key, baseUrl: lossy.url, maxBatchSize: 10, onError: (e) => errors.push(e) });
    const ids = Array.from({ length: 20 }, (_, i) => tg.trace('m', `lossy ${i}`, { response: `r${i}` }));
    await tg.flush(20_000);
    expect(errors).to.deep.equal([]);
    expect(lossy.requests).to.have.length(4); // two batches, each answered only the second time
    expect(tg.stats).to.deep.include({ sent: 20, retries: 2 });
    await flushed(s);
    const stored = (await listTraces(s.url, key)).map((t) => t.traceId);
    expect(stored.sort()).to.deep.equal([...ids].sort());
  });

  it('a server that comes back: what was queued during the outage is delivered', async () => {
    const port = await freePort();
    const tg = client({
      apiKey: 'k',
      baseUrl: `http://127.0.0.1:${port}`,
      maxRetries: 20,
      retryBaseDelayMs: 100,
      retryMaxDelayMs: 400,
    });
    const ids = Array.from({ length: 7 }, (_, i) => tg.trace('m', `outage ${i}`));
    await sleep(500);
    expect(tg.stats).to.deep.include({ sent: 0, queued: 7 });
    const back = await receiver((req, _i, res) => reply(res, 200, accepted(req)), port);
    await tg.flush(10_000);
    expect(tg.stats).to.deep.include({ sent: 7, failed: 0 });
    expect(back.requests.flatMap((q) => q.body.map((t: any) => t.requestId))).to.deep.equal(ids);
  });

  it('a full queue drops the oldest items, counts them and reports each burst once; the newest are kept', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const r = await receiver(async (req, i, res) => {
      if (i === 0) await held;
      reply(res, 200, accepted(req));
    });
    const errors: TracegateError[] = [];
    const tg = client({ apiKey: 'k', baseUrl: r.url, flushAt: 1, maxQueueSize: 10, onError: (e) => errors.push(e) });
    tg.trace({ model: 'm', prompt: 'first', requestId: 'first' });
    await r.waitFor(1); // one request is out and held
    for (let i = 0; i < 50; i++) tg.trace({ model: 'm', prompt: `p${i}`, requestId: `n${i}` });
    await sleep(50);
    expect(tg.stats).to.deep.include({ dropped: 40, queued: 11 });
    expect(errors.map((e) => [e.code, e.count])).to.deep.equal([['queue_full', 40]]);
    release();
    await tg.flush();
    const delivered = r.requests.flatMap((q) => q.body.map((t: any) => t.requestId));
    expect(delivered).to.deep.equal(['first', ...Array.from({ length: 10 }, (_, i) => `n${40 + i}`)]);
  });

  it('a process that exits with a full queue: the beforeExit flush stores every trace', async () => {
    const { key } = await s.key();
    const child = await runChild({ TRACEGATE_API_KEY: key, TRACEGATE_BASE_URL: s.url, SDK_COUNT: '1500' });
    expect(child.code).to.equal(0);
    expect(child.stderr).to.not.match(/^error/m);
    expect(child.stderr).to.match(/stats \{"queued":0,"sent":1500,"dropped":0,"failed":0/);
    await flushed(s);
    const stored = await listTraces(s.url, key);
    expect(stored).to.have.length(1500);
    expect(stored.every((t) => t.source === 'sdk')).to.equal(true);
  });

  it('a process that exits while the server is down waits at most flushTimeoutMs, then drops and reports', async () => {
    const port = await freePort();
    const started = Date.now();
    const child = await runChild({
      TRACEGATE_API_KEY: 'k',
      TRACEGATE_BASE_URL: `http://127.0.0.1:${port}`,
      SDK_COUNT: '10',
      SDK_FLUSH_TIMEOUT_MS: '1500',
    });
    const took = Date.now() - started;
    expect(child.code).to.equal(0);
    expect(took).to.be.within(1400, 10_000);
    expect(child.stderr).to.match(/^error shutdown 10$/m);
    expect(child.stderr).to.match(/stats \{"queued":0,"sent":0,"dropped":0,"failed":10/);
  });
});

function runChild(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['test/sdk/support/exit-child.ts'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stderr }));
  });
}
