// Keeping the ClickHouse rollups exact when a record arrives more than once.
//
// The rollups (usage_hourly, findings_daily) are fed by materialized views, which see inserted
// blocks, not the collapsed tables: an exporter retry, a re-posted requestId or a spool replay
// after a crash would be counted again. So before an insert the writer reads the newest stored
// version of each key and marks every row with `rollup` (migration v5):
//   - a new key, or a changed one that replaces the stored version → 1 (the view counts it);
//   - a changed span that stays in its group with the same duration → 2 (counts and sums, but
//     its latency is already in the group's quantile state);
//   - an unchanged re-delivery, or an older version than the one stored → 0 (not counted);
// and a changed key also gets a correction row that takes the stored version back out of its
// group (usage_corrections, findings_daily_corrections), which the reads add in.
// What stays inexact: quantile states cannot take a value back out, so a span that moves to
// another group or changes duration leaves its old duration in the old group's quantiles; and
// two writers inserting the same key at the same moment both count it.
import type { ClickHouseClient } from '@clickhouse/client';
import { str, strList, strSet } from './clickhouse-sql.ts';
import { USAGE_KINDS } from '../core/record.ts';
import type { SpanKey, SpanVersion } from '../core/ports/storage.ts';

/** The fields of a stored span that the usage rollup depends on. */
export interface UsageFacts {
  traceId: string;
  spanId: string;
  startNs: string;
  kind: string;
  model: string;
  actionName: string;
  environment: string;
  source: string;
  status: string;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  costBits: string;
  durationBits: string;
  ingestedAtMs: number;
}

export interface UsageCorrection {
  workspace_id: string;
  hour: number;
  model: string;
  action_name: string;
  environment: string;
  source: string;
  requests: number;
  errors: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost_usd: number;
}

export interface FindingFacts {
  traceId: string;
  spanId: string;
  field: string;
  rule: string;
  startOffset: number;
  day: string;
  category: string;
  severity: string;
  createdAtMs: number;
}

export interface FindingCorrection {
  workspace_id: string;
  day: string;
  category: string;
  severity: string;
  delta: number;
}

const HOUR_NS = 3_600_000_000_000n;
const f64 = new Float64Array(1);
const u64view = new BigUint64Array(f64.buffer);

function fromBits(bits: string): number {
  u64view[0] = BigInt(bits);
  return f64[0]!;
}

function hourOf(startNs: string): number {
  return Number((BigInt(startNs) / HOUR_NS) * 3600n);
}

/** What the usage views take from a span, or null when they take nothing (not a model call). */
function usageOf(f: UsageFacts): string | null {
  if (!USAGE_KINDS.has(f.kind)) return null;
  return JSON.stringify([
    hourOf(f.startNs),
    f.model,
    f.actionName,
    f.environment,
    f.source,
    f.status === 'error',
    f.promptTokens,
    f.completionTokens,
    f.totalTokens,
    f.costBits,
    f.durationBits,
  ]);
}

/** Same group of the same hour and the same duration: the quantile state already holds it. */
function sameLatencySlot(a: UsageFacts, b: UsageFacts): boolean {
  return (
    hourOf(a.startNs) === hourOf(b.startNs) &&
    a.model === b.model &&
    a.actionName === b.actionName &&
    a.environment === b.environment &&
    a.source === b.source &&
    a.durationBits === b.durationBits
  );
}

export const spanKey = (traceId: string, spanId: string): string => JSON.stringify([traceId, spanId]);

/**
 * The `rollup` flag of each new row of one workspace, and the corrections for stored versions
 * they replace. `stored` holds the newest stored version per spanKey.
 */
export function planSpanRollup(
  workspaceId: string,
  rows: readonly UsageFacts[],
  stored: ReadonlyMap<string, UsageFacts>,
): { flags: number[]; corrections: UsageCorrection[] } {
  const flags: number[] = [];
  const corrections: UsageCorrection[] = [];
  for (const row of rows) {
    const prev = stored.get(spanKey(row.traceId, row.spanId));
    if (!prev) {
      flags.push(1);
      continue;
    }
    // ReplacingMergeTree keeps the higher version (the later insert on a tie).
    if (prev.ingestedAtMs > row.ingestedAtMs) {
      flags.push(0);
      continue;
    }
    const before = usageOf(prev);
    if (before === usageOf(row)) {
      flags.push(0);
      continue;
    }
    flags.push(before !== null && usageOf(row) !== null && sameLatencySlot(prev, row) ? 2 : 1);
    if (before !== null) {
      corrections.push({
        workspace_id: workspaceId,
        hour: hourOf(prev.startNs),
        model: prev.model,
        action_name: prev.actionName,
        environment: prev.environment,
        source: prev.source,
        requests: -1,
        errors: prev.status === 'error' ? -1 : 0,
        prompt_tokens: -prev.promptTokens,
        completion_tokens: -prev.completionTokens,
        total_tokens: -prev.totalTokens,
        cost_usd: -fromBits(prev.costBits),
      });
    }
  }
  return { flags, corrections };
}

export const findingKey = (f: Pick<FindingFacts, 'traceId' | 'spanId' | 'field' | 'rule' | 'startOffset'>): string =>
  JSON.stringify([f.traceId, f.spanId, f.field, f.rule, f.startOffset]);

/** As planSpanRollup, for findings_daily (one count per finding key, on its newest version's day). */
export function planFindingRollup(
  workspaceId: string,
  rows: readonly FindingFacts[],
  stored: ReadonlyMap<string, FindingFacts>,
): { flags: number[]; corrections: FindingCorrection[] } {
  const flags: number[] = [];
  const corrections: FindingCorrection[] = [];
  for (const row of rows) {
    const prev = stored.get(findingKey(row));
    if (!prev) {
      flags.push(1);
      continue;
    }
    if (prev.createdAtMs > row.createdAtMs) {
      flags.push(0);
      continue;
    }
    if (prev.day === row.day && prev.category === row.category && prev.severity === row.severity) {
      flags.push(0);
      continue;
    }
    flags.push(1);
    corrections.push({
      workspace_id: workspaceId,
      day: prev.day,
      category: prev.category,
      severity: prev.severity,
      delta: -1,
    });
  }
  return { flags, corrections };
}

// ---- reading the stored versions ----

// Trace ids per lookup query. Each query has a fixed cost (parsing, building the IN set, reading
// trace_days), so few large queries beat many small ones. A chunk is also bounded by the size of its
// escaped literals (a requestId may be 256 characters of backslashes, twice as long escaped; trace ids
// are counted twice, as a bound): a query over max_query_size fails as a syntax error that a retry
// would repeat forever.
const LOOKUP_CHUNK = 5000;
const LOOKUP_LIST_BYTES = 1 << 20;
/** Queries carrying a lookupChunks list: it may pass the default 256 KiB max_query_size. */
export const LOOKUP_SETTINGS = { max_query_size: String(4 << 20) };

// Output names differ from the columns: a ClickHouse alias would shadow the column everywhere in the query.
interface StoredSpanRow {
  trace_id: string;
  span_id: string;
  s_start: string;
  kind: string;
  model: string;
  action_name: string;
  environment: string;
  source: string;
  status: string;
  s_prompt: string;
  s_completion: string;
  s_total: string;
  s_cost: string;
  s_duration: string;
  s_ingested: string;
}

/** Unique ids in chunks of at most LOOKUP_CHUNK ids and LOOKUP_LIST_BYTES of escaped literals. */
export function lookupChunks(traceIds: readonly string[]): string[][] {
  const chunks: string[][] = [];
  let cur: string[] = [];
  let bytes = 0;
  for (const id of new Set(traceIds)) {
    const size = Buffer.byteLength(str(id)) + 1;
    if (cur.length && (cur.length === LOOKUP_CHUNK || bytes + size > LOOKUP_LIST_BYTES)) {
      chunks.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(id);
    bytes += size;
  }
  if (cur.length) chunks.push(cur);
  return chunks;
}

export type { SpanKey };

/**
 * Unique keys in chunks, each as the trace ids and span ids it names: at most LOOKUP_CHUNK traces and
 * LOOKUP_LIST_BYTES of escaped literals (the trace list counted twice, as a bound). Taken trace by
 * trace, so a chunk names few span ids of other traces than their own (those extra rows are ignored).
 */
export function keyChunks(keys: readonly SpanKey[]): Array<{ traceIds: string[]; spanIds: string[] }> {
  const byTrace = new Map<string, Set<string>>();
  for (const k of keys) {
    const spans = byTrace.get(k.traceId);
    if (spans) spans.add(k.spanId);
    else byTrace.set(k.traceId, new Set([k.spanId]));
  }
  const chunks: Array<{ traceIds: string[]; spanIds: Set<string> }> = [];
  let cur = { traceIds: [] as string[], spanIds: new Set<string>() };
  let bytes = 0;
  const next = () => {
    if (cur.spanIds.size) chunks.push(cur);
    cur = { traceIds: [], spanIds: new Set() };
    bytes = 0;
  };
  const size = (id: string) => Buffer.byteLength(str(id)) + 1;
  for (const [traceId, spans] of byTrace) {
    if (cur.traceIds.length === LOOKUP_CHUNK || bytes + 2 * size(traceId) > LOOKUP_LIST_BYTES) next();
    cur.traceIds.push(traceId);
    bytes += 2 * size(traceId);
    for (const spanId of spans) {
      if (cur.spanIds.has(spanId)) continue;
      if (bytes + size(spanId) > LOOKUP_LIST_BYTES) {
        next(); // the trace's other span ids in the next chunk, which names it again
        cur.traceIds.push(traceId);
        bytes += 2 * size(traceId);
      }
      cur.spanIds.add(spanId);
      bytes += size(spanId);
    }
  }
  next();
  return chunks.map((c) => ({ traceIds: c.traceIds, spanIds: [...c.spanIds] }));
}

async function chunked<T>(
  keys: readonly SpanKey[],
  read: (traceIds: string[], spanIds: string[]) => Promise<T[]>,
): Promise<T[]> {
  const out: T[] = [];
  // A loop, not push(...rows): a trace of 500k stored spans overflowed the stack as call arguments.
  for (const c of keyChunks(keys)) for (const r of await read(c.traceIds, c.spanIds)) out.push(r);
  return out;
}

/**
 * As chunked, for reads of `spans`: first which of a chunk's traces have stored spans, and on which days
 * (trace_days), then `read` for those traces only, with those days and their span ids. Random trace ids spread
 * over every granule of a day's spans: naming a batch's new traces too read the whole day as soon as one of them
 * continued a stored trace (a cost growing with the day).
 */
async function chunkedStored<T>(
  client: ClickHouseClient,
  db: string,
  ws: string,
  keys: readonly SpanKey[],
  read: (days: string[], traceIds: string[], spanIds: string[]) => Promise<T[]>,
): Promise<T[]> {
  const spansOf = new Map<string, string[]>();
  for (const k of keys) {
    const s = spansOf.get(k.traceId);
    if (s) s.push(k.spanId);
    else spansOf.set(k.traceId, [k.spanId]);
  }
  return chunked(keys, async (traceIds, spanIds) => {
    const stored = await traceDaysOf(client, db, ws, traceIds);
    if (stored.length === 0) return [];
    const ids = new Set(stored.map((r) => r.trace_id));
    // The chunk's own span ids (a large trace's are split over chunks), of the stored traces only.
    const inChunk = new Set(spanIds);
    const theirs = new Set<string>();
    for (const t of ids) for (const s of spansOf.get(t) ?? []) if (inChunk.has(s)) theirs.add(s);
    if (theirs.size === 0) return []; // the chunk names a trace whose span ids all went to the next one
    return read([...new Set(stored.map((r) => r.d))], [...ids], [...theirs]);
  });
}

/**
 * Which of these traces (one lookupChunks chunk) have stored spans, and the days those start on (trace_days): a
 * read by trace id then names only those partitions. `ws` is the workspace's SQL literal.
 */
export function traceDaysOf(
  client: ClickHouseClient,
  db: string,
  ws: string,
  traceIds: readonly string[],
): Promise<Array<{ trace_id: string; d: string }>> {
  return rows(
    client,
    `SELECT DISTINCT trace_id, toString(start_date) AS d FROM ${db}.trace_days WHERE workspace_id = ${ws} AND trace_id IN ${strSet(traceIds)}`,
  );
}

async function rows<T>(client: ClickHouseClient, query: string): Promise<T[]> {
  return (await client.query({ query, format: 'JSONEachRow', clickhouse_settings: LOOKUP_SETTINGS })).json<T>();
}

/**
 * Newest stored version of these spans (one workspace). By span id, not every stored span of their traces: a
 * batch continuing a large trace read all of it at every flush.
 */
export async function storedSpans(
  client: ClickHouseClient,
  db: string,
  workspaceId: string,
  keys: readonly SpanKey[],
): Promise<Map<string, UsageFacts>> {
  const ws = str(workspaceId);
  const found = await chunkedStored(client, db, ws, keys, (days, traceIds, spanIds) =>
    rows<StoredSpanRow>(
      client,
      `
    SELECT trace_id, span_id, toString(start_ns) AS s_start, kind, model, action_name, environment, source, status,
      toString(prompt_tokens) AS s_prompt, toString(completion_tokens) AS s_completion,
      toString(total_tokens) AS s_total, toString(cost_usd_bits) AS s_cost, toString(duration_ms_bits) AS s_duration,
      toString(ingested_at_ms) AS s_ingested
    FROM ${db}.spans
    WHERE workspace_id = ${ws} AND start_date IN ${strList(days)}
      AND trace_id IN ${strList(traceIds)} AND span_id IN ${strList(spanIds)}
    ORDER BY ingested_at_ms DESC
    LIMIT 1 BY trace_id, span_id`,
    ),
  );
  const asked = new Set(keys.map((k) => spanKey(k.traceId, k.spanId)));
  const out = new Map<string, UsageFacts>();
  for (const r of found) {
    if (!asked.has(spanKey(r.trace_id, r.span_id))) continue; // another trace's span of the same id
    out.set(spanKey(r.trace_id, r.span_id), {
      traceId: r.trace_id,
      spanId: r.span_id,
      startNs: r.s_start,
      kind: r.kind,
      model: r.model,
      actionName: r.action_name,
      environment: r.environment,
      source: r.source,
      status: r.status,
      promptTokens: Number(r.s_prompt),
      completionTokens: Number(r.s_completion),
      totalTokens: Number(r.s_total),
      costBits: r.s_cost,
      durationBits: r.s_duration,
      ingestedAtMs: Number(r.s_ingested),
    });
  }
  return out;
}

/**
 * The stored version (newest ingested_at_ms) of these spans (one workspace), one query per chunk: the trace ids
 * name the days to read through trace_days, as for storedSpans, and only the key columns are read.
 */
export async function spanVersionsOf(
  client: ClickHouseClient,
  db: string,
  workspaceId: string,
  keys: readonly SpanKey[],
): Promise<SpanVersion[]> {
  const ws = str(workspaceId);
  const found = await chunkedStored(client, db, ws, keys, (days, traceIds, spanIds) =>
    rows<{ trace_id: string; span_id: string; v: string }>(
      client,
      `
    SELECT trace_id, span_id, toString(max(ingested_at_ms)) AS v
    FROM ${db}.spans
    WHERE workspace_id = ${ws} AND start_date IN ${strList(days)}
      AND trace_id IN ${strList(traceIds)} AND span_id IN ${strList(spanIds)}
    GROUP BY trace_id, span_id`,
    ),
  );
  const asked = new Set(keys.map((k) => spanKey(k.traceId, k.spanId)));
  return found
    .filter((r) => asked.has(spanKey(r.trace_id, r.span_id))) // not another trace's span of the same id
    .map((r) => ({ traceId: r.trace_id, spanId: r.span_id, ingestedAtMs: Number(r.v) }));
}

interface StoredFindingRow {
  trace_id: string;
  span_id: string;
  field: string;
  rule: string;
  s_offset: string;
  s_day: string;
  category: string;
  severity: string;
  s_created: string;
}

/** Newest stored version of every finding of these spans (one workspace). */
export async function storedFindings(
  client: ClickHouseClient,
  db: string,
  workspaceId: string,
  keys: readonly SpanKey[],
): Promise<Map<string, FindingFacts>> {
  const found = await chunked(keys, (traceIds, spanIds) =>
    rows<StoredFindingRow>(
      client,
      `
    SELECT trace_id, span_id, field, rule, toString(start_offset) AS s_offset,
      toString(toDate(toDateTime(intDiv(created_at_ms, 1000), 'UTC'))) AS s_day, category, severity,
      toString(created_at_ms) AS s_created
    FROM ${db}.findings
    WHERE workspace_id = ${str(workspaceId)} AND trace_id IN ${strList(traceIds)} AND span_id IN ${strList(spanIds)}
    ORDER BY created_at_ms DESC
    LIMIT 1 BY trace_id, span_id, field, rule, start_offset`,
    ),
  );
  const asked = new Set(keys.map((k) => spanKey(k.traceId, k.spanId)));
  const out = new Map<string, FindingFacts>();
  for (const r of found) {
    if (!asked.has(spanKey(r.trace_id, r.span_id))) continue;
    const f: FindingFacts = {
      traceId: r.trace_id,
      spanId: r.span_id,
      field: r.field,
      rule: r.rule,
      startOffset: Number(r.s_offset),
      day: r.s_day,
      category: r.category,
      severity: r.severity,
      createdAtMs: Number(r.s_created),
    };
    out.set(findingKey(f), f);
  }
  return out;
}

/** UTC day of a millisecond time, as findings_daily buckets it. */
export function dayOfMs(ms: number): string {
  return new Date(Math.floor(ms / 86_400_000) * 86_400_000).toISOString().slice(0, 10);
}

/** Group rows by workspace, keeping their positions. */
export function byWorkspace<T>(items: readonly T[], ws: (t: T) => string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (let i = 0; i < items.length; i++) {
    const k = ws(items[i]!);
    const list = out.get(k);
    if (list) list.push(i);
    else out.set(k, [i]);
  }
  return out;
}
