// The SDK's pure parts: wire payloads, prompt rendering, Retry-After and backoff, answer classification, the queue.
import { expect } from 'chai';
import { feedbackPayload, fromSpecCall, toolCallPayload, tracePayload } from '../../../packages/sdk/src/payloads.ts';
import { BoundedQueue, type Item } from '../../../packages/sdk/src/queue.ts';
import { chatPrompt, promptText, responsesPrompt } from '../../../packages/sdk/src/render.ts';
import { newSpanId, newTraceId, utf8Length } from '../../../packages/sdk/src/runtime.ts';
import { batchBody, classify, retryAfterMs, retryDelayMs } from '../../../packages/sdk/src/transport.ts';

describe('sdk: trace payloads', () => {
  it('trace(model, input, metadata): a response and metrics in the metadata fill those fields, the rest stays metadata', () => {
    const t = fromSpecCall('gpt-4o-mini', 'Where is my order?', {
      response: 'It ships today.',
      metrics: { promptTokens: 12, latencyMs: 640 },
      userId: 'u-7',
    });
    const body = tracePayload({ ...t, requestId: 'r1' }, { environment: 'prod' });
    expect(body).to.deep.equal({
      requestId: 'r1',
      environment: 'prod',
      model: 'gpt-4o-mini',
      prompt: 'Where is my order?',
      response: 'It ships today.',
      metrics: { promptTokens: 12, latencyMs: 640 },
      parameters: { source: 'sdk' },
      metadata: { userId: 'u-7' },
    });
  });

  it('parameters.source is sdk unless the caller names another; attributes never override native fields', () => {
    const body = tracePayload(
      {
        requestId: 'r',
        parameters: { trainingPreferred: true },
        attributes: { requestId: 'x', 'gen_ai.response.id': 'resp_1' },
      },
      {},
    );
    expect(body).to.deep.equal({
      'gen_ai.response.id': 'resp_1',
      requestId: 'r',
      parameters: { source: 'sdk', trainingPreferred: true },
    });
    expect(tracePayload({ requestId: 'r', parameters: { source: 'coach' } }, {}).parameters).to.deep.equal({
      source: 'coach',
    });
  });

  it('a metadata without a response or metrics is kept whole; an empty remainder is left out', () => {
    expect(fromSpecCall('m', 'p', { a: 1 })).to.deep.equal({ model: 'm', prompt: 'p', metadata: { a: 1 } });
    expect(fromSpecCall('m', 'p', { response: { x: 1 } })).to.deep.equal({
      model: 'm',
      prompt: 'p',
      response: '{"x":1}',
    });
    expect(fromSpecCall(undefined, 'p', 'not a map')).to.deep.equal({ prompt: 'p' });
  });

  it('prompts render as the proxy renders them: one user message is its text, else role: text blocks', () => {
    expect(promptText('hi')).to.equal('hi');
    expect(promptText([{ role: 'user', content: 'hi' }])).to.equal('hi');
    expect(
      promptText([
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'image_url', image_url: { url: 'x' } },
          ],
        },
      ]),
    ).to.equal('system: Be brief.\n\nuser: a');
    expect(promptText({ q: 1 })).to.equal('{"q":1}');
    expect(responsesPrompt({ instructions: 'Be brief.', input: 'hi' })).to.equal('system: Be brief.\n\nuser: hi');
    expect(
      responsesPrompt({
        input: [
          { role: 'user', content: [{ type: 'input_text', text: 'weather?' }] },
          { type: 'function_call_output', call_id: 'c', output: '18C' },
        ],
      }),
    ).to.equal('user: weather?\n\ntool: 18C');
    expect(
      chatPrompt({
        messages: [
          { role: 'developer', content: 'x' },
          { role: 'user', content: 'y' },
        ],
      }),
    ).to.equal('developer: x\n\nuser: y');
  });
});

describe('sdk: feedback and tool-call payloads', () => {
  const ids = { newId: () => 'generated', nowMs: Date.UTC(2026, 0, 2, 3, 4, 5) };

  it('a vote without a user gets an id (a retry must not count it twice); with a user it gets none', () => {
    expect(feedbackPayload({ traceId: 't', value: 'up' }, ids)).to.deep.equal({
      id: 'generated',
      trace_id: 't',
      value: 'up',
      timestamp: '2026-01-02T03:04:05.000Z',
    });
    const withUser = feedbackPayload(
      {
        responseId: 'resp_1',
        value: -1,
        userId: 'u',
        name: 'helpful',
        comment: 'no',
        source: 'end_user',
        metadata: { v: 1 },
        timestamp: 0,
      },
      ids,
    );
    expect(withUser).to.deep.equal({
      response_id: 'resp_1',
      value: -1,
      name: 'helpful',
      comment: 'no',
      user_id: 'u',
      source: 'end_user',
      metadata: { v: 1 },
      timestamp: '1970-01-01T00:00:00.000Z',
    });
    expect(feedbackPayload({ spanId: 's', value: null, id: 'mine', userId: 'u' }, ids)).to.include({
      id: 'mine',
      value: null,
    });
  });

  it('a vote without a target or with a value outside the set is refused with the reason', () => {
    expect(feedbackPayload({ value: 'up' } as any, ids)).to.match(/needs a target/);
    expect(feedbackPayload({ traceId: 't', value: 'sideways' } as any, ids)).to.match(/"sideways"/);
    expect(feedbackPayload({ traceId: 't' } as any, ids)).to.match(/value must be/);
    expect(feedbackPayload({ traceId: 't', value: null }, ids)).to.match(/needs its id or userId/);
    expect(feedbackPayload({ traceId: 't', value: null, userId: 'u' }, ids)).to.not.have.property('id');
    for (const value of ['up', 'down', true, false, 1, 0, -1, null] as const)
      expect(feedbackPayload({ traceId: 't', value, userId: 'u' }, ids)).to.be.an('object');
  });

  it('a tool call gets a span id, and a trace id unless a traceparent or response id links it', () => {
    const gen = { newTraceId: () => 'T'.repeat(32), newSpanId: () => 'S'.repeat(16) };
    const out = toolCallPayload(
      {
        name: 'get_weather',
        id: 'call_1',
        arguments: { city: 'Paris' },
        error: new TypeError('boom'),
        startedAt: new Date(Date.UTC(2026, 0, 1)),
        durationMs: 12,
        userId: 'u',
      },
      gen,
    );
    expect(out).to.deep.equal({
      traceId: 'T'.repeat(32),
      spanId: 'S'.repeat(16),
      body: {
        name: 'get_weather',
        id: 'call_1',
        arguments: { city: 'Paris' },
        error: { type: 'TypeError', message: 'boom' },
        started_at: '2026-01-01T00:00:00.000Z',
        duration_ms: 12,
        trace_id: 'T'.repeat(32),
        span_id: 'S'.repeat(16),
        user_id: 'u',
      },
    });
    const linked = toolCallPayload({ name: 'x', responseId: 'resp_1' }, gen) as any;
    expect(linked.traceId).to.equal(undefined);
    expect(linked.body).to.not.have.property('trace_id');
    expect(toolCallPayload({ name: '' } as any, gen)).to.equal('a tool call needs a name');
  });

  it('ids have the W3C shapes', () => {
    expect(newTraceId()).to.match(/^[0-9a-f]{32}$/);
    expect(newSpanId()).to.match(/^[0-9a-f]{16}$/);
    expect(new Set(Array.from({ length: 1000 }, newTraceId)).size).to.equal(1000);
  });
});

describe('sdk: answers, Retry-After and backoff', () => {
  const extra = { route: '/api/traces', count: 3 };

  it('Retry-After as seconds or an HTTP date; unreadable is absent', () => {
    const now = Date.UTC(2026, 0, 1, 0, 0, 0);
    expect(retryAfterMs('7', now)).to.equal(7000);
    expect(retryAfterMs(' 1.5 ', now)).to.equal(1500);
    expect(retryAfterMs('Thu, 01 Jan 2026 00:00:09 GMT', now)).to.equal(9000);
    expect(retryAfterMs('Wed, 31 Dec 2025 23:00:00 GMT', now)).to.equal(0);
    expect(retryAfterMs('soon', now)).to.equal(undefined);
    expect(retryAfterMs(null, now)).to.equal(undefined);
  });

  it('the wait honours Retry-After (never earlier, at most 10 % later), capped; else exponential with jitter', () => {
    expect(retryDelayMs(0, 2000, 500, 30_000, () => 0)).to.equal(2000);
    expect(retryDelayMs(0, 2000, 500, 30_000, () => 1)).to.equal(2200);
    expect(retryDelayMs(0, 120_000, 500, 30_000, () => 0.5)).to.equal(30_000);
    expect(retryDelayMs(0, undefined, 500, 30_000, () => 0)).to.equal(250);
    expect(retryDelayMs(3, undefined, 500, 30_000, () => 1)).to.equal(4000);
    expect(retryDelayMs(20, undefined, 500, 30_000, () => 1)).to.equal(30_000);
  });

  it('what each answer means: sent, refused items, retry, split, give up', () => {
    expect(classify(200, '{"accepted":3,"rejected":0,"results":[]}', null, extra)).to.deep.equal({ kind: 'sent' });
    const partial = classify(
      207,
      '{"accepted":2,"rejected":1,"results":[{"index":1,"error":{"code":"validation_failed","message":"bad"}}]}',
      null,
      extra,
    );
    expect(partial.kind).to.equal('sent');
    expect((partial as any).rejected).to.include({ code: 'rejected', count: 1, status: 207 });
    for (const status of [408, 425, 429, 500, 502, 503, 504])
      expect(classify(status, '', '2', extra).kind).to.equal('retry');
    expect((classify(429, '', '2', extra) as any).retryAfterMs).to.equal(2000);
    expect(classify(413, '', null, extra).kind).to.equal('split');
    expect((classify(413, '', null, { ...extra, count: 1 }) as any).error.code).to.equal('http');
    const unauthorized = classify(401, '{"error":{"code":"unauthorized","message":"unknown key"}}', null, extra) as any;
    expect(unauthorized.kind).to.equal('fail');
    expect(unauthorized.error).to.include({ code: 'unauthorized', status: 401, count: 3 });
    expect(unauthorized.error.message).to.equal('/api/traces answered 401 (unauthorized: unknown key)');
    expect((classify(400, '{}', null, extra) as any).error.code).to.equal('rejected');
    expect((classify(404, 'not here', null, extra) as any).error.code).to.equal('http');
  });

  it('batch bodies: an array for traces, named lists for the signal routes', () => {
    expect(batchBody('traces', ['{"a":1}', '{"b":2}'])).to.equal('[{"a":1},{"b":2}]');
    expect(JSON.parse(batchBody('feedback', ['{"value":"up"}']))).to.deep.equal({ feedback: [{ value: 'up' }] });
    expect(JSON.parse(batchBody('toolCalls', ['{"name":"x"}']))).to.deep.equal({ tool_calls: [{ name: 'x' }] });
  });
});

describe('sdk: the bounded queue', () => {
  let seq = 0;
  const item = (lane: Item['lane'], bytes = 10): Item => ({ lane, seq: ++seq, json: '{}', bytes });

  it('past its bound it drops the oldest item of any lane', () => {
    const q = new BoundedQueue(3);
    const a = item('traces');
    const b = item('feedback');
    q.push(a);
    q.push(b);
    q.push(item('traces'));
    expect(q.push(item('toolCalls'))).to.equal(a);
    expect(q.push(item('traces'))).to.equal(b);
    expect(q.size).to.equal(3);
    expect(q.sizeOf('feedback')).to.equal(0);
  });

  it('takes batches by count and bytes, one oversized item alone', () => {
    const q = new BoundedQueue(100);
    for (let i = 0; i < 5; i++) q.push(item('traces', 40));
    expect(q.take('traces', 10, 100)).to.have.length(2);
    expect(q.take('traces', 1, 1000)).to.have.length(1);
    q.push(item('traces', 500));
    expect(q.take('traces', 10, 100)).to.have.length(2);
    expect(q.take('traces', 10, 100).map((i) => i.bytes)).to.deep.equal([500]);
    expect(q.size).to.equal(0);
  });

  it('counts UTF-8 bytes without encoding', () => {
    for (const s of ['', 'abc', 'é', '€', '😀', 'a😀é€\u0000'])
      expect(utf8Length(s)).to.equal(new TextEncoder().encode(s).length);
  });
});
