// Enrichment storage micro-benchmark (not part of the test run):
//   node test/storage/bench-enrichment.ts
// 1. insertEnrichment of 20k findings + 5k audit + 5k verification rows: one call, and the
//    same volume as ten writer-sized calls of 3k rows;
// 2. usage() latency over 100k LLM spans, every groupBy × bucket (median of 5 runs).
// Uses a throwaway ClickHouse (or TRACEGATE_TEST_CLICKHOUSE_URL) and a temp DuckDB file.
import { emptySpan, type SpanRecord } from '../../core/record.ts';
import type { EnrichmentRecord } from '../../core/enrichment-records.ts';
import type { UsageQuery } from '../../core/ports/storage.ts';
import { sharedClickHouse, stopSharedClickHouse } from '../support/shared.ts';
import { BACKENDS } from './harness.ts';

const T0 = 1_763_787_000_000;

function enrichment(tag: string): EnrichmentRecord[] {
  const ws = `ws-bench-${tag}`;
  const rows: EnrichmentRecord[] = [];
  for (let i = 0; i < 20_000; i++) {
    rows.push({
      recordType: 'finding',
      workspaceId: ws,
      traceId: `t${i >> 3}`,
      spanId: `s${i >> 1}`,
      detector: 'pii',
      rule: i % 2 ? 'pii.email' : 'pii.phone',
      category: i % 2 ? 'email' : 'phone',
      severity: 'medium',
      field: 'prompt',
      start: i % 97,
      end: (i % 97) + 12,
      preview: 'j***@example.com',
      score: 1,
      action: 'redact',
      createdAtMs: T0 + i,
    });
  }
  for (let i = 0; i < 5_000; i++) {
    rows.push({
      recordType: 'audit',
      workspaceId: ws,
      chainId: 'chain-1',
      seq: i + 1,
      atMs: T0 + i * 10,
      actor: 'k_abc',
      action: 'ingest',
      route: 'POST /v1/traces',
      outcome: 'ok',
      accepted: 100,
      rejected: 0,
      details: '{"spans":100,"bytes":123456}',
      prevHash: 'a'.repeat(64),
      hash: 'b'.repeat(64),
    });
    rows.push({
      recordType: 'verification',
      workspaceId: ws,
      traceId: `t${i}`,
      spanIds: ['s1', 's2', 's3', 's4'],
      spanVersions: [T0, T0, T0 + 1, T0 + 2],
      contentHash: 'c'.repeat(64),
      chainId: 'vchain-1',
      seq: i + 1,
      prevHash: 'd'.repeat(64),
      hash: 'e'.repeat(64),
      createdAtMs: T0 + i * 10,
    });
  }
  return rows;
}

function spans(ws: string, n: number): SpanRecord[] {
  const out: SpanRecord[] = [];
  const models = ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet', 'llama-3'];
  const actions = ['', 'triage', 'summarize', 'extract', 'classify'];
  for (let i = 0; i < n; i++) {
    const startMs = T0 + Math.floor((i / n) * 7 * 24 * 3_600_000); // one week
    out.push({
      ...emptySpan(ws, 'otlp'),
      traceId: `tr${i}`,
      spanId: `sp${i}`,
      kind: 'llm',
      name: 'chat',
      startTimeNs: `${startMs}000000`,
      endTimeNs: `${startMs + 500}000000`,
      durationMs: ((i * 7919) % 5000) + (i % 13) / 7,
      status: i % 17 === 0 ? 'error' : 'completed',
      model: models[i % 4]!,
      actionName: actions[i % 5]!,
      environment: i % 3 ? 'prod' : 'staging',
      source: i % 2 ? 'otlp' : 'proxy',
      prompt: 'hello',
      response: 'world',
      promptTokens: i % 1000,
      completionTokens: i % 100,
      totalTokens: (i % 1000) + (i % 100),
      costUsd: (i % 1000) * 1e-6,
      ingestedAtMs: startMs + 10,
    });
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

await sharedClickHouse();
try {
  for (const [name, factory] of BACKENDS) {
    const h = await factory();
    try {
      const s = h.storage;
      let t = performance.now();
      await s.insertEnrichment(enrichment('one'));
      const one = performance.now() - t;
      const rows = enrichment('chunks');
      t = performance.now();
      for (let i = 0; i < rows.length; i += 3000) await s.insertEnrichment(rows.slice(i, i + 3000));
      const chunks = performance.now() - t;
      console.log(
        `${name}: insertEnrichment 30k rows (20k findings, 5k audit, 5k verification): one call ${one.toFixed(0)} ms; 10 calls of 3k ${chunks.toFixed(0)} ms`,
      );

      const ws = 'ws-bench-usage';
      const data = spans(ws, 100_000);
      t = performance.now();
      for (let i = 0; i < data.length; i += 5000) await s.insertSpans(data.slice(i, i + 5000));
      console.log(`${name}: insertSpans 100k LLM spans (20 × 5k): ${(performance.now() - t).toFixed(0)} ms`);
      const results: string[] = [];
      for (const groupBy of ['model', 'actionName', 'environment', 'source'] as const) {
        for (const bucket of ['hour', 'day'] as const) {
          const q: UsageQuery = { groupBy, bucket };
          const times: number[] = [];
          let n = 0;
          for (let r = 0; r < 5; r++) {
            t = performance.now();
            n = (await s.usage(ws, q)).length;
            times.push(performance.now() - t);
          }
          results.push(`${groupBy}/${bucket} ${median(times).toFixed(1)} ms (${n} rows)`);
        }
      }
      console.log(`${name}: usage() over 100k spans, median of 5: ${results.join('; ')}`);
    } finally {
      await h.destroy();
    }
  }
} finally {
  await stopSharedClickHouse();
}
