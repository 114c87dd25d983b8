// The agents export route: POST /api/integrations/provider-agents with the batches an Agents SDK exporter sends (one
// trace item and 20 spans with a few KB of input each, a new trace per request), next to the native route in the
// same run, on DuckDB and ClickHouse.
import { describeCpu, fmt } from './lib.ts';
import { type CaseResult, NATIVE_BODY, runNativeServer } from './native.ts';

const SPANS = 20;

const words = (n: number, seed: number) => {
  const vocab = [
    'order',
    'refund',
    'shipping',
    'customer',
    'the',
    'box',
    'arrived',
    'damaged',
    'replacement',
    'policy',
  ];
  let s = '';
  for (let i = 0; s.length < n; i++) s += `${vocab[(i * 7 + seed) % vocab.length]} `;
  return s.slice(0, n);
};

/**
 * One export as the JS exporter sends it, `[<id>]` unique per request: the trace, the task, the agent, and per turn a
 * response span, a function span with ~3 KB of input and its result, a generation span with ~2 KB of messages.
 */
export function agentsBody(): string {
  const trace = 'trace_[<id>]';
  const id = (n: number) => `span_[<id>]_${n}`;
  const t = (ms: number) => new Date(Date.UTC(2026, 2, 1, 10, 0, 0, ms)).toISOString();
  const span = (n: number, parent: number | null, data: Record<string, unknown>) => ({
    object: 'trace.span',
    id: id(n),
    trace_id: trace,
    parent_id: parent === null ? null : id(parent),
    started_at: t(n * 10),
    ended_at: t(n * 10 + 8),
    span_data: data,
    error: null,
  });
  const spans: unknown[] = [
    span(0, null, {
      type: 'custom',
      name: 'task',
      data: {
        sdk_span_type: 'task',
        name: 'Support',
        usage: {
          input_tokens: 4000,
          output_tokens: 300,
          cached_input_tokens: 0,
          cache_write_input_tokens: 0,
          requests: 6,
          total_tokens: 4300,
        },
      },
    }),
    span(1, 0, { type: 'agent', name: 'Support agent', handoffs: [], tools: ['lookup_order'], output_type: 'text' }),
  ];
  for (let n = 2; spans.length < SPANS; n++) {
    const k = spans.length % 3;
    if (k === 2) spans.push(span(n, 1, { type: 'response', response_id: `resp_[<id>]_${n}` }));
    else if (k === 0)
      spans.push(
        span(n, 1, {
          type: 'function',
          name: 'lookup_order',
          input: JSON.stringify({ query: words(3000, n) }),
          output: words(600, n + 1),
        }),
      );
    else
      spans.push(
        span(n, 1, {
          type: 'generation',
          model: 'gpt-4o-mini',
          input: [
            { role: 'system', content: 'You are a support agent.' },
            { role: 'user', content: words(2000, n) },
          ],
          output: [{ role: 'assistant', content: words(400, n + 2) }],
          usage: { input_tokens: 520, output_tokens: 90, details: { total_tokens: 610 } },
        }),
      );
  }
  const traceItem = {
    object: 'trace',
    id: trace,
    workflow_name: 'Support',
    group_id: 'group_[<id>]',
    metadata: { tier: 'gold' },
  };
  return JSON.stringify({ data: [traceItem, ...spans] });
}

async function runServer(
  name: string,
  env: Record<string, string>,
  seconds: number,
  route: 'agents' | 'native',
): Promise<CaseResult & { items: number }> {
  const agents = route === 'agents';
  const r = await runNativeServer(name, env, seconds, agents ? 16 : 50, {
    path: agents ? '/api/integrations/provider-agents' : '/api/traces',
    body: agents ? agentsBody() : NATIVE_BODY,
    counter: route,
    drainMs: 120_000,
  });
  return { ...r, items: agents ? SPANS + 1 : 1 };
}

export async function runAgentsBench(seconds: number, clickhouseUrl: string): Promise<void> {
  const ch = (db: string) => ({ TRACEGATE_CLICKHOUSE_URL: clickhouseUrl, TRACEGATE_CLICKHOUSE_DATABASE: db });
  const rows = [
    await runServer('native, embedded (DuckDB)', {}, seconds, 'native'),
    await runServer('agents, embedded (DuckDB)', {}, seconds, 'agents'),
    await runServer('native, ClickHouse 18.16', ch('bench_agents_native'), seconds, 'native'),
    await runServer('agents, ClickHouse 18.16', ch('bench_agents'), seconds, 'agents'),
  ];
  const bytes = Buffer.byteLength(agentsBody());
  console.log(
    `\n== agents export: POST /api/integrations/provider-agents, 1 trace + ${SPANS} spans a request (~${fmt(bytes / 1024)} KiB), next to native ==`,
  );
  console.log(
    'case'.padEnd(32),
    'req/s'.padStart(8),
    'items/s'.padStart(9),
    'p50 ms'.padStart(8),
    'p99 ms'.padStart(8),
    'RSS MB'.padStart(8),
    'steal %'.padStart(8),
    '  stored/acked spans',
  );
  for (const r of rows) {
    const rate = r.ok / r.duration;
    const check = `${r.stored}/${r.acked} ${r.stored === r.acked ? 'OK' : 'MISMATCH'}`;
    console.log(
      r.name.padEnd(32),
      fmt(rate).padStart(8),
      fmt(rate * r.items).padStart(9),
      fmt(r.p50, 1).padStart(8),
      fmt(r.p99, 1).padStart(8),
      String(r.rssMb).padStart(8),
      fmt(r.stealPct, 0).padStart(8),
      ' ',
      check,
      r.non2xx || r.errors ? `(non-2xx ${r.non2xx}, errors ${r.errors})` : '',
    );
  }
  for (const r of rows) console.log(`  ${r.name}: ${describeCpu(r.cpu, r.ok * r.items, 'item')}`);
}
