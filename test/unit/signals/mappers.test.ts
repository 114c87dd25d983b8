// The pure mappers of the signal routes: tool calls → tool spans, votes → feedback records, scanner payloads →
// security-alert records (on fixtures in test/fixtures/webhooks, shaped as the senders document them).
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { feedbackSchema, mapFeedback, parseFeedback } from '../../../mappers/feedback.ts';
import { canonicalFields } from '../../../mappers/signal-fields.ts';
import { mapToolCall, namedTrace, parseToolCall, type ToolCall, toolCallSchema } from '../../../mappers/tool-calls.ts';
import { alertIdOf, correlate, mapSecurityAlert, normalizeSeverity, type Obj } from '../../../mappers/webhooks.ts';

const limits = { maxPayloadBytes: 64, maxStringBytes: 1024 };
const schema = toolCallSchema(limits);
const NOW = 1_787_392_800_000;

function call(item: unknown): ToolCall {
  const p = parseToolCall(schema, item);
  if (!p.ok) throw new Error(JSON.stringify(p.issues));
  return p.call;
}

describe('tool-call mapper', () => {
  it('maps a call to an execute_tool span with the GenAI tool attributes', () => {
    const c = call({
      id: 'call_1',
      name: 'get_weather',
      type: 'function',
      arguments: { city: 'Paris' },
      result: 'sunny',
      started_at: NOW - 400,
      ended_at: NOW - 100,
      session_id: 's',
      user_id: 'u',
      'tracegate.cost': 1,
      mcp: { server: 'github' },
    });
    const span = mapToolCall(c, 'ws', NOW, { traceId: 't1', parentSpanId: 'p' }, limits);
    expect(span).to.include({
      traceId: 't1',
      parentSpanId: 'p',
      name: 'execute_tool get_weather',
      kind: 'tool',
      source: 'tool_call',
      status: 'completed',
      durationMs: 300,
      startTimeNs: `${NOW - 400}000000`,
      ingestedAtMs: NOW,
      trainable: false,
    });
    expect(span.attributes).to.deep.include({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'get_weather',
      'gen_ai.tool.call.id': 'call_1',
      'gen_ai.tool.type': 'function',
      'gen_ai.tool.call.arguments': '{"city":"Paris"}',
      'gen_ai.tool.call.result': 'sunny',
      'session.id': 's',
      'gen_ai.conversation.id': 's',
      'user.id': 'u',
      'client.tracegate.cost': 1,
      mcp: { server: 'github' },
    });
  });

  it('derives span and trace ids a redelivery reproduces; another workspace or call gets others', () => {
    const c = call({ id: 'call_1', name: 'x' });
    const a = mapToolCall(c, 'ws', NOW, null, limits);
    const b = mapToolCall(call({ id: 'call_1', name: 'x' }), 'ws', NOW + 5, null, limits);
    expect([b.traceId, b.spanId]).to.deep.equal([a.traceId, a.spanId]);
    expect(a.traceId).to.match(/^[0-9a-f]{32}$/);
    expect(a.spanId).to.match(/^[0-9a-f]{16}$/);
    expect(mapToolCall(c, 'ws2', NOW, null, limits).traceId).to.not.equal(a.traceId);
    expect(mapToolCall(call({ id: 'call_2', name: 'x' }), 'ws', NOW, null, limits).spanId).to.not.equal(a.spanId);
    // Without an id, the call itself is its identity.
    const anon = (args: object) => mapToolCall(call({ name: 'x', arguments: args }), 'ws', NOW, null, limits).spanId;
    expect(anon({ a: 1 })).to.equal(anon({ a: 1 }));
    expect(anon({ a: 1 })).to.not.equal(anon({ a: 2 }));
  });

  it('cuts a payload past the limit on a character boundary and keeps the whole one’s SHA-256', () => {
    const text = '€'.repeat(40); // 120 bytes; the limit (64) falls inside a character
    const span = mapToolCall(call({ name: 'x', result: text }), 'ws', NOW, null, limits);
    const cut = span.attributes['gen_ai.tool.call.result'] as string;
    expect(cut).to.equal('€'.repeat(21));
    expect(span.attributes['tracegate.tool.result_bytes']).to.equal(120);
    expect(span.attributes['tracegate.tool.result_sha256']).to.equal(createHash('sha256').update(text).digest('hex'));
    expect(span.attributes['tracegate.tool.result_truncated']).to.equal(true);
  });

  it('marks errors: a string error, an error object, status error', () => {
    const e1 = mapToolCall(call({ name: 'x', error: 'boom' }), 'ws', NOW, null, limits);
    expect(e1).to.include({ status: 'error', statusMessage: 'boom' });
    expect(e1.attributes['error.type']).to.equal('_OTHER');
    const e2 = mapToolCall(
      call({ name: 'x', error: { type: 'timeout', message: 'slow', data: { a: 1 } } }),
      'ws',
      NOW,
      null,
      limits,
    );
    expect(e2.attributes).to.deep.include({ 'error.type': 'timeout', 'tracegate.tool.error_data': '{"a":1}' });
    expect(mapToolCall(call({ name: 'x', status: 'failed' }), 'ws', NOW, null, limits).status).to.equal('error');
  });

  it('takes times as ISO strings or ms, a duration alone ending at receipt', () => {
    const iso = mapToolCall(
      call({ name: 'x', started_at: '2026-08-22T10:00:00.120456Z', duration_ms: 10 }),
      'ws',
      NOW,
      null,
      limits,
    );
    expect(iso.startTimeNs).to.equal('1787392800120456000');
    expect(iso.endTimeNs).to.equal('1787392800130456000');
    const dur = mapToolCall(call({ name: 'x', duration_ms: 250 }), 'ws', NOW, null, limits);
    expect([dur.startTimeNs, dur.endTimeNs]).to.deep.equal([`${NOW - 250}000000`, `${NOW}000000`]);
  });

  it('names the trace from trace_id or traceparent; refuses what is wrong naming the field as sent', () => {
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(namedTrace(call({ name: 'x', traceparent: tp }))).to.deep.equal({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentSpanId: '00f067aa0ba902b7',
    });
    const bad = (item: object) => {
      const p = parseToolCall(schema, item);
      return p.ok ? null : p.issues[0]!.field;
    };
    expect(bad({})).to.equal('name');
    expect(bad({ name: 'x', traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' })).to.equal(
      'traceparent',
    );
    expect(bad({ name: 'x', traceId: 'has space' })).to.equal('traceId');
    expect(bad({ name: 'x', trace_id: 'a', traceparent: tp })).to.equal('trace_id');
    expect(bad({ name: 'x', durationMs: -1 })).to.equal('durationMs');
    expect(bad({ name: 'x', callId: 'a', id: 'b' })).to.equal('callId');
    expect(bad({ name: 'x', metadata: [1] })).to.equal('metadata');
  });

  it('puts every spelling under one canonical name', () => {
    const { item, spelled } = canonicalFields({ traceId: 't', span_id: 's', other: 1 }, ['trace_id', 'span_id']);
    expect(item).to.deep.equal({ trace_id: 't', span_id: 's', other: 1 });
    expect(spelled.get('trace_id')).to.equal('traceId');
  });
});

describe('feedback mapper', () => {
  const fb = feedbackSchema(1024);
  const vote = (item: object, at = NOW) => {
    const p = parseFeedback(fb, item);
    if (!p.ok) throw new Error(JSON.stringify(p.issues));
    return mapFeedback(p.vote, 'ws', at);
  };
  const refused = (item: unknown) => {
    const p = parseFeedback(fb, item);
    return p.ok ? null : p.issues[0]!;
  };

  it('keys a vote by its id, else by (target, name, user), else by itself', () => {
    expect(vote({ id: 'v1', trace_id: 't', value: 'up' }).voteKey).to.equal('id:v1');
    const u1 = vote({ trace_id: 't', value: 'up', user_id: 'u' });
    const u2 = vote({ trace_id: 't', value: 'down', user_id: 'u', comment: 'changed' }, NOW + 1);
    expect(u1.voteKey)
      .to.equal(u2.voteKey)
      .and.match(/^user:/);
    expect(vote({ trace_id: 't', value: 'up', user_id: 'u', name: 'other' }).voteKey).to.not.equal(u1.voteKey);
    expect(vote({ trace_id: 't2', value: 'up', user_id: 'u' }).voteKey).to.not.equal(u1.voteKey);
    const a1 = vote({ trace_id: 't', value: 'up', comment: 'a' });
    expect(a1.voteKey).to.match(/^vote:/);
    expect(vote({ trace_id: 't', value: 'up', comment: 'a' }, NOW + 9).voteKey).to.equal(a1.voteKey);
    expect(vote({ trace_id: 't', value: 'up', comment: 'b' }).voteKey).to.not.equal(a1.voteKey);
  });

  it('reads every value form; null retracts', () => {
    const forms: Array<[unknown, string]> = [
      ['up', 'up'],
      [' Down ', 'down'],
      [true, 'up'],
      [false, 'down'],
      [1, 'up'],
      [0, 'down'],
      [-1, 'down'],
      ['1', 'up'],
      ['0', 'down'],
      ['-1', 'down'],
      ['TRUE', 'up'],
    ];
    for (const [value, want] of forms) expect(vote({ trace_id: 't', value }).value, String(value)).to.equal(want);
    const r = vote({ trace_id: 't', user_id: 'u', value: null });
    expect(r).to.include({ value: '', retracted: true });
    for (const value of ['sideways', 2, 0.5, [], {}, ''])
      expect(refused({ trace_id: 't', value })?.field).to.equal('value');
  });

  it('names its target: a span (of its trace), the trace, a response, a request', () => {
    expect(vote({ trace_id: 't', span_id: 's', value: 'up' })).to.include({
      targetType: 'span',
      targetId: 's',
      traceId: 't',
    });
    expect(vote({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', value: 'up' })).to.include({
      targetType: 'trace',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    });
    expect(vote({ responseId: 'resp_1', requestId: 'req', value: 'up' })).to.include({
      targetType: 'response',
      traceId: '',
    });
    expect(vote({ request_id: 'req', value: 'up' })).to.include({ targetType: 'request', targetId: 'req' });
    expect(refused({ value: 'up', comment: 'x' })).to.include({ field: 'trace_id', code: 'required' });
    expect(refused({ traceId: 't', value: null })?.field).to.equal('value');
    expect(refused({ traceId: 't' })?.field).to.equal('value');
    expect(refused([1])?.field).to.equal('(body)');
    expect(vote({ id: 'v', value: null })).to.include({ voteKey: 'id:v', retracted: true }); // by id: no target needed
  });

  it('keeps the vote time, default the receive time, and metadata as JSON', () => {
    const v = vote({ trace_id: 't', value: 'up', timestamp: '2026-01-02T03:04:05.678Z', metadata: { a: [1] } });
    expect(v.votedAtMs).to.equal(Date.parse('2026-01-02T03:04:05.678Z'));
    expect(v.metadata).to.equal('{"a":[1]}');
    expect(vote({ trace_id: 't', value: 'up' }).votedAtMs).to.equal(NOW);
  });
});

describe('security-alert mapper', () => {
  const fixture = (name: string) => readFileSync(`test/fixtures/webhooks/${name}.json`);
  const map = (raw: Buffer, headers: Record<string, string> = {}, traces = new Map<string, string>()) =>
    mapSecurityAlert({
      workspaceId: 'ws',
      raw,
      body: JSON.parse(raw.toString()) as Obj,
      headers,
      receivedAtMs: NOW,
      signature: 'unsigned',
      secretId: '',
      responseTraces: traces,
    });

  it('reads a GitHub secret-scanning alert', () => {
    const a = map(fixture('github-secret-scanning'), {
      'x-github-event': 'secret_scanning_alert',
      'x-github-delivery': 'd-1',
    });
    expect(a).to.include({
      source: 'github',
      severity: 'medium',
      rawSeverity: '',
      title: 'OpenAI API Key',
      category: 'openai_api_key',
      externalId: '42',
      detectedAtMs: Date.parse('2026-08-22T10:00:00Z'),
      userId: 'octocat',
      traceId: '',
    });
  });

  it('reads a Semgrep finding under its one key', () => {
    const a = map(fixture('semgrep-finding'), { 'x-semgrep-signature-256': 'x' });
    expect(a).to.include({ source: 'semgrep', severity: 'high', rawSeverity: 'ERROR', externalId: '8f2c1a' });
    expect(a.title).to.equal('python.lang.security.audit.dangerous-system-call');
  });

  it('reads a guard relay: correlation keys in metadata, a trace id lower-cased, epoch seconds', () => {
    const a = map(fixture('relay-guard'));
    expect(a).to.include({
      source: 'lakera-guard-relay',
      severity: 'high',
      category: 'prompt_injection',
      title: 'Prompt injection detected in user input',
      detectedAtMs: 1_787_392_800_000,
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      requestId: 'req-7f9e',
      userId: 'u_123',
    });
    expect(JSON.parse(a.correlation).request_id).to.deep.equal([{ from: 'metadata.request_uuid', value: 'req-7f9e' }]);
  });

  it('reads a promptfoo issue two envelopes deep, its response id resolved to the proxied trace', () => {
    const a = map(fixture('promptfoo-issue'), {}, new Map([['resp_abc123', 'trace-of-resp']]));
    expect(a).to.include({
      severity: 'critical',
      externalId: 'iss_31',
      category: 'harmful:privacy',
      responseId: 'resp_abc123',
      sessionId: 'conv-9',
      traceId: 'trace-of-resp',
      detectedAtMs: Date.parse('2026-08-22T10:00:00.250Z'),
    });
  });

  it('takes traceparent from the headers first, keeps every hit, refuses ids that are not ids', () => {
    const c = correlate(
      { trace_id: 'from-body', span_id: '0000000000000000', request_id: 'has space', session: {} },
      { traceparent: '00-aaaabbbbccccddddeeeeffff00001111-1234567890abcdef-01', 'x-request-id': 'rq-1' },
    );
    expect(c.keys).to.deep.include({
      trace_id: 'aaaabbbbccccddddeeeeffff00001111',
      span_id: '1234567890abcdef',
      request_id: 'rq-1',
    });
    expect(c.hits.trace_id!.map((h) => h.value)).to.deep.equal(['aaaabbbbccccddddeeeeffff00001111', 'from-body']);
    expect(c.hits.span_id).to.have.length(1); // the all-zero one is not an id
    expect(c.hits.request_id).to.have.length(1); // nor one with a space
  });

  it('normalizes severities from words, levels and scores', () => {
    const cases: Array<[string, string | null]> = [
      ['CRITICAL', 'critical'],
      ['error', 'high'],
      ['warning', 'medium'],
      ['info', 'low'],
      ['P1', 'high'],
      ['9.8', 'critical'],
      ['7', 'high'],
      ['0.45', 'medium'],
      ['2', 'low'],
      ['whatever', null],
      ['', null],
    ];
    for (const [raw, want] of cases) expect(normalizeSeverity(raw), raw).to.equal(want);
  });

  it('gives a body one id per workspace, whatever its delivery', () => {
    const raw = Buffer.from('{"a":1}');
    expect(alertIdOf('ws', raw)).to.equal(alertIdOf('ws', Buffer.from('{"a":1}')));
    expect(alertIdOf('ws', raw)).to.not.equal(alertIdOf('ws2', raw));
    expect(map(raw).body).to.equal('{"a":1}');
    expect(map(raw).source).to.equal('unknown');
  });
});
