// The Agents SDK export mapper on fixtures: a payload captured from the real JS OpenAITracingExporter, and the Python
// BackendSpanExporter's built from its source.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import type { TraceMetaRecord } from '../../../core/enrichment-records.ts';
import type { SpanRecord } from '../../../core/record.ts';
import { type AgentsMapContext, mapAgentsItem, markProxied, responseIdOf } from '../../../mappers/agents.ts';
import { isoToNs, validateAgentsItem } from '../../../mappers/agents-schema.ts';
import { pythonJson, pythonRun } from '../../fixtures/agents/python-export.ts';

const JS = JSON.parse(readFileSync(new URL('../../fixtures/agents/js-export.json', import.meta.url), 'utf8'));

const ctx = (over: Partial<AgentsMapContext> = {}): AgentsMapContext => ({
  workspaceId: 'ws',
  receivedAtMs: 1_800_000_000_000,
  headers: { organization: 'org-1', project: 'proj-1', beta: 'traces=v1', userAgent: 'Agents/JavaScript 0.20.0' },
  limits: { maxStringBytes: 1024 * 1024, maxAttributeValueBytes: 64 * 1024 },
  ...over,
});

function mapAll(items: unknown[], c = ctx()) {
  const spans: SpanRecord[] = [];
  const metas: TraceMetaRecord[] = [];
  for (const item of items) {
    const v = validateAgentsItem(item);
    if (!v.success) throw new Error(JSON.stringify(v.error.issues));
    const r = mapAgentsItem(v.data, c);
    if ('recordType' in r) metas.push(r);
    else spans.push(r);
  }
  return { spans, metas };
}

describe('agents mapper: the JS exporter (captured)', () => {
  const { spans, metas } = mapAll(JS.body.data);
  const byType = (t: string) => spans.filter((s) => s.attributes['agents.span_type'] === t);

  it('the trace item is a metadata record, no times, with the request headers', () => {
    expect(metas).to.have.length(1);
    expect(metas[0]).to.deep.include({
      recordType: 'trace_meta',
      workflowName: 'Weather workflow',
      groupId: 'conversation-42',
      metadata: '{"customer":"acme"}',
      organization: 'org-1',
      project: 'proj-1',
      source: 'agents',
      updatedAtMs: 1_800_000_000_000,
    });
  });

  it('ids and parents as sent, times from the ISO strings', () => {
    const item = JS.body.data.find((x: any) => x.span_data?.type === 'function');
    const [fn] = byType('function');
    expect(fn).to.include({ spanId: item.id, traceId: item.trace_id, parentSpanId: item.parent_id });
    expect(fn!.startTimeNs).to.equal(String(BigInt(Date.parse(item.started_at)) * 1_000_000n));
    expect(fn!.source).to.equal('agents');
    expect(fn!.resourceAttributes).to.deep.equal({
      'telemetry.sdk.name': 'openai-agents',
      'openai.organization': 'org-1',
      'openai.project': 'proj-1',
      'openai.beta': 'traces=v1',
      'user_agent.original': 'Agents/JavaScript 0.20.0',
    });
  });

  it('every type of the run', () => {
    expect(byType('agent')[0]).to.include({ kind: 'agent', name: 'Weather agent', actionName: 'Weather agent' });
    expect(byType('function')[0]).to.include({ kind: 'tool', prompt: '{"city":"Paris"}', response: 'Sunny in Paris' });
    expect(byType('guardrail')[0]!.attributes).to.include({
      'guardrail.name': 'No shouting',
      'guardrail.tripwire_triggered': false,
    });
    const responses = byType('response');
    expect(responses).to.have.length(2);
    for (const r of responses) {
      expect(r.kind).to.equal('llm');
      expect(r.requestId).to.match(/^resp_/);
      expect(r.totalTokens).to.equal(0); // JS sends no usage on response spans
      expect(responseIdOf(r)).to.equal(r.requestId);
    }
    const custom = byType('custom');
    expect(custom.map((s) => s.name).sort()).to.deep.equal([
      'retrieval',
      'task (Agent workflow)',
      'turn 1 (Weather agent)',
      'turn 2 (Weather agent)',
    ]);
    expect(custom.find((s) => s.name === 'turn 1 (Weather agent)')).to.include({
      kind: 'chain',
      promptTokens: 14,
      completionTokens: 3,
    });
    expect(custom.find((s) => s.name === 'retrieval')!.attributes['agents.custom.data']).to.deep.equal({ docs: 3 });
  });

  it("a generation's usage moved under `details` by the exporter is read there", () => {
    const [g] = byType('generation');
    expect(g).to.include({ kind: 'llm', model: 'gpt-4o-mini', promptTokens: 5, completionTokens: 2, totalTokens: 7 });
    expect(g!.attributes['gen_ai.usage.cache_read.input_tokens']).to.equal(1);
    expect(g!.prompt).to.equal('user: hi');
    expect(g!.response).to.equal('hello');
    expect(g!.costUsd).to.be.greaterThan(0);
    expect(g!.attributes['tracegate.cost_source']).to.equal('price_table');
  });
});

describe('agents mapper: the Python exporter (from its source)', () => {
  const run = pythonRun('unit');
  const body = JSON.parse(pythonJson({ data: [run.trace, ...run.spans] }));
  const { spans, metas } = mapAll(body.data);
  const span = (name: string) => spans.find((s) => s.spanId === run.ids[name])!;

  it('reads Python JSON (\\u escapes, nulls) and +00:00 microsecond times', () => {
    expect(JSON.parse(metas[0]!.metadata)).to.deep.equal({ customer: 'Zoë Müller', channel: 'chat ☕', tier: 'gold' });
    expect(span('task').startTimeNs).to.equal('1772359200000123000');
    expect(span('agent2').attributes).to.not.have.property('agents.tools');
  });

  it('full usage on response spans; a function error; every type', () => {
    expect(span('response')).to.include({ kind: 'llm', promptTokens: 812, completionTokens: 64, totalTokens: 876 });
    expect(span('fn_error')).to.include({ status: 'error', statusMessage: 'Error running tool' });
    expect(span('generation').prompt).to.contain('user: Where is my order A-17?');
    expect(span('unknown')).to.include({ kind: 'other', name: 'realtime_session' });
    expect(spans).to.have.length(16);
  });
});

describe('agents mapper: limits, times, the proxied call', () => {
  const item = (span_data: Record<string, unknown>, over: Record<string, unknown> = {}) => ({
    object: 'trace.span',
    id: 'span_1',
    trace_id: 'trace_1',
    parent_id: null,
    started_at: '2026-01-01T00:00:00.5Z',
    ended_at: '2026-01-01T00:00:01.25Z',
    span_data,
    error: null,
    ...over,
  });

  it('prompt, response and attribute strings are cut to their limits, and listed', () => {
    const small = ctx({ limits: { maxStringBytes: 100, maxAttributeValueBytes: 20 } });
    const { spans } = mapAll(
      [
        item({
          type: 'function',
          name: 'f',
          input: 'i'.repeat(300),
          output: 'o'.repeat(300),
          mcp_data: 'm'.repeat(300),
        }),
      ],
      small,
    );
    const s = spans[0]!;
    expect(s.prompt).to.have.length(100);
    expect(s.response).to.have.length(100);
    expect(s.attributes['agents.mcp_data']).to.have.length(100); // content: the long-text limit
    expect(s.attributes['tracegate.truncated']).to.deep.equal([
      'tracegate.prompt',
      'tracegate.response',
      'agents.mcp_data',
    ]);
  });

  it('a span with no times gets the receive time, marked; one time stands for both', () => {
    const none = mapAll([item({ type: 'agent', name: 'a' }, { started_at: null, ended_at: null })]).spans[0]!;
    expect(none.startTimeNs).to.equal('1800000000000000000');
    expect(none.attributes['tracegate.time_source']).to.equal('received');
    const end = mapAll([item({ type: 'agent', name: 'a' }, { started_at: null })]).spans[0]!;
    expect(end.startTimeNs).to.equal(end.endTimeNs);
  });

  it('isoToNs: Z, offsets, no zone, fractions up to 9 digits; nonsense is null', () => {
    expect(isoToNs('1970-01-01T00:00:01Z')).to.equal('1000000000');
    expect(isoToNs('1970-01-01T01:00:01.000000001+01:00')).to.equal('1000000001');
    expect(isoToNs('1970-01-01T00:00:01.123456')).to.equal('1123456000');
    expect(isoToNs('2026-02-29T00:00:00Z')).to.equal(null);
    expect(isoToNs('1969-12-31T23:59:59Z')).to.equal(null);
    expect(isoToNs('yesterday')).to.equal(null);
  });

  it('markProxied: a response span whose call the proxy recorded stops being a model call of its own', () => {
    const r = mapAll([item({ type: 'response', response_id: 'resp_1', usage: { input_tokens: 5, output_tokens: 1 } })])
      .spans[0]!;
    markProxied(r, { traceId: 'tp', spanId: 'sp' });
    expect(r.kind).to.equal('chain');
    expect(r.attributes).to.include({
      'tracegate.proxied': true,
      'tracegate.proxy.trace_id': 'tp',
      'tracegate.proxy.span_id': 'sp',
    });
    expect(r.promptTokens).to.equal(5); // kept as sent, not summed (kind chain)
  });

  it('the per-run tracing key is not kept; other fields of a span item are', () => {
    const { metas } = mapAll([{ object: 'trace', id: 'trace_k', workflow_name: 'w', tracing_api_key: 'sk-secret' }]);
    expect(JSON.stringify(metas)).to.not.contain('sk-secret');
    const { spans } = mapAll([
      item({ type: 'agent', name: 'a' }, { tracing_api_key: 'sk-secret', sdk_extra: { x: 1 } }),
    ]);
    expect(JSON.stringify(spans)).to.not.contain('sk-secret');
    expect(spans[0]!.attributes['agents.span.sdk_extra']).to.deep.equal({ x: 1 });
  });
});
