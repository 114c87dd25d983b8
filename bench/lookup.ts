// `node bench/lookup.ts` (or BENCH_ONLY=lookup make bench): what the ClickHouse writer's stored-version lookup
// (TRACEGATE_CLICKHOUSE_EXACT_ROLLUPS) costs per batch as a day's spans grow. Baseline in the same run: a batch of
// new traces only; the cases add traces that continue stored ones, which make the lookup read `spans`.
// LOOKUP_SPANS (default 2,000,000) spans are written straight into a throwaway server, 16 per trace, on one day,
// and LOOKUP_EARLIER_TRACES (default 4,000,000) traces of earlier days into the trace index only (the index holds
// every trace ever stored).
import { randomBytes } from 'node:crypto';
import { createClient } from '@clickhouse/client';
import { startClickHouse } from '../test/support/clickhouse.ts';
import { ClickHouseStorage } from '../storage/clickhouse.ts';
import { storedSpans } from '../storage/clickhouse-rollup.ts';
import { fmt } from './lib.ts';

const hex = (n: number) => randomBytes(n).toString('hex');
const BATCH = 5_000;
const ROUNDS = 3;

export async function runLookupBench(
  total = Number(process.env.LOOKUP_SPANS ?? 2_000_000),
  earlier = Number(process.env.LOOKUP_EARLIER_TRACES ?? 4_000_000),
): Promise<void> {
  const ch = await startClickHouse();
  const client = createClient({ url: ch.url });
  try {
    const store = new ClickHouseStorage({ url: ch.url, database: 'bench_lookup' });
    await store.init();
    await store.close();
    const traces: string[] = [];
    for (let done = 0; done < total; done += 400_000) {
      const spans: object[] = [];
      const index: string[] = [];
      for (let i = 0; i < 400_000 / 16; i++) {
        const t = hex(16);
        traces.push(t);
        index.push(`ws1\t${t}\t2026-11-29`);
        for (let j = 0; j < 16; j++)
          spans.push({
            workspace_id: 'ws1',
            trace_id: t,
            span_id: hex(8),
            start_date: '2026-11-29',
            start_ns: String(1_795_900_000_000_000_000n + BigInt(done + i)),
            kind: 'llm',
            model: 'gpt-4o',
            ingested_at_ms: 1,
          });
      }
      await client.insert({ table: 'bench_lookup.spans', values: spans, format: 'JSONEachRow' });
      await client.command({ query: `INSERT INTO bench_lookup.trace_days FORMAT TabSeparated\n${index.join('\n')}\n` });
    }
    for (let done = 0; done < earlier; done += 500_000) {
      const index: string[] = [];
      for (let i = 0; i < Math.min(500_000, earlier - done); i++)
        index.push(`ws1\t${hex(16)}\t2026-${String(1 + (i % 10)).padStart(2, '0')}-15`);
      await client.command({ query: `INSERT INTO bench_lookup.trace_days FORMAT TabSeparated\n${index.join('\n')}\n` });
    }
    for (const t of ['spans', 'trace_days']) await client.command({ query: `OPTIMIZE TABLE bench_lookup.${t} FINAL` });

    console.log(
      `\n== ClickHouse stored-version lookup before an insert: ${fmt(total)} spans (${fmt(traces.length)} traces) stored on one day, ${fmt(earlier)} traces before ==`,
    );
    console.log(
      'batch of 5,000 spans'.padEnd(44),
      'ms per batch (median of 3)'.padStart(28),
      'ratio to new only'.padStart(19),
    );
    let base = NaN;
    for (const continuing of [0, 20, 200]) {
      const ms: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const keys: Array<{ traceId: string; spanId: string }> = [];
        for (let i = 0; i < continuing; i++)
          keys.push({ traceId: traces[Math.floor(Math.random() * traces.length)]!, spanId: hex(8) });
        while (keys.length < BATCH) {
          const t = hex(16);
          for (let j = 0; j < 16; j++) keys.push({ traceId: t, spanId: hex(8) });
        }
        const t0 = performance.now();
        await storedSpans(client, 'bench_lookup', 'ws1', keys);
        ms.push(performance.now() - t0);
      }
      const median = ms.sort((a, b) => a - b)[1]!;
      if (continuing === 0) base = median;
      console.log(
        (continuing ? `new traces + ${continuing} continuing stored ones` : 'new traces only (baseline)').padEnd(44),
        fmt(median).padStart(28),
        fmt(median / base, 2).padStart(19),
      );
    }
  } finally {
    await client.close();
    await ch.dispose();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await runLookupBench();
