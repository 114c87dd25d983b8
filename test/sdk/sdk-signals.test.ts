// feedback() and toolCall(): the exact requests they send (to a local receiver), and what the real routes
// (POST /api/ingest/feedback, /api/ingest/tool-calls) make of them on a tracegate that has those routes. On a
// server without them the second part is skipped, saying so.
import { expect } from 'chai';
import OpenAI from 'openai';
import { Tracegate, type TracegateError } from '../../packages/sdk/src/index.ts';
import { type FakeResponses, startFakeResponses } from '../support/fake-responses.ts';
import { flushed, startTestServer, type TestServer } from '../support/server.ts';
import { accepted, type Receiver, readTrace, reply, startReceiver } from './support/receiver.ts';

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('sdk (TypeScript): feedback() and toolCall()', function () {
  this.timeout(60_000);

  describe('the requests they send', () => {
    let r: Receiver;
    let answers: Array<(res: any, req: any) => void>;
    let tg: Tracegate;
    let errors: TracegateError[];

    beforeEach(async () => {
      answers = [];
      r = await startReceiver((req, i, res) => (answers[i] ? answers[i]!(res, req) : reply(res, 200, accepted(req))));
      errors = [];
      tg = new Tracegate({
        apiKey: 'tg_key_1',
        baseUrl: r.url,
        flushOnExit: false,
        retryBaseDelayMs: 20,
        onError: (e) => errors.push(e),
      });
    });
    afterEach(async () => {
      await tg.shutdown(500);
      await r.close();
    });

    it('votes go to POST /api/ingest/feedback as {feedback:[…]} in snake_case, batched apart from traces', async () => {
      const traceId = tg.trace('m', 'p');
      tg.feedback({
        traceId,
        value: 'up',
        userId: 'u-1',
        name: 'helpful',
        comment: 'spot on',
        source: 'end_user',
        metadata: { page: 'chat' },
      });
      tg.feedback({ responseId: 'resp_1', value: false });
      tg.feedback({ spanId: 'abcdef0123456789', value: null, userId: 'u-1', timestamp: Date.UTC(2026, 0, 1) });
      tg.feedback({ requestId: 'req-9', value: -1, id: 'vote-7' });
      await tg.flush();
      expect(errors).to.deep.equal([]);
      const votes = r.requests.find((q) => q.path === '/api/ingest/feedback')!;
      expect(votes.method).to.equal('POST');
      expect(votes.headers).to.include({ authorization: 'Bearer tg_key_1', 'content-type': 'application/json' });
      expect(Object.keys(votes.body)).to.deep.equal(['feedback']);
      const [a, b, c, d] = votes.body.feedback;
      expect(a).to.deep.equal({
        trace_id: traceId,
        value: 'up',
        name: 'helpful',
        comment: 'spot on',
        user_id: 'u-1',
        source: 'end_user',
        metadata: { page: 'chat' },
        timestamp: a.timestamp,
      });
      expect(a.timestamp).to.match(ISO);
      expect(b).to.deep.equal({ id: b.id, response_id: 'resp_1', value: false, timestamp: b.timestamp });
      expect(b.id).to.match(HEX32); // no user: an id, so that a retry cannot count the vote twice
      expect(c).to.deep.equal({
        span_id: 'abcdef0123456789',
        value: null,
        user_id: 'u-1',
        timestamp: '2026-01-01T00:00:00.000Z',
      });
      expect(d).to.deep.include({ id: 'vote-7', request_id: 'req-9', value: -1 });
      expect(r.requests.map((q) => q.path).sort()).to.deep.equal(['/api/ingest/feedback', '/api/traces']);
    });

    it('tool calls go to POST /api/ingest/tool-calls as {tool_calls:[…]} with the ids they will be stored under', async () => {
      const traceId = tg.trace('m', 'p');
      const linked = tg.toolCall({
        traceId,
        name: 'get_weather',
        id: 'call_1',
        type: 'function',
        description: 'Current weather',
        arguments: { city: 'Paris' },
        result: { temp_c: 18 },
        status: 'ok',
        startedAt: new Date('2026-01-01T10:00:00.120Z'),
        endedAt: '2026-01-01T10:00:00.532Z',
        parentSpanId: '00f067aa0ba902b7',
        sessionId: 's-1',
        userId: 'u-1',
        metadata: { v: 2 },
      });
      const alone = tg.toolCall({
        name: 'search',
        arguments: '{"q":"x"}',
        error: new RangeError('too many results'),
        durationMs: 41,
      });
      const byResponse = tg.toolCall({ name: 'lookup', responseId: 'resp_2' });
      expect(linked).to.deep.equal({ traceId, spanId: linked.spanId });
      expect(linked.spanId).to.match(HEX16);
      expect(alone.traceId).to.match(HEX32);
      expect(byResponse.traceId).to.equal(undefined);
      await tg.flush();
      expect(errors).to.deep.equal([]);
      const calls = r.requests.find((q) => q.path === '/api/ingest/tool-calls')!;
      expect(Object.keys(calls.body)).to.deep.equal(['tool_calls']);
      expect(calls.body.tool_calls).to.deep.equal([
        {
          name: 'get_weather',
          id: 'call_1',
          type: 'function',
          description: 'Current weather',
          arguments: { city: 'Paris' },
          result: { temp_c: 18 },
          status: 'ok',
          started_at: '2026-01-01T10:00:00.120Z',
          ended_at: '2026-01-01T10:00:00.532Z',
          trace_id: traceId,
          parent_span_id: '00f067aa0ba902b7',
          span_id: linked.spanId,
          session_id: 's-1',
          user_id: 'u-1',
          metadata: { v: 2 },
        },
        {
          name: 'search',
          arguments: '{"q":"x"}',
          error: { type: 'RangeError', message: 'too many results' },
          duration_ms: 41,
          trace_id: alone.traceId,
          span_id: alone.spanId,
        },
        { name: 'lookup', span_id: byResponse.spanId, response_id: 'resp_2' },
      ]);
    });

    it('a retried batch is sent byte for byte again (same ids), so the server keeps one copy', async () => {
      answers[0] = (res) => reply(res, 503, {}, { 'retry-after': '0' });
      tg.feedback({ traceId: 't1', value: 'down' });
      tg.toolCall({ name: 'x' });
      await tg.flush();
      const byPath = (p: string) => r.requests.filter((q) => q.path === p).map((q) => q.raw);
      const votes = byPath('/api/ingest/feedback'); // the oldest lane goes first: it got the 503
      expect(votes).to.have.length(2);
      expect(votes[1]).to.equal(votes[0]);
      expect(byPath('/api/ingest/tool-calls')).to.have.length(1);
      expect(r.requests).to.have.length(3);
      expect(tg.stats).to.deep.include({ sent: 2, retries: 1, failed: 0 });
    });

    it('votes and calls that cannot be valid are reported at the call, not sent', async () => {
      tg.feedback({ value: 'up' } as any);
      tg.feedback({ traceId: 't', value: 'sideways' as any });
      tg.feedback({ traceId: 't', value: null });
      tg.toolCall({ arguments: {} } as any);
      await tg.flush();
      expect(r.requests).to.have.length(0);
      expect(errors.map((e) => [e.code, e.message])).to.deep.equal([
        ['invalid_argument', 'feedback needs a target: traceId, spanId, responseId or requestId'],
        [
          'invalid_argument',
          'feedback value must be up, down, true, false, 1, 0, -1 or null (to retract), not "sideways"',
        ],
        ['invalid_argument', 'null retracts a vote, which needs its id or userId to name it'],
        ['invalid_argument', 'a tool call needs a name'],
      ]);
    });

    it('a server without the routes (404) is reported, not retried', async () => {
      answers[0] = (res) => reply(res, 404, { error: { code: 'not_found', message: 'no route' } });
      tg.feedback({ traceId: 't', value: 'up' });
      await tg.flush();
      expect(errors.map((e) => [e.code, e.status, e.route])).to.deep.equal([['http', 404, '/api/ingest/feedback']]);
      expect(r.requests).to.have.length(1);
    });
  });

  describe('against the real routes', () => {
    let s: TestServer;
    let fake: FakeResponses;
    let key: string;
    let tg: Tracegate;
    let errors: TracegateError[];

    before(async function () {
      fake = await startFakeResponses();
      s = await startTestServer('duckdb', {
        TRACEGATE_PROVIDER_BASE_URL: fake.url,
        TRACEGATE_PROVIDER_API_KEY: 'sk-fake',
      });
      const probe = await Promise.all(
        ['/api/ingest/feedback', '/api/ingest/tool-calls'].map((p) => fetch(s.url + p, { method: 'OPTIONS' })),
      );
      if (probe.some((res) => res.status === 404)) {
        await s.close();
        await fake.close();
        console.log('      (this tracegate has no /api/ingest/feedback or /api/ingest/tool-calls yet: skipped)');
        this.skip();
      }
    });
    beforeEach(async () => {
      key = (await s.key()).key;
      errors = [];
      tg = new Tracegate({ apiKey: key, baseUrl: s.url, flushOnExit: false, onError: (e) => errors.push(e) });
    });
    afterEach(async () => {
      await tg.shutdown(1000);
      expect(errors).to.deep.equal([]);
    });
    after(async () => {
      await s?.close();
      await fake?.close();
    });

    it('votes on a trace from trace(): one standing vote per user, anonymous votes each count, null retracts', async () => {
      const traceId = tg.trace('gpt-4o-mini', 'Where is my order?', { response: 'It ships today.' });
      await tg.flush();
      tg.feedback({ traceId, value: 'up', userId: 'u-1' });
      tg.feedback({ traceId, value: 'up', userId: 'u-2' });
      tg.feedback({ traceId, value: 'up' });
      tg.feedback({ traceId, value: 'down', name: 'accurate', comment: 'wrong city' });
      await tg.flush();
      tg.feedback({ traceId, value: 'down', userId: 'u-1' }); // changed their mind
      tg.feedback({ traceId, value: null, userId: 'u-2' }); // took it back
      await tg.flush();
      await flushed(s);
      const t = await readTrace(s.url, key, traceId);
      expect(t.feedback).to.deep.equal({ user_feedback: { up: 1, down: 1 }, accurate: { up: 0, down: 1 } });
      expect(t.feedbackVotes.find((v: any) => v.name === 'accurate')).to.include({
        comment: 'wrong city',
        value: 'down',
      });
    });

    it('tool calls join the trace of a wrapped call (by trace id) and of a proxied one (by response id)', async () => {
      const direct = tg.wrapOpenAI(new OpenAI({ apiKey: 'sk', baseURL: fake.url, maxRetries: 0 }));
      const r1 = await direct.responses.create({
        model: 'gpt-4o-mini',
        input: 'Weather in Paris?',
        metadata: { fake: 'tool' },
      });
      const call = r1.output[0] as any;
      const t1 = tg.traceIdOf(r1)!;
      const placed = tg.toolCall({
        traceId: t1,
        id: call.call_id,
        name: call.name,
        arguments: call.arguments,
        result: { temp_c: 18 },
      });

      const proxied = tg.wrapOpenAI(new OpenAI({ apiKey: key, baseURL: `${s.url}/api/proxy/provider`, maxRetries: 0 }));
      const r2 = await proxied.responses.create({
        model: 'gpt-4o-mini',
        input: 'Weather in Rome?',
        metadata: { fake: 'tool' },
      });
      const byResponse = tg.toolCall({
        responseId: r2.id,
        name: 'get_weather',
        error: { type: 'timeout', message: 'upstream 504' },
      });
      tg.feedback({ responseId: r2.id, value: 'up', userId: 'u-9' });
      await tg.flush();
      await flushed(s);

      const first = await readTrace(s.url, key, t1);
      const tool = first.spans.find((x: any) => x.spanId === placed.spanId);
      expect(tool).to.include({ name: 'execute_tool get_weather', traceId: t1 });
      expect(tool.attributes['gen_ai.tool.call.id']).to.equal(call.call_id);

      const second = await readTrace(s.url, key, tg.traceIdOf(r2)!);
      const failed = second.spans.find((x: any) => x.spanId === byResponse.spanId);
      expect(failed).to.include({ name: 'execute_tool get_weather', status: 'error' });
      expect(second.feedback).to.deep.equal({ user_feedback: { up: 1, down: 0 } });
    });
  });
});
