// POST /api/integrations/provider-agents over real HTTP on both engines: the Python exporter's payload (fixtures built
// from openai-agents-python's source), arrival in any order and in parts, replays, every malformed shape, auth,
// workspace isolation, size limits, and back-pressure with the real JS exporter retrying.
import { expect } from 'chai';
import { BatchTraceProcessor, OpenAITracingExporter, setTraceProcessors, setTracingDisabled } from '@openai/agents';
import { pythonHeaders, pythonJson, pythonRun, pySpanId, pyTime } from '../fixtures/agents/python-export.ts';
import { flushed, get, post, startTestServer, type Backend, type TestServer } from '../support/server.ts';

const ROUTE = '/api/integrations/provider-agents';

async function traceRead(s: TestServer, auth: Record<string, string>, traceId: string) {
  await flushed(s);
  return get(`${s.url}/api/traces/${traceId}`, auth);
}

/** As httpx posts it: the exporter's headers, Python's JSON. */
async function postPython(s: TestServer, key: string, items: unknown[]) {
  const res = await fetch(`${s.url}${ROUTE}`, {
    method: 'POST',
    headers: pythonHeaders(key),
    body: pythonJson({ data: items }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: text ? JSON.parse(text) : null };
}

/** The count of answers the route gave with this status (tracegate_http_requests_total). */
async function answered(s: TestServer, status: number): Promise<number> {
  const text = (await get(`${s.url}/metrics`)).text;
  const line = text
    .split('\n')
    .find((l) => l.includes(`route="${ROUTE}"`) && l.includes(`status="${status}"`) && l.includes('method="POST"'));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

for (const backend of ['duckdb', 'clickhouse'] as Backend[]) {
  describe(`agents route: ${ROUTE} (${backend})`, function () {
    let s: TestServer;
    let key: string;
    let workspaceId: string;
    let auth: Record<string, string>;
    before(async () => {
      s = await startTestServer(backend);
      ({ key, workspaceId } = await s.key());
      auth = { authorization: `Bearer ${key}` };
    });
    after(() => s?.close());

    describe('the Python exporter (BackendSpanExporter to a custom endpoint)', () => {
      const run = pythonRun('py-main');
      let trace: any;
      const span = (name: string) => trace.spans.find((x: any) => x.spanId === run.ids[name]);
      before(async () => {
        const res = await postPython(s, key, [run.trace, ...run.spans]);
        expect(res.status, res.text).to.equal(200);
        expect(res.json).to.deep.equal({ accepted: 17, rejected: 0 });
        const read = await traceRead(s, auth, run.traceId);
        expect(read.status, read.text).to.equal(200);
        trace = read.json.trace;
      });

      it('keeps the ids, the tree, the workflow, the session, the metadata and the OpenAI headers', () => {
        expect(trace.traceId).to.equal(run.traceId);
        expect(trace.spans).to.have.length(16);
        expect(trace.summary.name).to.equal('Support bot');
        expect(trace.session).to.equal(run.trace.group_id);
        expect(trace.metadata).to.deep.equal({ customer: 'Zoë Müller', channel: 'chat ☕', tier: 'gold' });
        expect(trace.workflow).to.include({
          name: 'Support bot',
          organization: 'org-9xQmR2acme',
          project: 'proj_support_bot',
          source: 'agents',
        });
        expect(trace.tree).to.have.length(1);
        expect(trace.tree[0].spanId).to.equal(run.ids.task);
        for (const x of trace.spans) {
          expect(x.source).to.equal('agents');
          expect(x.resourceAttributes).to.include({
            'openai.organization': 'org-9xQmR2acme',
            'openai.project': 'proj_support_bot',
            'openai.beta': 'traces=v1',
          });
        }
        expect(span('agent').attributes['agents.span.metadata']).to.deep.equal({ agent_harness_id: 'harness-7' });
      });

      it('reads +00:00 times to the microsecond', () => {
        const r = span('response');
        expect(r.startTimeNs).to.equal(String(BigInt(Date.parse('2026-03-01T10:00:00.010Z')) * 1_000_000n + 123_000n));
        expect(r.durationMs).to.equal(890);
      });

      it('maps the full usage Python sends on response spans (a model call of its own: no proxy recorded it)', () => {
        const r = span('response');
        expect(r).to.include({ kind: 'llm', name: 'response', requestId: 'resp_py_0001' });
        expect(r).to.include({ promptTokens: 812, completionTokens: 64, totalTokens: 876 });
        expect(r.attributes).to.include({
          'gen_ai.response.id': 'resp_py_0001',
          'gen_ai.usage.cache_read.input_tokens': 512,
          'gen_ai.usage.reasoning.output_tokens': 16,
          'gen_ai.usage.requests': 1,
        });
        expect(r.link).to.equal(undefined);
      });

      it('a function error: status error, its message and data; input and output as the arguments and result', () => {
        const f = span('fn_error');
        expect(f).to.include({
          kind: 'tool',
          name: 'lookup_order',
          status: 'error',
          statusMessage: 'Error running tool',
        });
        expect(f.prompt).to.equal('{"order_id": "A-17"}');
        expect(f.attributes['error.data']).to.deep.equal({ tool_name: 'lookup_order', error: "KeyError: 'A-17'" });
        const big = span('fn_big');
        expect(big.prompt).to.have.length(150_000 + 16); // unsanitised: Python does not cut it for a custom endpoint
        expect(big.response).to.equal('A long document about lorem ipsum.');
        expect(big.attributes['agents.mcp_data']).to.deep.equal({ server: 'docs' });
      });

      it('a generation: model, messages as text and as sent, usage and cost; its text scanned by governance', async () => {
        const g = span('generation');
        expect(g).to.include({ kind: 'llm', model: 'gpt-4o-mini', promptTokens: 120, completionTokens: 12 });
        expect(g.prompt).to.equal(
          'system: You are a support agent.\nuser: Where is my order A-17? Mail me at zoe@example.com',
        );
        expect(g.response).to.equal('Your order A-17 shipped yesterday.');
        expect(g.costUsd).to.be.greaterThan(0);
        expect(g.attributes['gen_ai.input.messages']).to.have.length(2);
        expect(g.attributes['agents.model_config']).to.include({ temperature: 0.2 });
        const findings = await get(`${s.url}/api/findings?traceId=${run.traceId}`, auth);
        expect(findings.json.items.map((f: any) => [f.rule, f.spanId])).to.deep.include([
          'pii.email',
          run.ids.generation,
        ]);
      });

      it('every other type: handoff, guardrail, custom task and turn, MCP tools, speech, an unknown type', () => {
        expect(span('handoff')).to.include({ kind: 'chain', name: 'handoff Support agent → Voice agent' });
        expect(span('guardrail')).to.include({ kind: 'guardrail', name: 'pii_check' });
        expect(span('guardrail').attributes['guardrail.tripwire_triggered']).to.equal(false);
        expect(span('task')).to.include({ kind: 'chain', name: 'task (Support bot)', totalTokens: 1008 });
        expect(span('turn')).to.include({ kind: 'chain', name: 'turn 1 (Support agent)', promptTokens: 812 });
        expect(span('mcp')).to.include({ kind: 'tool', name: 'mcp list_tools docs' });
        expect(span('mcp').attributes['agents.mcp.result']).to.deep.equal(['search', 'fetch']);
        expect(span('custom')).to.include({ kind: 'other', name: 'retrieval' });
        expect(span('custom').attributes['agents.custom.data']).to.deep.equal({ docs: 3, index: 'faq' });
        expect(span('transcription')).to.include({
          kind: 'llm',
          model: 'gpt-4o-transcribe',
          response: 'Is my order on its way?',
        });
        expect(span('speech')).to.include({ kind: 'llm', prompt: 'Yes, it shipped yesterday.' });
        expect(span('speech').attributes['agents.first_content_at']).to.match(/\+00:00$/);
        expect(span('speech_group')).to.include({ kind: 'chain', prompt: 'Is my order on its way?' });
        const unknown = span('unknown');
        expect(unknown).to.include({ kind: 'other', name: 'realtime_session' });
        expect(unknown.attributes).to.include({ 'agents.span_data.session_id': 'sess_1', 'agents.span_data.turns': 2 });
        // The agent spans: their handoffs and tools (null from Python when none).
        expect(span('agent').attributes['agents.tools']).to.deep.equal(['lookup_order', 'summarize_document']);
        expect(span('agent2').attributes).to.not.have.property('agents.tools');
      });

      it('the list shows the workflow name, session and metadata', async () => {
        const list = await get(`${s.url}/api/traces?source=agents&limit=100`, auth);
        const item = list.json.items.find((t: any) => t.traceId === run.traceId);
        expect(item).to.include({ name: 'Support bot', session: run.trace.group_id });
        expect(item.metadata).to.deep.equal(run.trace.metadata);
      });

      it('a replay stores nothing twice; a later trace item wins', async () => {
        const before = await s.running.storage.countSpans(workspaceId);
        const again = await postPython(s, key, [...run.spans].reverse());
        expect(again.status).to.equal(200);
        const renamed = await postPython(s, key, [{ ...run.trace, workflow_name: 'Support bot v2' }]);
        expect(renamed.json).to.deep.equal({ accepted: 1, rejected: 0 });
        await flushed(s);
        expect(await s.running.storage.countSpans(workspaceId)).to.equal(before);
        const read = await traceRead(s, auth, run.traceId);
        expect(read.json.trace.spans).to.have.length(16);
        expect(read.json.trace.summary.name).to.equal('Support bot v2');
      });
    });

    it('spans before their trace item, split over requests, in any order: one tree in the end', async () => {
      const run = pythonRun('py-split');
      const [a, b, c] = [run.spans.slice(0, 5), run.spans.slice(5, 11), run.spans.slice(11)];
      expect((await postPython(s, key, c)).status).to.equal(200);
      let read = await traceRead(s, auth, run.traceId);
      expect(read.json.trace.spans).to.have.length(c.length);
      expect(read.json.trace.workflow).to.equal(null);
      expect(read.json.trace.session).to.equal(null);
      expect((await postPython(s, key, [...a].reverse())).status).to.equal(200);
      expect((await postPython(s, key, [run.trace, ...b])).status).to.equal(200);
      read = await traceRead(s, auth, run.traceId);
      expect(read.json.trace.spans).to.have.length(16);
      expect(read.json.trace.tree).to.have.length(1);
      expect(read.json.trace.summary.name).to.equal('Support bot');
      expect(read.json.trace.session).to.equal(run.trace.group_id);
    });

    it('a trace item alone (the run just started): found, with its workflow and no spans yet', async () => {
      const run = pythonRun('py-alone');
      expect((await postPython(s, key, [run.trace])).status).to.equal(200);
      const read = await traceRead(s, auth, run.traceId);
      expect(read.status, read.text).to.equal(200);
      expect(read.json.trace).to.include({ summary: null, session: run.trace.group_id });
      expect(read.json.trace.spans).to.deep.equal([]);
      expect(read.json.trace.workflow.name).to.equal('Support bot');
    });

    it('the SDK per-run tracing key of a trace item is never stored', async () => {
      const run = pythonRun('py-key');
      const res = await postPython(s, key, [{ ...run.trace, tracing_api_key: 'sk-proj-should-not-be-kept' }]);
      expect(res.status).to.equal(200);
      await flushed(s);
      const meta = await s.running.storage.traceMeta(workspaceId, [run.traceId]);
      expect(JSON.stringify([...meta.values()])).to.not.contain('sk-proj');
    });

    describe('malformed payloads: 400 naming the field, nothing stored', () => {
      const id = pySpanId('bad');
      const good = {
        object: 'trace.span',
        id,
        trace_id: 'trace_bad',
        parent_id: null,
        started_at: pyTime(0, 0),
        ended_at: pyTime(0, 5),
        error: null,
      };
      const cases: Array<[string, unknown, string]> = [
        ['a body that is not an object', [1, 2], '(body)'],
        ['no data', { items: [] }, 'data'],
        ['data not an array', { data: { object: 'trace' } }, 'data'],
        ['an item that is not an object', { data: ['trace'] }, 'data.0'],
        [
          'an unknown object',
          { data: [{ ...good, object: 'trace.event', span_data: { type: 'agent', name: 'a' } }] },
          'data.0.object',
        ],
        ['a trace without an id', { data: [{ object: 'trace', workflow_name: 'w' }] }, 'data.0.id'],
        ['an id over 256 characters', { data: [{ object: 'trace', id: 'x'.repeat(257) }] }, 'data.0.id'],
        [
          'an id with a control character',
          { data: [{ ...good, id: 'span_\n1', span_data: { type: 'agent', name: 'a' } }] },
          'data.0.id',
        ],
        [
          'metadata that is not an object',
          { data: [{ object: 'trace', id: 'trace_x', metadata: 'm' }] },
          'data.0.metadata',
        ],
        [
          'a span without trace_id',
          { data: [{ ...good, trace_id: undefined, span_data: { type: 'agent', name: 'a' } }] },
          'data.0.trace_id',
        ],
        [
          'parent_id not a string',
          { data: [{ ...good, parent_id: 7, span_data: { type: 'agent', name: 'a' } }] },
          'data.0.parent_id',
        ],
        [
          'started_at not a time',
          { data: [{ ...good, started_at: 'yesterday', span_data: { type: 'agent', name: 'a' } }] },
          'data.0.started_at',
        ],
        [
          'ended_at on 30 February',
          { data: [{ ...good, ended_at: '2026-02-30T10:00:00+00:00', span_data: { type: 'agent', name: 'a' } }] },
          'data.0.ended_at',
        ],
        ['no span_data', { data: [good] }, 'data.0.span_data'],
        ['span_data without a type', { data: [{ ...good, span_data: { name: 'a' } }] }, 'data.0.span_data.type'],
        [
          'an agent name that is not a string',
          { data: [{ ...good, span_data: { type: 'agent', name: 5 } }] },
          'data.0.span_data.name',
        ],
        [
          'agent handoffs not a list',
          { data: [{ ...good, span_data: { type: 'agent', name: 'a', handoffs: 'b' } }] },
          'data.0.span_data.handoffs',
        ],
        [
          'a function without a name',
          { data: [{ ...good, span_data: { type: 'function', input: '{}' } }] },
          'data.0.span_data.name',
        ],
        [
          'generation input not a list',
          { data: [{ ...good, span_data: { type: 'generation', input: 'hi' } }] },
          'data.0.span_data.input',
        ],
        [
          'usage tokens as a string',
          { data: [{ ...good, span_data: { type: 'response', response_id: 'r', usage: { input_tokens: '12' } } }] },
          'data.0.span_data.usage.input_tokens',
        ],
        [
          'negative usage',
          { data: [{ ...good, span_data: { type: 'generation', usage: { output_tokens: -1 } } }] },
          'data.0.span_data.usage.output_tokens',
        ],
        [
          'guardrail triggered not a boolean',
          { data: [{ ...good, span_data: { type: 'guardrail', name: 'g', triggered: 'yes' } }] },
          'data.0.span_data.triggered',
        ],
        [
          'custom data not an object',
          { data: [{ ...good, span_data: { type: 'custom', name: 'c', data: [1] } }] },
          'data.0.span_data.data',
        ],
        [
          'mcp_tools result not a list of strings',
          { data: [{ ...good, span_data: { type: 'mcp_tools', result: [1] } }] },
          'data.0.span_data.result.0',
        ],
        [
          'an error without a message',
          { data: [{ ...good, error: { data: {} }, span_data: { type: 'agent', name: 'a' } }] },
          'data.0.error.message',
        ],
      ];
      for (const [what, body, field] of cases) {
        it(what, async () => {
          await flushed(s); // what earlier tests stored is counted before
          const before = await s.running.storage.countSpans(workspaceId);
          const res = await post(`${s.url}${ROUTE}`, body, auth);
          expect(res.status, res.text).to.equal(400);
          expect(res.json.error.code).to.equal('validation_failed');
          const fields = (res.json.error.details as any[])
            .flatMap((d) => (d.details ? d.details : [d]))
            .map((d) => d.field);
          expect(fields, res.text).to.include(field);
          expect(res.json.error.message).to.contain(field);
          await flushed(s);
          expect(await s.running.storage.countSpans(workspaceId)).to.equal(before);
        });
      }

      it('not JSON', async () => {
        const res = await post(`${s.url}${ROUTE}`, '{"data": [', auth);
        expect(res.status).to.equal(400);
        expect(res.json.error.code).to.match(/json/);
      });

      it('some items bad: the others stored, 207 naming the bad ones', async () => {
        const run = pythonRun('py-mixed');
        const bad = { ...run.spans[0], started_at: 'soon' };
        const res = await postPython(s, key, [run.trace, bad, ...run.spans.slice(1)]);
        expect(res.status, res.text).to.equal(207);
        expect(res.json).to.include({ accepted: 16, rejected: 1 });
        expect(res.json.errors).to.have.length(1);
        expect(res.json.errors[0]).to.include({ index: 1, code: 'validation_failed' });
        expect(res.json.errors[0].details[0].field).to.equal('data.1.started_at');
        const read = await traceRead(s, auth, run.traceId);
        expect(read.json.trace.spans).to.have.length(15);
      });
    });

    it('auth: no key and a wrong key are refused (401)', async () => {
      const run = pythonRun('py-auth');
      const none = await post(`${s.url}${ROUTE}`, { data: [run.trace] });
      expect(none.status).to.equal(401);
      const wrong = await post(`${s.url}${ROUTE}`, { data: [run.trace] }, { authorization: 'Bearer tg_nope_nope' });
      expect(wrong.status).to.equal(401);
      expect(wrong.json.error.code).to.be.a('string');
    });

    it('workspaces are isolated: the same trace id in two workspaces stays two traces', async () => {
      const other = await s.key();
      const otherAuth = { authorization: `Bearer ${other.key}` };
      const run = pythonRun('py-iso');
      expect((await postPython(s, key, [run.trace, ...run.spans.slice(0, 3)])).status).to.equal(200);
      const theirs = { ...run.trace, workflow_name: 'Theirs', metadata: { owner: 'b' } };
      expect((await postPython(s, other.key, [theirs, run.spans[5]])).status).to.equal(200);
      const mine = await traceRead(s, auth, run.traceId);
      const their = await traceRead(s, otherAuth, run.traceId);
      expect(mine.json.trace.spans).to.have.length(3);
      expect(mine.json.trace.summary.name).to.equal('Support bot');
      expect(their.json.trace.spans).to.have.length(1);
      expect(their.json.trace.metadata).to.deep.equal({ owner: 'b' });
      const alone = pythonRun('py-iso-alone');
      expect((await postPython(s, key, [alone.trace])).status).to.equal(200);
      expect((await traceRead(s, otherAuth, alone.traceId)).status).to.equal(404);
    });
  });
}

describe(`agents route: limits (duckdb)`, function () {
  let s: TestServer;
  let key: string;
  before(async () => {
    s = await startTestServer('duckdb', {
      TRACEGATE_AGENTS_MAX_BODY_BYTES: String(256 * 1024),
      TRACEGATE_AGENTS_MAX_JSON_VALUES: '5000',
      TRACEGATE_MAX_BATCH_ITEMS: '50',
    });
    ({ key } = await s.key());
  });
  after(() => s?.close());

  it('a body over TRACEGATE_AGENTS_MAX_BODY_BYTES: 413 with the JSON error, nothing stored', async () => {
    const run = pythonRun('py-413', undefined, 300_000);
    const res = await postPython(s, key, [run.trace, ...run.spans]);
    expect(res.status).to.equal(413);
    expect(res.json.error).to.include({ code: 'payload_too_large' });
    expect(res.json.error.details).to.deep.equal({ limitBytes: 256 * 1024 });
  });

  it('more items than TRACEGATE_MAX_BATCH_ITEMS: 413 too_many_items', async () => {
    const run = pythonRun('py-items');
    const items = Array.from({ length: 51 }, () => run.trace);
    const res = await postPython(s, key, items);
    expect(res.status).to.equal(413);
    expect(res.json.error.code).to.equal('too_many_items');
  });

  it('more JSON values than TRACEGATE_AGENTS_MAX_JSON_VALUES: 413', async () => {
    const run = pythonRun('py-values');
    const wide = { ...run.trace, metadata: Object.fromEntries(Array.from({ length: 6000 }, (_, i) => [`k${i}`, i])) };
    const res = await postPython(s, key, [wide]);
    expect(res.status).to.equal(413);
    expect(res.json.error.code).to.be.a('string');
  });

  it('the real JS exporter, refused with 413, does not retry', async () => {
    const before = await answered(s, 413);
    const exporter = new OpenAITracingExporter({ apiKey: key, endpoint: `${s.url}${ROUTE}`, baseDelay: 10 });
    const big = 'x'.repeat(90_000);
    const items = [1, 2, 3, 4].map((n) => ({
      toJSON: () => ({
        object: 'trace.span',
        id: `span_${n}`,
        trace_id: 'trace_js413',
        parent_id: null,
        started_at: null,
        ended_at: null,
        span_data: { type: 'function', name: 'f', input: big, output: big },
        error: null,
      }),
    }));
    await exporter.export(items as never);
    expect((await answered(s, 413)) - before).to.equal(1);
  });
});

describe('agents route: a forceFlush of 1,000 items of 100 KB inputs, default limits (duckdb)', function () {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('duckdb');
  });
  after(() => s?.close());

  it('the real exporter posts them in one request; every item is stored', async () => {
    const { key, workspaceId } = await s.key();
    const { withTrace, createFunctionSpan, getGlobalTraceProvider } = await import('@openai/agents');
    const exporter = new OpenAITracingExporter({ apiKey: key, endpoint: `${s.url}${ROUTE}` });
    setTraceProcessors([new BatchTraceProcessor(exporter, { scheduleDelay: 600_000, exportTriggerRatio: 1 })]);
    setTracingDisabled(false);
    const words = 'the quick brown fox jumps over the lazy dog and keeps running through the field ';
    const input = words.repeat(Math.ceil(100_000 / words.length)).slice(0, 100 * 1024);
    let traceId = '';
    const before = await answered(s, 200);
    try {
      await withTrace('bulk', async (trace) => {
        traceId = trace.traceId;
        for (let i = 0; i < 999; i++) {
          const span = createFunctionSpan({ data: { name: `step_${i}`, input, output: 'ok' } });
          span.start();
          span.end();
        }
      });
      await getGlobalTraceProvider().forceFlush();
    } finally {
      setTracingDisabled(true);
    }
    expect((await answered(s, 200)) - before).to.equal(1); // one request: 1,000 items, about 100 MB
    await flushed(s);
    expect(await s.running.storage.countSpans(workspaceId)).to.equal(999);
    const meta = await s.running.storage.traceMeta(workspaceId, [traceId]);
    expect(meta.get(traceId)?.workflowName).to.equal('bulk');
    const part = await s.running.storage.getTracePart(workspaceId, traceId, { limit: 1 });
    // The exporter cut each input to 100,000 JSON bytes ("... [truncated]"); stored as it came.
    expect(part.spans[0]!.prompt).to.match(/\.\.\. \[truncated\]$/);
    expect(Buffer.byteLength(part.spans[0]!.prompt)).to.be.within(99_000, 100_000);
  });
});

describe('agents route: storage out (duckdb)', function () {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('duckdb', { TRACEGATE_SPOOL_MAX_BYTES: String(1024 * 1024) });
  });
  after(() => s?.close());

  it('503 with Retry-After while the spool is full; the real exporter retries and its batch is stored', async () => {
    const { key, workspaceId } = await s.key();
    await flushed(s);
    const storage = s.running.storage as unknown as Record<string, unknown>;
    const patched = ['insertSpans', 'insertEnrichment', 'insertSpoolFiles', 'ping'];
    for (const m of patched)
      storage[m] =
        m === 'ping'
          ? async () => false
          : async () => {
              throw new Error('storage unreachable (test)');
            };
    let restored = false;
    const restore = () => {
      if (restored) return;
      restored = true;
      for (const m of patched) delete storage[m];
    };
    try {
      // Fill the spool until the route answers 503.
      let filled = 0;
      for (let i = 0; i < 40; i++) {
        const run = pythonRun(`py-fill-${i}`, undefined, 60_000);
        const res = await postPython(s, key, [run.trace, ...run.spans]);
        if (res.status === 503) {
          expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
          expect(res.json.error.code).to.equal('unavailable');
          break;
        }
        expect(res.status).to.equal(200);
        filled += 16;
      }
      expect(filled).to.be.greaterThan(0);
      const before503 = await answered(s, 503);
      const exporter = new OpenAITracingExporter({
        apiKey: key,
        endpoint: `${s.url}${ROUTE}`,
        baseDelay: 200,
        maxDelay: 2_000,
        maxRetries: 5,
      });
      const run = pythonRun('py-retried');
      const items = [run.trace, ...run.spans].map((x) => ({ toJSON: () => x }));
      const exported = exporter.export(items as never);
      // Storage comes back once the exporter has been told 503 at least once.
      while ((await answered(s, 503)) === before503) await new Promise((r) => setTimeout(r, 20));
      restore();
      await exported;
      await flushed(s);
      expect(await s.running.storage.countSpans(workspaceId)).to.equal(filled + 16);
      const read = await traceRead(s, { authorization: `Bearer ${key}` }, run.traceId);
      expect(read.json.trace.spans).to.have.length(16);
    } finally {
      restore();
    }
  });
});
