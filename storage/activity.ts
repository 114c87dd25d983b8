// What both engines' activity() share: the range in bucket units and how rows from the span, trace and alert
// queries merge into one row per bucket.
import type { ActivityQuery, ActivityRow } from '../core/ports/storage.ts';
import { checkBucket } from './enrichment.ts';

export const BUCKET_SECONDS = { hour: 3600, day: 86_400 } as const;

/** Bucket length in seconds (a bad bucket: the invalid-query error). */
export const bucketSeconds = (q: ActivityQuery): number => BUCKET_SECONDS[checkBucket(q.bucket)];

/** The range as ns bounds of span start and ms bounds of receive time (ms kept within the epoch's u64 range). */
export function activityRange(q: ActivityQuery): { fromNs?: bigint; toNs?: bigint; fromMs?: number; toMs?: number } {
  const clamp = (ms: number) => Math.min(Math.max(0, Math.floor(ms)), 18_446_744_073_709);
  return {
    ...(q.fromMs !== undefined ? { fromNs: BigInt(clamp(q.fromMs)) * 1_000_000n, fromMs: clamp(q.fromMs) } : {}),
    ...(q.toMs !== undefined ? { toNs: BigInt(clamp(q.toMs)) * 1_000_000n, toMs: clamp(q.toMs) } : {}),
  };
}

type Counts = Omit<ActivityRow, 'bucketStart'>;
const ZERO: Counts = {
  traces: 0,
  spans: 0,
  errorSpans: 0,
  toolCalls: 0,
  toolErrors: 0,
  guardrailChecks: 0,
  securityAlerts: 0,
};

/** Rows by bucket start (epoch seconds) → one row per bucket, in time order. */
export function mergeActivity(parts: Array<Array<{ bucketSec: number } & Partial<Counts>>>): ActivityRow[] {
  const by = new Map<number, Counts>();
  for (const rows of parts) {
    for (const { bucketSec, ...counts } of rows) {
      const row = by.get(bucketSec) ?? { ...ZERO };
      for (const [k, v] of Object.entries(counts) as Array<[keyof Counts, number]>) row[k] += Number(v);
      by.set(bucketSec, row);
    }
  }
  return [...by.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([sec, c]) => ({ bucketStart: new Date(sec * 1000).toISOString(), ...c }));
}

/**
 * The engines' three grouped reads (spans, traces, security alerts: columns b, n, e, tc, te, g; counts as text or
 * numbers), merged by bucket.
 */
export function activityRows(
  spans: ReadonlyArray<Record<string, unknown>>,
  traces: ReadonlyArray<Record<string, unknown>>,
  alerts: ReadonlyArray<Record<string, unknown>>,
): ActivityRow[] {
  return mergeActivity([
    spans.map((r) => ({
      bucketSec: Number(r.b),
      spans: Number(r.n),
      errorSpans: Number(r.e),
      toolCalls: Number(r.tc),
      toolErrors: Number(r.te),
      guardrailChecks: Number(r.g),
    })),
    traces.map((r) => ({ bucketSec: Number(r.b), traces: Number(r.n) })),
    alerts.map((r) => ({ bucketSec: Number(r.b), securityAlerts: Number(r.n) })),
  ]);
}
