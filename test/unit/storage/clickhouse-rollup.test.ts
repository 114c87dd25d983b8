// The rollup plan for re-delivered spans and findings (pure; the contract suite checks the
// numbers against a real ClickHouse in enrichment.test.ts).
import { expect } from 'chai';
import {
  planFindingRollup,
  planSpanRollup,
  spanKey,
  findingKey,
  type FindingFacts,
  type UsageFacts,
} from '../../../storage/clickhouse-rollup.ts';

const bits = (x: number) => {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(x);
  return b.readBigUInt64LE().toString();
};
const HOUR_NS = 3_600_000_000_000n;
const span = (over: Partial<UsageFacts> = {}): UsageFacts => ({
  traceId: 't',
  spanId: 's',
  startNs: (HOUR_NS * 490_000n + 5n).toString(),
  kind: 'llm',
  model: 'gpt-4o',
  actionName: '',
  environment: 'prod',
  source: 'otlp',
  status: 'completed',
  promptTokens: 10,
  completionTokens: 5,
  totalTokens: 15,
  costBits: bits(0.25),
  durationBits: bits(120),
  ingestedAtMs: 1000,
  ...over,
});
const stored = (f: UsageFacts) => new Map([[spanKey(f.traceId, f.spanId), f]]);

describe('ClickHouse rollup plan', function () {
  it('counts a new span, skips an identical re-delivery and an older version', function () {
    expect(planSpanRollup('w', [span()], new Map())).to.deep.equal({ flags: [1], corrections: [] });
    expect(planSpanRollup('w', [span({ ingestedAtMs: 2000 })], stored(span()))).to.deep.equal({
      flags: [0],
      corrections: [],
    });
    expect(planSpanRollup('w', [span({ totalTokens: 99 })], stored(span({ ingestedAtMs: 2000 })))).to.deep.equal({
      flags: [0],
      corrections: [],
    });
    // a start moved within the same hour does not change the rollup
    expect(
      planSpanRollup(
        'w',
        [span({ startNs: (HOUR_NS * 490_000n + 99n).toString(), ingestedAtMs: 2000 })],
        stored(span()),
      ).flags,
    ).to.deep.equal([0]);
  });

  it('replaces a changed span: the old version is taken out, its latency kept when it stays in place', function () {
    const plan = planSpanRollup('w', [span({ status: 'error', totalTokens: 20, ingestedAtMs: 2000 })], stored(span()));
    expect(plan.flags).to.deep.equal([2]);
    expect(plan.corrections).to.deep.equal([
      {
        workspace_id: 'w',
        hour: 490_000 * 3600,
        model: 'gpt-4o',
        action_name: '',
        environment: 'prod',
        source: 'otlp',
        requests: -1,
        errors: 0,
        prompt_tokens: -10,
        completion_tokens: -5,
        total_tokens: -15,
        cost_usd: -0.25,
      },
    ]);
    // another model or duration: counted with its latency (the old latency cannot be taken out)
    expect(planSpanRollup('w', [span({ model: 'claude', ingestedAtMs: 2000 })], stored(span())).flags).to.deep.equal([
      1,
    ]);
    expect(
      planSpanRollup('w', [span({ durationBits: bits(121), ingestedAtMs: 2000 })], stored(span())).flags,
    ).to.deep.equal([1]);
    // an LLM span that becomes a tool span only leaves the rollup; a tool span that becomes LLM only enters it
    const leaves = planSpanRollup('w', [span({ kind: 'tool', ingestedAtMs: 2000 })], stored(span({ status: 'error' })));
    expect(leaves.corrections.map((c) => [c.requests, c.errors])).to.deep.equal([[-1, -1]]);
    const enters = planSpanRollup('w', [span({ ingestedAtMs: 2000 })], stored(span({ kind: 'tool' })));
    expect(enters).to.deep.equal({ flags: [1], corrections: [] });
  });

  it('counts a finding once per key, moving it to its newest day', function () {
    const f = (over: Partial<FindingFacts> = {}): FindingFacts => ({
      traceId: 't',
      spanId: 's',
      field: 'prompt',
      rule: 'pii.email',
      startOffset: 3,
      day: '2026-11-21',
      category: 'email',
      severity: 'medium',
      createdAtMs: 1000,
      ...over,
    });
    const have = new Map([[findingKey(f()), f()]]);
    expect(planFindingRollup('w', [f({ startOffset: 4 })], have)).to.deep.equal({ flags: [1], corrections: [] });
    expect(planFindingRollup('w', [f({ createdAtMs: 2000 })], have)).to.deep.equal({ flags: [0], corrections: [] });
    expect(planFindingRollup('w', [f({ createdAtMs: 500, day: '2026-11-20' })], have)).to.deep.equal({
      flags: [0],
      corrections: [],
    });
    expect(planFindingRollup('w', [f({ createdAtMs: 90_000_000, day: '2026-11-22' })], have)).to.deep.equal({
      flags: [1],
      corrections: [{ workspace_id: 'w', day: '2026-11-21', category: 'email', severity: 'medium', delta: -1 }],
    });
  });
});
