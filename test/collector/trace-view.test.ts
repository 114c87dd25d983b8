// The trace detail's roll-up and span tree (GET /api/traces/:traceId).
import { expect } from 'chai';
import { emptySpan, type SpanRecord } from '../../collector/record.ts';
import { spanTree, summarize } from '../../collector/trace-view.ts';

const span = (spanId: string, over: Partial<SpanRecord> = {}): SpanRecord => ({
  ...emptySpan('ws', 'otlp'), traceId: 't', spanId, name: spanId, startTimeNs: '1000', endTimeNs: '2000', ...over,
});

describe('trace view', () => {
  it('counts the usage of model calls once when a wrapper span repeats it (Vercel generateText around doGenerate)', () => {
    const s = summarize([
      span('outer', { kind: 'chain', promptTokens: 1000, completionTokens: 500, totalTokens: 1500, costUsd: 0.0075 }),
      span('inner', { kind: 'llm', parentSpanId: 'outer', model: 'gpt-4o', promptTokens: 1000, completionTokens: 500, totalTokens: 1500, costUsd: 0.0075, startTimeNs: '1100' }),
    ])!;
    expect([s.promptTokens, s.completionTokens, s.totalTokens, s.costUsd, s.model]).to.deep.equal([1000, 500, 1500, 0.0075, 'gpt-4o']);
  });

  it('shows every span in the tree, also when parents form a cycle', () => {
    const tree = spanTree([span('a', { parentSpanId: 'b' }), span('b', { parentSpanId: 'a', startTimeNs: '1500' }), span('c', { parentSpanId: 'a' })]);
    const ids: string[] = [];
    const walk = (n: { spanId: string; children: typeof tree }) => { ids.push(n.spanId); n.children.forEach(walk); };
    tree.forEach(walk);
    expect(ids.sort()).to.deep.equal(['a', 'b', 'c']);
    expect(tree.map((n) => n.spanId)).to.deep.equal(['a']);
  });
});
