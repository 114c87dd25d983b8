// The TypeScript SDK's traces against a running tracegate: the spec's call and the options form as stored, batches
// by count, by interval and by size, immediate mode, and calls that return at once.
import { expect } from 'chai';
import { Tracegate, type TracegateError } from '../../packages/sdk/src/index.ts';
import { flushed, startTestServer, type TestServer } from '../support/server.ts';
import { countingFetch, listTraces, readTrace } from './support/receiver.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('sdk (TypeScript): traces into a running tracegate', function () {
  this.timeout(60_000);
  let s: TestServer;
  let key: string;
  const clients: Tracegate[] = [];
  const client = (opts: ConstructorParameters<typeof Tracegate>[0]) => {
    const tg = new Tracegate({ apiKey: key, baseUrl: s.url, flushOnExit: false, ...opts });
    clients.push(tg);
    return tg;
  };

  before(async () => {
    s = await startTestServer('duckdb', { TRACEGATE_MAX_BODY_BYTES: String(16 * 1024) });
  });
  beforeEach(async () => {
    key = (await s.key()).key;
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.shutdown(1000)));
  });
  after(async () => {
    await s.close();
  });

  it("trace(model, input, metadata) is stored as the spec's native trace with parameters.source sdk", async () => {
    const errors: TracegateError[] = [];
    const tg = client({ onError: (e) => errors.push(e), environment: 'prod' });
    const id = tg.trace('gpt-4o-mini', 'Where is my order?', {
      response: 'It ships today.',
      metrics: { promptTokens: 12, completionTokens: 6, latencyMs: 640, finishReason: 'stop' },
      userId: 'u-7',
    });
    expect(id).to.match(/^[0-9a-f]{32}$/);
    await tg.flush();
    await flushed(s);
    const t = await readTrace(s.url, key, id);
    const span = t.spans[0];
    expect(t.summary).to.include({
      source: 'sdk',
      status: 'completed',
      model: 'gpt-4o-mini',
      prompt: 'Where is my order?',
      response: 'It ships today.',
      promptTokens: 12,
      completionTokens: 6,
      environment: 'prod',
    });
    expect(span).to.include({ requestId: id, finishReason: 'stop', durationMs: 640, trainable: true });
    expect(span.attributes.metadata).to.deep.equal({ userId: 'u-7' });
    expect(span.attributes.parameters).to.deep.equal({ source: 'sdk' });
    expect(errors).to.deep.equal([]);
    expect(tg.stats).to.deep.include({ sent: 1, failed: 0, dropped: 0, queued: 0 });
  });

  it('the options form: every native field, a requestId of the caller, chat messages as the prompt', async () => {
    const tg = client({});
    const id = tg.trace({
      requestId: 'order-42',
      model: 'gpt-4o-mini',
      provider: 'openai',
      prompt: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Where is my order?' },
      ],
      response: 'It ships today.',
      metrics: { promptTokens: 3, completionTokens: 4, estimatedCostUsd: 0.5 },
      actionName: 'support_reply',
      environment: 'staging',
      parameters: { trainingPreferred: true },
      metadata: { ticket: 9 },
    });
    expect(id).to.equal('order-42');
    await tg.flush();
    await flushed(s);
    const span = (await readTrace(s.url, key, 'order-42')).spans[0];
    expect(span).to.include({
      source: 'sdk',
      name: 'support_reply',
      actionName: 'support_reply',
      environment: 'staging',
      provider: 'openai',
      prompt: 'system: Be brief.\n\nuser: Where is my order?',
      costUsd: 0.5,
      trainingPreferred: true,
    });
    expect(span.attributes.parameters).to.deep.equal({ source: 'sdk', trainingPreferred: true });
  });

  it('calls return at once: nothing is sent inside trace(), even past flushAt', async () => {
    const counting = countingFetch();
    const tg = client({ fetch: counting.fetch, flushAt: 10 });
    const started = performance.now();
    for (let i = 0; i < 1000; i++) tg.trace('m', `prompt ${i}`, { i });
    const took = performance.now() - started;
    expect(counting.calls).to.have.length(0);
    expect(took).to.be.below(500);
    await tg.flush();
    expect(tg.stats).to.deep.include({ sent: 1000, queued: 0 });
  });

  it('batches by count: reaching flushAt sends what is queued; fewer wait for the interval or flush()', async () => {
    const counting = countingFetch();
    const tg = client({ fetch: counting.fetch, flushAt: 10, flushIntervalMs: 60_000 });
    for (let i = 0; i < 9; i++) tg.trace('m', `p${i}`);
    await sleep(300);
    expect(counting.calls).to.have.length(0);
    tg.trace('m', 'the tenth');
    await sleep(300);
    expect(counting.calls.map((c) => c.items)).to.deep.equal([10]);
    for (let i = 0; i < 5; i++) tg.trace('m', `q${i}`);
    await sleep(300);
    expect(tg.stats).to.deep.include({ sent: 10, queued: 5 });
    await tg.flush();
    expect(counting.calls.map((c) => c.items)).to.deep.equal([10, 5]);
    // A burst past flushAt goes in one request, up to maxBatchSize.
    for (let i = 0; i < 35; i++) tg.trace('m', `r${i}`);
    await sleep(300);
    expect(counting.calls.map((c) => c.items)).to.deep.equal([10, 5, 35]);
    await flushed(s);
    expect(await listTraces(s.url, key)).to.have.length(50);
  });

  it('batches by interval: fewer than flushAt items go out when the interval passes, without flush()', async () => {
    const counting = countingFetch();
    const tg = client({ fetch: counting.fetch, flushAt: 1000, flushIntervalMs: 200 });
    for (let i = 0; i < 3; i++) tg.trace('m', `p${i}`);
    await sleep(100);
    expect(counting.calls).to.have.length(0);
    const deadline = Date.now() + 3000;
    while (tg.stats.sent < 3 && Date.now() < deadline) await sleep(20);
    expect(counting.calls.map((c) => c.items)).to.deep.equal([3]);
  });

  it('requests hold at most maxBatchSize items and about maxBatchBytes; a 413 splits the batch', async () => {
    const counting = countingFetch();
    const tg = client({ fetch: counting.fetch, maxBatchSize: 100 });
    for (let i = 0; i < 250; i++) tg.trace('m', `p${i}`);
    await tg.flush();
    expect(counting.calls.map((c) => c.items)).to.deep.equal([100, 100, 50]);

    // The server takes 16 KiB bodies: 20 traces of 3 KiB (60 KiB) in one batch are refused and halved until they fit.
    const split = countingFetch();
    const big = client({ fetch: split.fetch, maxBatchBytes: 1024 * 1024 });
    const ids = Array.from({ length: 20 }, (_, i) => big.trace('m', `${i} ${'x'.repeat(3000)}`));
    await big.flush();
    expect(split.calls.filter((c) => c.status === 413).length).to.be.greaterThan(0);
    expect(big.stats).to.deep.include({ sent: 20, failed: 0 });
    await flushed(s);
    const stored = new Set((await listTraces(s.url, key)).map((t) => t.traceId));
    for (const id of ids) expect(stored.has(id)).to.equal(true);
  });

  it('one item larger than the server takes is reported (413) and the others are stored', async () => {
    const errors: TracegateError[] = [];
    const tg = client({ onError: (e) => errors.push(e) });
    const small = tg.trace('m', 'small');
    tg.trace('m', 'x'.repeat(20_000));
    await tg.flush();
    expect(errors.map((e) => [e.code, e.status, e.count])).to.deep.equal([['http', 413, 1]]);
    expect(tg.stats).to.deep.include({ sent: 1, failed: 1 });
    await flushed(s);
    expect((await listTraces(s.url, key)).map((t) => t.traceId)).to.deep.equal([small]);
  });

  it("items the server refuses (207) are reported with the server's reasons; the valid ones are stored", async () => {
    const errors: TracegateError[] = [];
    const tg = client({ onError: (e) => errors.push(e) });
    const ok = tg.trace({ model: 'm', prompt: 'fine' });
    tg.trace({ model: 'm', prompt: 'bad id', requestId: 'has spaces in it' });
    await tg.flush();
    expect(errors).to.have.length(1);
    expect(errors[0]).to.include({ code: 'rejected', status: 207, count: 1 });
    expect(JSON.stringify(errors[0]!.details)).to.contain('requestId');
    await flushed(s);
    expect((await listTraces(s.url, key)).map((t) => t.traceId)).to.deep.equal([ok]);
  });

  it("exportMode 'immediate' sends each trace as it comes, without waiting for flushAt or the interval", async () => {
    const counting = countingFetch();
    const tg = client({ fetch: counting.fetch, exportMode: 'immediate', flushIntervalMs: 60_000 });
    const id = tg.trace('m', 'right away');
    const deadline = Date.now() + 3000;
    while (tg.stats.sent < 1 && Date.now() < deadline) await sleep(10);
    expect(counting.calls.map((c) => c.items)).to.deep.equal([1]);
    await flushed(s);
    expect((await listTraces(s.url, key)).map((t) => t.traceId)).to.deep.equal([id]);
    // A burst while a request is out goes together in the next one.
    for (let i = 0; i < 5; i++) tg.trace('m', `burst ${i}`);
    await tg.flush();
    expect(tg.stats.sent).to.equal(6);
    expect(counting.calls.length).to.be.within(2, 6);
  });

  it('bad arguments and unusable options never throw: they are reported', () => {
    const errors: TracegateError[] = [];
    const tg = client({ onError: (e) => errors.push(e), flushAt: -1, timeoutMs: Number.NaN });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => tg.trace('m', 'p', cyclic)).to.not.throw();
    expect(() => (tg.trace as any)()).to.not.throw();
    expect(() => tg.feedback(undefined as any)).to.not.throw();
    expect(() => tg.toolCall(null as any)).to.not.throw();
    expect(() => tg.trace('m', 'p', { big: BigInt(1) } as any)).to.not.throw();
    expect(errors.map((e) => e.code)).to.deep.equal([
      'invalid_argument', // flushAt
      'invalid_argument', // timeoutMs
      'invalid_argument', // the cycle
      'invalid_argument', // feedback
      'invalid_argument', // toolCall
      'invalid_argument', // BigInt
    ]);
  });

  it('without a key the client is disabled: one report, nothing sent, calls still return ids', async () => {
    const errors: TracegateError[] = [];
    const saved = process.env.TRACEGATE_API_KEY;
    delete process.env.TRACEGATE_API_KEY;
    try {
      const tg = new Tracegate({ baseUrl: s.url, onError: (e) => errors.push(e) });
      expect(tg.enabled).to.equal(false);
      expect(tg.trace('m', 'p')).to.match(/^[0-9a-f]{32}$/);
      await tg.flush();
      await tg.shutdown();
      expect(errors.map((e) => e.code)).to.deep.equal(['disabled']);
    } finally {
      if (saved !== undefined) process.env.TRACEGATE_API_KEY = saved;
    }
  });

  it('the key and base URL default to TRACEGATE_API_KEY and TRACEGATE_BASE_URL', async () => {
    const saved = { key: process.env.TRACEGATE_API_KEY, url: process.env.TRACEGATE_BASE_URL };
    process.env.TRACEGATE_API_KEY = key;
    process.env.TRACEGATE_BASE_URL = `${s.url}/`;
    try {
      const tg = new Tracegate({ flushOnExit: false });
      clients.push(tg);
      expect(tg.baseUrl).to.equal(s.url);
      const id = tg.trace('m', 'from the environment');
      await tg.flush();
      await flushed(s);
      expect((await listTraces(s.url, key)).map((t) => t.traceId)).to.deep.equal([id]);
    } finally {
      for (const [k, v] of [
        ['TRACEGATE_API_KEY', saved.key],
        ['TRACEGATE_BASE_URL', saved.url],
      ] as const)
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
    }
  });
});
