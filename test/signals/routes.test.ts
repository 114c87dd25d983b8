// POST /api/ingest/tool-calls, /api/ingest/feedback and /api/ingest/webhooks, and what reads show of them, over real
// HTTP on both engines and the two-shard ClickHouse cluster: field aliases, linking (trace ids, a real proxied
// response through the fake provider), vote semantics, every webhook rejection, rotation, correlation, hostile
// bodies, workspace isolation on every read.
import { expect } from 'chai';
import { createHash, createHmac } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { type FakeResponses, startFakeResponses } from '../support/fake-responses.ts';
import { cli, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';
import { clusterTests, sharedCluster, uniqueDatabase } from '../support/shared.ts';

type Layout = 'duckdb' | 'clickhouse' | 'cluster';
const LAYOUTS: Layout[] = ['duckdb', 'clickhouse', ...(clusterTests ? (['cluster'] as const) : [])];

const TOOL_PAYLOAD_LIMIT = 2048;

async function start(layout: Layout, fake: FakeResponses): Promise<TestServer> {
  const extra: Record<string, string> = {
    TRACEGATE_PROVIDER_BASE_URL: fake.url,
    TRACEGATE_PROVIDER_API_KEY: 'sk-fake',
    TRACEGATE_MAX_TOOL_PAYLOAD_BYTES: String(TOOL_PAYLOAD_LIMIT),
    TRACEGATE_MAX_WEBHOOK_BODY_BYTES: String(64 * 1024),
    TRACEGATE_MAX_BATCH_ITEMS: '20',
    TRACEGATE_MAX_BODY_BYTES: String(1024 * 1024),
    TRACEGATE_MAX_STRING_BYTES: String(64 * 1024),
  };
  if (layout === 'cluster') {
    const c = await sharedCluster();
    Object.assign(extra, {
      TRACEGATE_CLICKHOUSE_URL: c.nodes[0]!.url,
      TRACEGATE_CLICKHOUSE_DATABASE: uniqueDatabase(),
      TRACEGATE_CLICKHOUSE_CLUSTER: c.name,
      TRACEGATE_CLICKHOUSE_NODES: c.nodes.map((n) => n.url).join(','),
    });
  }
  return startTestServer(layout === 'duckdb' ? 'duckdb' : 'clickhouse', extra);
}

const sign = (secret: string, ts: string, body: string) =>
  `v1=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`;
const now = () => String(Math.floor(Date.now() / 1000));

for (const layout of LAYOUTS) {
  describe(`signal routes: ${layout}`, function () {
    this.timeout(180_000);
    let fake: FakeResponses;
    let s: TestServer;
    let auth: Record<string, string>;
    let other: Record<string, string>;
    let workspace: string;

    before(async () => {
      fake = await startFakeResponses();
      s = await start(layout, fake);
      workspace = `sig-${layout}`;
      const created = await cli(s, ['keys', 'create', '--workspace', workspace, '--json']);
      auth = { authorization: `Bearer ${JSON.parse(created.stdout).key}` };
      other = { authorization: `Bearer ${(await s.key(`sig-other-${layout}`)).key}` };
    });
    after(async () => {
      await s?.close();
      await fake?.close();
    });

    const trace = async (id: string, headers = auth) => {
      await flushed(s);
      return get(`${s.url}/api/traces/${encodeURIComponent(id)}`, headers);
    };
    const proxied = async (input: string) => {
      const res = await fetch(`${s.url}/api/proxy/provider/responses`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o-mini', input }),
      });
      expect(res.status).to.equal(200);
      const body = (await res.json()) as { id: string };
      return { traceId: res.headers.get('x-trace-id')!, responseId: body.id };
    };

    describe('tool calls', () => {
      it('takes every field in snake_case and in camelCase alike', async () => {
        const common = {
          name: 'get_weather',
          type: 'function',
          description: 'Current weather',
          arguments: { city: 'Paris' },
          result: { temp_c: 18 },
          status: 'ok',
          metadata: { team: 'a' },
        };
        const snake = {
          ...common,
          id: 'call_alias_1',
          started_at: '2026-05-01T10:00:00.120Z',
          ended_at: '2026-05-01T10:00:00.532Z',
          trace_id: 'alias-snake',
          parent_span_id: 'p1',
          span_id: 'sp-snake',
          session_id: 'sess-1',
          user_id: 'user-1',
          response_id: 'resp_none',
        };
        const camel = {
          ...common,
          toolCallId: 'call_alias_1',
          startedAt: '2026-05-01T10:00:00.120Z',
          endedAt: '2026-05-01T10:00:00.532Z',
          traceId: 'alias-camel',
          parentSpanId: 'p1',
          spanId: 'sp-camel',
          sessionId: 'sess-1',
          userId: 'user-1',
          responseId: 'resp_none',
        };
        const a = await post(`${s.url}/api/ingest/tool-calls`, snake, auth);
        const b = await post(`${s.url}/api/ingest/tool-calls`, camel, auth);
        expect(a.status, a.text).to.equal(200);
        expect(b.status, b.text).to.equal(200);
        expect(a.json.toolCall).to.deep.equal({ traceId: 'alias-snake', spanId: 'sp-snake', status: 'completed' });
        expect(b.json.toolCall).to.deep.equal({ traceId: 'alias-camel', spanId: 'sp-camel', status: 'completed' });
        const [x, y] = [
          (await trace('alias-snake')).json.trace.spans[0],
          (await trace('alias-camel')).json.trace.spans[0],
        ];
        const strip = (sp: any) => {
          const { traceId: _t, spanId: _s, ingestedAtMs: _i, ...rest } = sp;
          return rest;
        };
        expect(strip(x)).to.deep.equal(strip(y));
        expect(x).to.deep.include({
          name: 'execute_tool get_weather',
          kind: 'tool',
          source: 'tool_call',
          parentSpanId: 'p1',
          status: 'completed',
          durationMs: 412,
          startTimeNs: '1777629600120000000',
        });
        expect(x.attributes).to.deep.include({
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': 'get_weather',
          'gen_ai.tool.call.id': 'call_alias_1',
          'gen_ai.tool.type': 'function',
          'gen_ai.tool.description': 'Current weather',
          'gen_ai.tool.call.arguments': '{"city":"Paris"}',
          'gen_ai.tool.call.result': '{"temp_c":18}',
          'session.id': 'sess-1',
          'user.id': 'user-1',
          metadata: { team: 'a' },
        });
        // The other id spellings, a traceparent, arguments as JSON text, a duration, a string error.
        const more = await post(
          `${s.url}/api/ingest/tool-calls`,
          {
            tool_calls: [
              { name: 'x', call_id: 'c-1', trace_id: 'alias-more', arguments: '{"q":1}', durationMs: 25 },
              {
                name: 'y',
                tool_call_id: 'c-2',
                traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
                error: 'boom',
              },
              {
                name: 'z',
                id: 'c-3',
                trace_id: 'alias-more',
                error: { type: 'timeout', message: 'upstream 504', data: { a: 1 } },
              },
            ],
          },
          auth,
        );
        expect(more.status, more.text).to.equal(200);
        const [m0, m1, m2] = more.json.results;
        expect(m1.traceId).to.equal('4bf92f3577b34da6a3ce929d0e0e4736');
        const tp = (await trace(m1.traceId)).json.trace.spans[0];
        expect(tp).to.deep.include({ parentSpanId: '00f067aa0ba902b7', status: 'error', statusMessage: 'boom' });
        expect(tp.attributes['gen_ai.tool.call.id']).to.equal('c-2');
        const spans = (await trace('alias-more')).json.trace.spans;
        const byId = Object.fromEntries(spans.map((sp: any) => [sp.spanId, sp]));
        expect(byId[m0.spanId].attributes['gen_ai.tool.call.arguments']).to.equal('{"q":1}');
        expect(byId[m0.spanId].durationMs).to.equal(25);
        expect(byId[m2.spanId]).to.deep.include({ status: 'error', statusMessage: 'upstream 504' });
        expect(byId[m2.spanId].attributes['error.type']).to.equal('timeout');
        // Two spellings of one field that disagree are refused, naming the second.
        const clash = await post(`${s.url}/api/ingest/tool-calls`, { name: 'q', trace_id: 'a', traceId: 'b' }, auth);
        expect(clash.status).to.equal(400);
        expect(clash.json.error.details[0].field).to.equal('traceId');
      });

      it('joins the trace named by its trace id, and collapses a redelivery', async () => {
        const native = await post(
          `${s.url}/api/traces`,
          { requestId: 'agent-run-1', model: 'gpt-4o', prompt: 'p', response: 'r' },
          auth,
        );
        expect(native.status).to.equal(200);
        const call = { name: 'search', id: 'call_search', trace_id: 'agent-run-1', arguments: { q: 'weather' } };
        const first = await post(`${s.url}/api/ingest/tool-calls`, call, auth);
        const again = await post(`${s.url}/api/ingest/tool-calls`, call, auth);
        expect(again.json).to.deep.equal(first.json);
        const t = (await trace('agent-run-1')).json.trace;
        expect(t.spans.map((x: any) => x.kind).sort()).to.deep.equal(['llm', 'tool']);
        expect(t.summary.spanCount).to.equal(2);
      });

      it('joins the trace of a response the proxy recorded, before and after it is flushed; else a trace of its own', async () => {
        const p = await proxied('What is the weather in Paris?');
        // At once: the proxied span may still be in the spool (the receiver asks again after the flush lag).
        const soon = await post(
          `${s.url}/api/ingest/tool-calls`,
          { name: 'get_weather', id: 'call_p1', response_id: p.responseId },
          auth,
        );
        expect(soon.status, soon.text).to.equal(200);
        expect(soon.json.toolCall.traceId).to.equal(p.traceId);
        await flushed(s);
        const later = await post(
          `${s.url}/api/ingest/tool-calls`,
          { name: 'get_time', id: 'call_p2', responseId: p.responseId },
          auth,
        );
        expect(later.json.toolCall.traceId).to.equal(p.traceId);
        const t = (await trace(p.traceId)).json.trace;
        expect(t.spans.map((x: any) => x.name).sort()).to.deep.equal([
          'execute_tool get_time',
          'execute_tool get_weather',
          'responses.create',
        ]);
        // Another workspace naming the same response id does not join that trace.
        const elsewhere = await post(
          `${s.url}/api/ingest/tool-calls`,
          { name: 'x', id: 'c', response_id: p.responseId },
          other,
        );
        expect(elsewhere.json.toolCall.traceId).to.not.equal(p.traceId);
        // Unknown response id: a trace of its own, the same one for a redelivery.
        const lone = { name: 'lonely', id: 'call_lone', response_id: 'resp_unknown' };
        const a = await post(`${s.url}/api/ingest/tool-calls`, lone, auth);
        const b = await post(`${s.url}/api/ingest/tool-calls`, lone, auth);
        expect(a.json.toolCall).to.deep.equal(b.json.toolCall);
        expect((await trace(a.json.toolCall.traceId)).json.trace.spans).to.have.length(1);
      });

      it('cuts arguments and results past the limit, keeping their SHA-256; governance scans them like prompts', async () => {
        const big = { text: `${'x'.repeat(3000)} contact jane.doe@example.com` };
        const r = await post(
          `${s.url}/api/ingest/tool-calls`,
          {
            name: 'fetch',
            id: 'call_big',
            trace_id: 'tool-big',
            arguments: { to: 'jane.doe@example.com' },
            result: big,
          },
          auth,
        );
        expect(r.status, r.text).to.equal(200);
        const span = (await trace('tool-big')).json.trace.spans[0];
        const a = span.attributes;
        expect(Buffer.byteLength(a['gen_ai.tool.call.result'])).to.be.at.most(TOOL_PAYLOAD_LIMIT);
        expect(a['tracegate.tool.result_truncated']).to.equal(true);
        expect(a['tracegate.tool.result_bytes']).to.equal(Buffer.byteLength(JSON.stringify(big)));
        expect(a['tracegate.tool.result_sha256']).to.equal(
          createHash('sha256').update(JSON.stringify(big)).digest('hex'),
        );
        expect(a['tracegate.tool.arguments_truncated']).to.equal(undefined);
        const findings = await get(`${s.url}/api/findings?traceId=tool-big`, auth);
        expect(findings.json.items.map((f: any) => f.field)).to.include('attribute:gen_ai.tool.call.arguments');
      });

      it('answers 400 naming the field, 207 for a partial batch, 413 past the batch limit', async () => {
        const one = await post(`${s.url}/api/ingest/tool-calls`, { arguments: {} }, auth);
        expect(one.status).to.equal(400);
        expect(one.json.error.code).to.equal('validation_failed');
        expect(one.json.error.details[0].field).to.equal('name');
        const tp = await post(`${s.url}/api/ingest/tool-calls`, { name: 'a', traceparent: 'nope' }, auth);
        expect(tp.json.error.details[0].field).to.equal('traceparent');
        const times = await post(
          `${s.url}/api/ingest/tool-calls`,
          { name: 'a', startedAt: '2026-01-01T00:00:01Z', endedAt: '2026-01-01T00:00:00Z' },
          auth,
        );
        expect(times.json.error.details[0].field).to.equal('endedAt'); // as the client spelled it
        const partial = await post(
          `${s.url}/api/ingest/tool-calls`,
          { toolCalls: [{ name: 'ok', trace_id: 'tool-partial' }, { name: 7 }] },
          auth,
        );
        expect(partial.status).to.equal(207);
        expect(partial.json).to.deep.include({ accepted: 1, rejected: 1 });
        expect(partial.json.results[1].error.details[0].field).to.equal('toolCalls.1.name');
        const none = await post(`${s.url}/api/ingest/tool-calls`, { tool_calls: [{}, { name: '' }] }, auth);
        expect(none.status).to.equal(400);
        const many = await post(
          `${s.url}/api/ingest/tool-calls`,
          { tool_calls: Array.from({ length: 21 }, () => ({ name: 'a' })) },
          auth,
        );
        expect(many.status).to.equal(413);
        const notList = await post(`${s.url}/api/ingest/tool-calls`, { tool_calls: { name: 'a' } }, auth);
        expect(notList.status).to.equal(400);
        expect((await post(`${s.url}/api/ingest/tool-calls`, { name: 'a' })).status).to.equal(401);
      });
    });

    describe('feedback', () => {
      const vote = (body: unknown, headers = auth) => post(`${s.url}/api/ingest/feedback`, body, headers);
      const votesOf = async (traceId: string, headers = auth) => (await trace(traceId, headers)).json.trace;

      it('takes every value form and field spelling; reads show a summary per name and the votes', async () => {
        expect(
          (await post(`${s.url}/api/traces`, { requestId: 'fb-forms', model: 'm', prompt: 'p', response: 'r' }, auth))
            .status,
        ).to.equal(200);
        const forms: Array<[unknown, 'up' | 'down']> = [
          ['up', 'up'],
          ['DOWN', 'down'],
          [true, 'up'],
          [false, 'down'],
          [1, 'up'],
          [0, 'down'],
          [-1, 'down'],
          ['true', 'up'],
          ['-1', 'down'],
        ];
        const r = await vote({
          feedback: forms.map(([value], i) => ({ traceId: 'fb-forms', value, userId: `u${i}`, comment: `c${i}` })),
        });
        expect(r.status, r.text).to.equal(200);
        expect(r.json.accepted).to.equal(forms.length);
        const t = await votesOf('fb-forms');
        expect(t.feedback).to.deep.equal({ user_feedback: { up: 4, down: 5 } });
        const byUser = Object.fromEntries(t.feedbackVotes.map((v: any) => [v.userId, v.value]));
        for (const [i, [, want]] of forms.entries()) expect(byUser[`u${i}`]).to.equal(want);
        // snake_case and camelCase, other names, metadata, timestamp, source, span target.
        const named = await vote({
          trace_id: 'fb-forms',
          span_id: 'span-x',
          value: 'up',
          name: 'helpful',
          user_id: 'ann',
          source: 'annotator',
          metadata: { app: '1.4' },
          timestamp: '2026-02-03T04:05:06Z',
        });
        expect(named.json.feedback).to.include({ traceId: 'fb-forms', status: 'recorded' });
        const again = await votesOf('fb-forms');
        expect(again.feedback.helpful).to.deep.equal({ up: 1, down: 0 });
        const v = again.feedbackVotes.find((x: any) => x.name === 'helpful');
        expect(v).to.deep.include({
          source: 'annotator',
          votedAtMs: Date.parse('2026-02-03T04:05:06Z'),
          userId: 'ann',
        });
        expect(v.metadata).to.deep.equal({ app: '1.4' });
        expect(v.target).to.deep.equal({ type: 'span', id: 'span-x' });
      });

      it('changes and retracts a vote: by user (latest wins), by id (upsert); anonymous votes each count', async () => {
        await post(`${s.url}/api/traces`, { requestId: 'fb-change', model: 'm', prompt: 'p', response: 'r' }, auth);
        await vote({ trace_id: 'fb-change', value: 'up', user_id: 'u1' });
        await vote({ trace_id: 'fb-change', value: 'down', user_id: 'u1' });
        expect((await votesOf('fb-change')).feedback).to.deep.equal({ user_feedback: { up: 0, down: 1 } });
        const retract = await vote({ trace_id: 'fb-change', value: null, user_id: 'u1' });
        expect(retract.json.feedback.status).to.equal('retracted');
        expect((await votesOf('fb-change')).feedback).to.deep.equal({});
        // By id: the same id replaces, whatever else changes; null retracts it (no target needed).
        await vote({ id: 'fb-1', trace_id: 'fb-change', value: 'up' });
        await vote({ id: 'fb-1', trace_id: 'fb-change', value: 'down', comment: 'changed my mind' });
        let t = await votesOf('fb-change');
        expect(t.feedbackVotes).to.have.length(1);
        expect(t.feedbackVotes[0]).to.deep.include({ id: 'fb-1', value: 'down', comment: 'changed my mind' });
        await vote({ id: 'fb-1', value: null });
        expect((await votesOf('fb-change')).feedbackVotes).to.deep.equal([]);
        // Without a user or id each vote counts; the very same vote delivered twice counts once.
        await vote({ trace_id: 'fb-change', value: 'up', comment: 'a' });
        await vote({ trace_id: 'fb-change', value: 'up', comment: 'b' });
        await vote({ trace_id: 'fb-change', value: 'up', comment: 'b' });
        t = await votesOf('fb-change');
        expect(t.feedback).to.deep.equal({ user_feedback: { up: 2, down: 0 } });
      });

      it('links a vote that arrives before its trace: by trace id, and by the response id of a proxied call', async () => {
        const early = await vote({ trace_id: 'fb-early', value: 'down', user_id: 'u9' });
        expect(early.status).to.equal(200);
        expect((await trace('fb-early')).status).to.equal(404); // no trace yet
        await post(`${s.url}/api/traces`, { requestId: 'fb-early', model: 'm', prompt: 'p', response: 'r' }, auth);
        expect((await votesOf('fb-early')).feedback).to.deep.equal({ user_feedback: { up: 0, down: 1 } });
        // The frontend knows only the response id; its vote is stored before the proxied call is flushed.
        const p = await proxied('Summarise this.');
        const byResponse = await vote({ responseId: p.responseId, value: 'up', userId: 'u10' });
        expect(byResponse.json.feedback.traceId).to.equal(null);
        const t = await votesOf(p.traceId);
        expect(t.feedback).to.deep.equal({ user_feedback: { up: 1, down: 0 } });
        expect(t.feedbackVotes[0].target).to.deep.equal({ type: 'response', id: p.responseId });
        // The trace list filters by feedback, resolving that link too.
        const ups = (await get(`${s.url}/api/traces?feedback=up&limit=1000`, auth)).json.items.map(
          (x: any) => x.traceId,
        );
        const downs = (await get(`${s.url}/api/traces?feedback=down&limit=1000`, auth)).json.items.map(
          (x: any) => x.traceId,
        );
        expect(ups).to.include(p.traceId);
        expect(ups).to.not.include('fb-early');
        expect(downs).to.include('fb-early');
        expect((await get(`${s.url}/api/traces?feedback=sideways`, auth)).status).to.equal(400);
      });

      it('counts votes in usage analytics', async () => {
        await post(
          `${s.url}/api/traces`,
          { requestId: 'fb-usage', model: 'model-fb-usage', prompt: 'p', response: 'r' },
          auth,
        );
        await vote({
          feedback: [1, 2, 3].map((i) => ({ trace_id: 'fb-usage', value: i === 3 ? 'down' : 'up', user_id: `x${i}` })),
        });
        await flushed(s);
        const rows = (await get(`${s.url}/api/analytics/usage?groupBy=model&bucket=day`, auth)).json.rows;
        const row = rows.find((x: any) => x.key === 'model-fb-usage');
        expect(row).to.include({ requests: 1, feedbackUp: 2, feedbackDown: 1 });
      });

      it('answers 400 naming the field for a bad value, no target, or a retraction naming no vote', async () => {
        const bad = await vote({ trace_id: 't', value: 'sideways' });
        expect(bad.status).to.equal(400);
        expect(bad.json.error.details[0].field).to.equal('value');
        expect(bad.json.error.message).to.match(/up, down/);
        const noTarget = await vote({ value: 'up' });
        expect(noTarget.status).to.equal(400);
        expect(noTarget.json.error.details[0].field).to.equal('trace_id');
        const noValue = await vote({ trace_id: 't' });
        expect(noValue.json.error.details[0].field).to.equal('value');
        const anonymousRetract = await vote({ trace_id: 't', value: null });
        expect(anonymousRetract.json.error.details[0].field).to.equal('value');
        const badTime = await vote({ trace_id: 't', value: 'up', timestamp: 'yesterday' });
        expect(badTime.json.error.details[0].field).to.equal('timestamp');
        const partial = await vote({
          feedback: [
            { trace_id: 't', value: 'up' },
            { traceId: 't', value: 2 },
          ],
        });
        expect(partial.status).to.equal(207);
        expect(partial.json.results[1].error.details[0].field).to.equal('feedback.1.value');
      });
    });

    describe('security-alert webhooks', () => {
      const send = (body: string, headers: Record<string, string> = {}, key = auth) =>
        post(`${s.url}/api/ingest/webhooks`, body, { ...key, ...headers });
      const signed = (secret: string, body: string, ts = now()) => ({
        'x-service-delivery-timestamp': ts,
        'x-service-signature': sign(secret, ts, body),
      });
      let secret: string;
      let secretId: string;

      it('accepts an unsigned delivery, and a signed one as unverified while the workspace has no secret', async () => {
        const body = JSON.stringify({ source: 'lakera', severity: 'low', title: 'unsigned one', n: 1 });
        const a = await send(body);
        expect(a.status, a.text).to.equal(200);
        expect(a.json.alert).to.include({ signature: 'unsigned', severity: 'low' });
        const b = await send(JSON.stringify({ title: 'signed, no secret' }), signed('whsec_unknown', '{}'));
        expect(b.status, b.text).to.equal(200);
        expect(b.json.alert.signature).to.equal('unverified');
      });

      it('verifies signed deliveries once the workspace has a secret: every rejection path', async () => {
        const out = await cli(s, ['webhooks', 'secret', 'add', '--workspace', workspace, '--json']);
        expect(out.code, out.stderr).to.equal(0);
        ({ secret, secretId } = JSON.parse(out.stdout));
        expect(secret).to.match(/^whsec_/);
        const body = JSON.stringify({ source: 'promptfoo', severity: 'critical', title: 'jailbreak', id: 'pf-1' });
        const ok = await send(body, signed(secret, body));
        expect(ok.status, ok.text).to.equal(200);
        expect(ok.json.alert).to.include({ signature: 'verified', secretId, severity: 'critical' });
        const headers = signed(secret, body);
        // The very same delivery again: 409, and nothing stored twice.
        const delivery = JSON.stringify({ title: 'replayed', at: Date.now() });
        const h = signed(secret, delivery);
        expect((await send(delivery, h)).status).to.equal(200);
        const again = await send(delivery, h);
        expect(again.status).to.equal(409);
        expect(again.json.error.code).to.equal('replayed_delivery');
        await flushed(s);
        const listed = (await get(`${s.url}/api/security-alerts?limit=200`, auth)).json.items;
        expect(listed.filter((x: any) => x.title === 'replayed')).to.have.length(1);
        // A wrong signature, a tampered body, another secret: 401 invalid_signature.
        const bad = await send(body, {
          ...headers,
          'x-service-signature': sign('whsec_wrong', headers['x-service-delivery-timestamp'], body),
        });
        expect(bad.status).to.equal(401);
        expect(bad.json.error.code).to.equal('invalid_signature');
        const tampered = await send(body.replace('critical', 'low'), headers);
        expect(tampered.json.error.code).to.equal('invalid_signature');
        // Timestamp more than 300 s away, either way: 401 stale_delivery.
        for (const skew of [-301, 301]) {
          const ts = String(Math.floor(Date.now() / 1000) + skew);
          const stale = await send(body, signed(secret, body, ts));
          expect(stale.status, `skew ${skew}`).to.equal(401);
          expect(stale.json.error.code).to.equal('stale_delivery');
        }
        // Malformed headers: 400.
        const malformed: Array<Record<string, string>> = [
          { 'x-service-delivery-timestamp': now() },
          { 'x-service-signature': sign(secret, now(), body) },
          { 'x-service-delivery-timestamp': 'yesterday', 'x-service-signature': sign(secret, now(), body) },
          { 'x-service-delivery-timestamp': now(), 'x-service-signature': 'v1=zz' },
          { 'x-service-delivery-timestamp': now(), 'x-service-signature': `v0=${'a'.repeat(64)}` },
          { 'x-service-delivery-timestamp': now(), 'x-service-signature': 'garbage' },
        ];
        for (const m of malformed) {
          const r = await send(body, m);
          expect(r.status, JSON.stringify(m)).to.equal(400);
          expect(r.json.error.code).to.equal('malformed_signature');
        }
        // Several v1 values: one matching is enough.
        const ts = now();
        const body2 = JSON.stringify({ title: 'two signatures', n: Math.random() });
        const two = await send(body2, {
          'x-service-delivery-timestamp': ts,
          'x-service-signature': `v1=${'0'.repeat(64)}, ${sign(secret, ts, body2)}`,
        });
        expect(two.status, two.text).to.equal(200);
        // The signature is over the raw bytes: a gzipped body is verified as decompressed.
        const body3 = JSON.stringify({ title: 'gzipped', n: Math.random() });
        const zipped = await fetch(`${s.url}/api/ingest/webhooks`, {
          method: 'POST',
          headers: {
            ...auth,
            'content-type': 'application/json',
            'content-encoding': 'gzip',
            ...signed(secret, body3),
          },
          body: gzipSync(body3),
        });
        expect(zipped.status).to.equal(200);
      });

      it('rotates secrets: both verify until the old one is revoked', async () => {
        const out = await cli(s, ['webhooks', 'secret', 'add', '--workspace', workspace, '--json']);
        const fresh = JSON.parse(out.stdout) as { secretId: string; secret: string };
        const listed = await cli(s, ['webhooks', 'secret', 'list', '--workspace', workspace, '--json']);
        const ids = (JSON.parse(listed.stdout) as Array<{ secretId: string; revokedAtMs: number }>).map(
          (x) => x.secretId,
        );
        expect(ids).to.include.members([secretId, fresh.secretId]);
        expect(listed.stdout).to.not.include(secret);
        const body = (n: string) => JSON.stringify({ title: `rotation ${n}`, r: Math.random() });
        const b1 = body('old');
        const b2 = body('new');
        expect((await send(b1, signed(secret, b1))).json.alert.secretId).to.equal(secretId);
        expect((await send(b2, signed(fresh.secret, b2))).json.alert.secretId).to.equal(fresh.secretId);
        const revoked = await cli(s, ['webhooks', 'secret', 'revoke', secretId]);
        expect(revoked.code, revoked.stderr).to.equal(0);
        const b3 = body('old after revoke');
        expect((await send(b3, signed(secret, b3))).status).to.equal(401);
        const b4 = body('new after revoke');
        expect((await send(b4, signed(fresh.secret, b4))).status).to.equal(200);
        expect((await cli(s, ['webhooks', 'secret', 'revoke', 'whs_0000000000000000'])).code).to.equal(1);
        secret = fresh.secret;
        secretId = fresh.secretId;
      });

      it('correlates an alert with traces by traceparent, trace id, span id, request id and proxied response id', async () => {
        await post(`${s.url}/api/traces`, { requestId: 'wh-req-1', model: 'm', prompt: 'p', response: 'r' }, auth);
        const p = await proxied('Hello there');
        await flushed(s); // the proxied call stored: the alert naming its response id is resolved on arrival
        const tp = '00-aaaabbbbccccddddeeeeffff00001111-1234567890abcdef-01';
        const cases: Array<[string, Record<string, unknown>, Record<string, string>]> = [
          ['header traceparent', { title: 'c1', severity: 'high' }, { traceparent: tp }],
          ['body trace id', { title: 'c2', alert: { metadata: { trace_id: 'wh-req-1' } } }, {}],
          ['request id', { title: 'c3', request_uuid: 'wh-req-1' }, {}],
          ['response id', { title: 'c4', 'gen_ai.response.id': p.responseId }, {}],
          ['span id before its trace', { title: 'c5', span_id: 'wh-span-late' }, {}],
        ];
        const ids: Record<string, string> = {};
        for (const [what, body, headers] of cases) {
          const r = await send(JSON.stringify(body), headers);
          expect(r.status, `${what}: ${r.text}`).to.equal(200);
          ids[what] = r.json.alert.id;
        }
        await post(
          `${s.url}/api/ingest/tool-calls`,
          { name: 'late', span_id: 'wh-span-late', trace_id: 'wh-late-trace' },
          auth,
        );
        const alertsOn = async (t: string) =>
          ((await trace(t)).json.trace.securityAlerts as Array<{ id: string }>).map((a) => a.id);
        expect((await trace('aaaabbbbccccddddeeeeffff00001111')).status).to.equal(404);
        expect(await alertsOn('wh-req-1')).to.have.members([ids['body trace id'], ids['request id']]);
        expect(await alertsOn(p.traceId)).to.deep.equal([ids['response id']]);
        expect(await alertsOn('wh-late-trace')).to.deep.equal([ids['span id before its trace']]);
        // The listing: correlation keys, the body as sent, filters, and the traceId filter.
        const all = (await get(`${s.url}/api/security-alerts?limit=200`, auth)).json.items;
        const c1 = all.find((x: any) => x.id === ids['header traceparent']);
        expect(c1).to.deep.include({
          traceId: 'aaaabbbbccccddddeeeeffff00001111',
          spanId: '1234567890abcdef',
          severity: 'high',
        });
        expect(c1.correlation.trace_id[0]).to.deep.equal({
          from: 'header:traceparent',
          value: 'aaaabbbbccccddddeeeeffff00001111',
        });
        expect(c1.body).to.deep.equal({ title: 'c1', severity: 'high' });
        const c4 = all.find((x: any) => x.id === ids['response id']);
        expect(c4.traceId).to.equal(p.traceId); // resolved through the proxy's index at arrival
        const byTrace = (await get(`${s.url}/api/security-alerts?traceId=wh-req-1`, auth)).json.items;
        expect(byTrace.map((x: any) => x.id)).to.deep.equal([ids['body trace id']]);
        const verified = (await get(`${s.url}/api/security-alerts?signature=verified&limit=200`, auth)).json.items;
        expect(verified.length).to.be.greaterThan(0);
        expect(verified.every((x: any) => x.signature === 'verified')).to.equal(true);
        // Cursor pages, newest first, each alert once.
        const seen: string[] = [];
        let cursor: string | null = null;
        do {
          const page: any = (
            await get(
              `${s.url}/api/security-alerts?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
              auth,
            )
          ).json;
          seen.push(...page.items.map((x: any) => x.id));
          cursor = page.nextCursor;
        } while (cursor);
        expect(seen).to.deep.equal(all.map((x: any) => x.id));
      });

      it('raises an alert signal for a security_alert rule', async () => {
        const ws = JSON.parse((await cli(s, ['keys', 'create', '--workspace', `sig-rule-${layout}`, '--json'])).stdout);
        const key = { authorization: `Bearer ${ws.key}` };
        await s.running.settings.update(ws.workspaceId, (doc) => ({
          ...doc,
          alertRules: [
            { id: 'sec', kind: 'security_alert', severity: 'high', threshold: 0, windowSeconds: 300, minRequests: 1 },
          ],
        }));
        const low = await send(JSON.stringify({ severity: 'low', title: 'meh' }), {}, key);
        const crit = await send(
          JSON.stringify({ severity: 'critical', title: 'exfiltration', trace_id: 'sec-t' }),
          {},
          key,
        );
        expect([low.status, crit.status]).to.deep.equal([200, 200]);
        await flushed(s);
        const alerts = (await get(`${s.url}/api/alerts?kind=security_alert`, key)).json.items;
        expect(alerts).to.have.length(1);
        expect(alerts[0]).to.include({ ruleId: 'sec', traceId: 'sec-t' });
        expect(alerts[0].message).to.match(/critical security alert .*exfiltration/);
      });

      it('refuses hostile bodies: too large, too deep, not JSON, not an object, not JSON by content type', async () => {
        const huge = JSON.stringify({ title: 'big', pad: 'x'.repeat(70 * 1024) });
        expect((await send(huge)).status).to.equal(413);
        const deep = `${'{"a":'.repeat(200)}1${'}'.repeat(200)}`;
        const d = await send(deep);
        expect(d.status).to.equal(400);
        expect(d.json.error.code).to.equal('too_deep');
        const notJson = await send('{"title": "oops",');
        expect(notJson.status).to.equal(400);
        expect(notJson.json.error.code).to.equal('invalid_json');
        expect((await send('[1,2,3]')).json.error.code).to.equal('invalid_body');
        expect((await send('"text"')).status).to.equal(400);
        const text = await fetch(`${s.url}/api/ingest/webhooks`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'text/plain' },
          body: 'hi',
        });
        expect(text.status).to.equal(415);
        // A signed hostile body is refused after its signature checks out, and nothing is claimed for it.
        const broken = '{"nope":';
        const h = signed(secret, broken);
        expect((await send(broken, h)).status).to.equal(400);
        expect((await send(broken, h)).status).to.equal(400);
        // The server still answers.
        expect((await get(`${s.url}/healthz`)).status).to.equal(200);
      });
    });

    describe('hostile bodies on the tool-call and feedback routes', () => {
      it('refuses what is too large, too deep or not JSON, and keeps answering', async () => {
        for (const path of ['/api/ingest/tool-calls', '/api/ingest/feedback']) {
          const huge = JSON.stringify({ name: 'x', trace_id: 't', value: 'up', comment: 'y'.repeat(1100 * 1024) });
          expect((await post(`${s.url}${path}`, huge, auth)).status, path).to.equal(413);
          const deep = `{"name":"x","trace_id":"t","value":"up","metadata":${'{"a":'.repeat(100)}1${'}'.repeat(100)}}`;
          const d = await post(`${s.url}${path}`, deep, auth);
          expect([d.status, d.json.error.code], path).to.deep.equal([400, 'too_deep']);
          const broken = await post(`${s.url}${path}`, '{"name": "x",', auth);
          expect([broken.status, broken.json.error.code], path).to.deep.equal([400, 'invalid_json']);
          const proto = await post(
            `${s.url}${path}`,
            '{"name":"x","trace_id":"t","value":"up","__proto__":{"a":1}}',
            auth,
          );
          expect(proto.status, path).to.equal(400);
          const text = await fetch(`${s.url}${path}`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'text/plain' },
            body: 'x',
          });
          expect(text.status, path).to.equal(415);
          expect((await post(`${s.url}${path}`, 'null', auth)).status, path).to.equal(400);
          expect((await post(`${s.url}${path}`, '"a string"', auth)).status, path).to.equal(400);
        }
        // Within the body limit but past the string limit: 400 naming the field.
        const long = await post(
          `${s.url}/api/ingest/feedback`,
          { trace_id: 't', value: 'up', comment: 'z'.repeat(70 * 1024) },
          auth,
        );
        expect([long.status, long.json.error.details[0].field]).to.deep.equal([400, 'comment']);
        const desc = await post(
          `${s.url}/api/ingest/tool-calls`,
          { name: 'x', description: 'z'.repeat(70 * 1024) },
          auth,
        );
        expect([desc.status, desc.json.error.details[0].field]).to.deep.equal([400, 'description']);
        expect((await get(`${s.url}/healthz`)).status).to.equal(200);
      });
    });

    describe('workspace isolation', () => {
      it('keeps every read to the caller workspace', async () => {
        // Another workspace sees none of this one's traces, votes or alerts.
        expect((await trace('fb-forms', other)).status).to.equal(404);
        expect((await get(`${s.url}/api/security-alerts`, other)).json.items).to.deep.equal([]);
        expect((await get(`${s.url}/api/traces?feedback=up`, other)).json.items).to.deep.equal([]);
        const rows = (await get(`${s.url}/api/analytics/usage?groupBy=model&bucket=day`, other)).json.rows;
        expect(rows.every((r: any) => r.feedbackUp === 0 && r.feedbackDown === 0)).to.equal(true);
        // Its votes on this workspace's trace id do not show here, nor this one's there.
        await post(`${s.url}/api/ingest/feedback`, { trace_id: 'fb-forms', value: 'down', user_id: 'intruder' }, other);
        const mine = (await trace('fb-forms')).json.trace;
        expect(mine.feedbackVotes.map((v: any) => v.userId)).to.not.include('intruder');
        // Its alerts naming this workspace's trace do not show here; its deliveries signed with this workspace's
        // secret are not verified (it has no secret of its own).
        const body = JSON.stringify({ title: 'cross', trace_id: 'wh-req-1' });
        const ts = now();
        const cross = await post(`${s.url}/api/ingest/webhooks`, body, {
          ...other,
          'x-service-delivery-timestamp': ts,
          'x-service-signature': sign('whsec_x', ts, body),
        });
        expect(cross.json.alert.signature).to.equal('unverified');
        const alerts = (await trace('wh-req-1')).json.trace.securityAlerts.map((a: any) => a.title);
        expect(alerts).to.not.include('cross');
      });
    });
  });
}
