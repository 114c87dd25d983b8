// The trace detail's roll-up and span tree (GET /api/traces/:traceId).
import { expect } from 'chai';
import { emptySpan, type SpanRecord } from '../../../core/record.ts';
import { spanTree, summarize, viewSpans } from '../../../collector/routes/trace-view.ts';

const span = (spanId: string, over: Partial<SpanRecord> = {}): SpanRecord => ({
  ...emptySpan('ws', 'otlp'),
  traceId: 't',
  spanId,
  name: spanId,
  startTimeNs: '1000',
  endTimeNs: '2000',
  ...over,
});

describe('trace view', () => {
  it('counts the usage of model calls once when a wrapper span repeats it (Vercel generateText around doGenerate)', () => {
    const s = summarize([
      span('outer', { kind: 'chain', promptTokens: 1000, completionTokens: 500, totalTokens: 1500, costUsd: 0.0075 }),
      span('inner', {
        kind: 'llm',
        parentSpanId: 'outer',
        model: 'gpt-4o',
        promptTokens: 1000,
        completionTokens: 500,
        totalTokens: 1500,
        costUsd: 0.0075,
        startTimeNs: '1100',
      }),
    ])!;
    expect([s.promptTokens, s.completionTokens, s.totalTokens, s.costUsd, s.model]).to.deep.equal([
      1000,
      500,
      1500,
      0.0075,
      'gpt-4o',
    ]);
  });

  it('shows every span in the tree, also when parents form a cycle', () => {
    const tree = spanTree([
      span('a', { parentSpanId: 'b' }),
      span('b', { parentSpanId: 'a', startTimeNs: '1500' }),
      span('c', { parentSpanId: 'a' }),
    ]);
    const ids: string[] = [];
    const walk = (n: { spanId: string; children: typeof tree }) => {
      ids.push(n.spanId);
      n.children.forEach(walk);
    };
    tree.forEach(walk);
    expect(ids.sort()).to.deep.equal(['a', 'b', 'c']);
    expect(tree.map((n) => n.spanId)).to.deep.equal(['a']);
  });

  it("answers with a tool loop's final text: the first call only called a tool", () => {
    const loop = [
      span('agent', { kind: 'agent', startTimeNs: '1000', endTimeNs: '5000' }),
      span('step1', {
        kind: 'llm',
        parentSpanId: 'agent',
        prompt: 'user: Weather in Paris?',
        response: '',
        startTimeNs: '1100',
        endTimeNs: '2000',
      }),
      span('tool', {
        kind: 'tool',
        parentSpanId: 'agent',
        prompt: '{"city":"Paris"}',
        response: '{"tempC":21}',
        startTimeNs: '2100',
        endTimeNs: '2500',
      }),
      span('step2', {
        kind: 'llm',
        parentSpanId: 'agent',
        prompt: 'user: Weather in Paris?\ntool: {"tempC":21}',
        response: 'Sunny, 21°C.',
        startTimeNs: '2600',
        endTimeNs: '4900',
      }),
    ];
    expect([summarize(loop)!.prompt, summarize(loop)!.response]).to.deep.equal([
      'user: Weather in Paris?',
      'Sunny, 21°C.',
    ]);
    // The root's own output (an agent span recording the final answer) comes first.
    loop[0]!.response = 'It is sunny.';
    expect(summarize(loop)!.response).to.equal('It is sunny.');
  });

  it('shows the text of log-record events on their span, in event order; spans in start order', () => {
    const ev = (id: string, name: string, at: string, over: Partial<SpanRecord>) =>
      span(id, {
        name,
        parentSpanId: 'call',
        startTimeNs: at,
        endTimeNs: at,
        attributes: { 'tracegate.signal': 'logs' },
        ...over,
      });
    const spans = viewSpans([
      ev('e3', 'gen_ai.choice', '1900', { response: 'Paris.', finishReason: 'stop' }),
      ev('e2', 'gen_ai.user.message', '1100', { prompt: 'user: Capital of France?' }),
      ev('e1', 'gen_ai.system.message', '1100', { prompt: 'system: Be terse.' }),
      span('call', { kind: 'llm', model: 'gpt-4o-mini', startTimeNs: '1000', endTimeNs: '2000' }),
    ]);
    expect(spans.map((x) => x.spanId)).to.deep.equal(['call', 'e1', 'e2', 'e3']);
    expect([spans[0]!.prompt, spans[0]!.response, spans[0]!.finishReason]).to.deep.equal([
      'system: Be terse.\nuser: Capital of France?',
      'Paris.',
      'stop',
    ]);
    expect([summarize(spans)!.prompt, summarize(spans)!.response]).to.deep.equal([
      'system: Be terse.\nuser: Capital of France?',
      'Paris.',
    ]);
    // A span that has its own text keeps it, unless the events' text holds it and more (a Responses call's
    // instructions on the span, the whole input in an operation-details event).
    const own = viewSpans([
      span('call', { kind: 'llm', prompt: 'user: mine', response: 'mine' }),
      ev('e', 'gen_ai.user.message', '1100', { prompt: 'user: theirs' }),
    ]);
    expect([own[0]!.prompt, own[0]!.response]).to.deep.equal(['user: mine', 'mine']);
    const more = viewSpans([
      span('call', { kind: 'llm', prompt: 'system: Be brief.' }),
      ev('e', 'gen_ai.client.inference.operation.details', '1100', {
        prompt: 'system: Be brief.\nuser: Hi',
        response: 'Hello.',
      }),
    ]);
    expect([more[0]!.prompt, more[0]!.response]).to.deep.equal(['system: Be brief.\nuser: Hi', 'Hello.']);
  });

  it('keeps a conversation sent with one timestamp in the order it was sent', () => {
    const turns = [
      'system: Be nice.',
      'user: Is it sunny?',
      'assistant: Which city?',
      'user: Paris',
      'assistant: Sunny.',
      'user: Paris',
    ];
    const names = [
      'gen_ai.system.message',
      'gen_ai.user.message',
      'gen_ai.assistant.message',
      'gen_ai.user.message',
      'gen_ai.assistant.message',
      'gen_ai.user.message',
    ];
    const events = turns.map((prompt, i) =>
      span(`e${'zyxwvu'[i]}`, {
        name: names[i]!,
        parentSpanId: 'call',
        startTimeNs: '1100',
        endTimeNs: '1100',
        prompt,
        attributes: { 'tracegate.signal': 'logs', 'tracegate.log_index': i },
      }),
    );
    const spans = viewSpans([...events.reverse(), span('call', { kind: 'llm' })]);
    expect(spans.find((x) => x.spanId === 'call')!.prompt).to.equal(turns.join('\n'));
  });
});
