// Backend-neutral parts of the training export's scan (TrainingStore): the hash both engines index, which index rows
// still name a span's stored version, and a coach span's session.
import { createHash } from 'node:crypto';
import type {
  SignalStore,
  TraceLinkStore,
  TrainingFilter,
  TrainingKey,
  TrainingPage,
  TrainingScan,
  TrainingTrace,
} from '../core/ports/storage.ts';
import type { SpanRecord } from '../core/record.ts';

/**
 * The index's hash of a text: bytes 9–16 of the MD5 of its UTF-8, as a little-endian 64-bit number in decimal, which
 * is what ClickHouse's reinterpretAsUInt64(substring(MD5(s), 9, 8)) and DuckDB's md5_number_lower(s) compute.
 */
export function textHash(text: string): string {
  return createHash('md5').update(text, 'utf8').digest().readBigUInt64LE(8).toString();
}

/**
 * The newest version of spans of these traces: `spanIds` (any when absent), of `kind` (any when absent); `perTrace`:
 * only each trace's first that many (by start, then span id), so a page never holds every tool span of its traces.
 */
export type NewestSpans = (
  workspaceId: string,
  traceIds: readonly string[],
  only: { spanIds?: readonly string[]; kind?: string; perTrace?: number },
) => Promise<SpanRecord[]>;

/** 2^64: one past the largest hash. */
export const HASH_SPACE = 1n << 64n;

/**
 * Whether an index row names this span's stored version: the index keeps every version, so a span changed since
 * (other text, no longer trainable or not a model call) or gone has rows left behind that no longer count. The
 * filter is checked again on the stored version, as the row's own columns may be an earlier version's.
 */
export function isCurrent(key: TrainingKey, span: SpanRecord | undefined, f: TrainingFilter): span is SpanRecord {
  return (
    span?.trainable === true &&
    span.kind === 'llm' &&
    textHash(span.prompt) === key.promptHash &&
    textHash(span.response) === key.responseHash &&
    matchesFilter(span, f)
  );
}

function matchesFilter(s: SpanRecord, f: TrainingFilter): boolean {
  const start = BigInt(s.startTimeNs);
  return (
    (f.fromNs === undefined || start >= f.fromNs) &&
    (f.toNs === undefined || start < f.toNs) &&
    (f.model === undefined || s.model === f.model) &&
    (f.actionName === undefined || s.actionName === f.actionName) &&
    (f.environment === undefined || s.environment === f.environment) &&
    (f.source === undefined || s.source === f.source) &&
    (!f.curated || s.trainingPreferred)
  );
}

/** Keys in scan order: prompt hash, response hash (as numbers), trace id, span id. */
export function compareKeys(a: TrainingKey, b: TrainingKey): number {
  const n = (x: string, y: string) => {
    const d = BigInt(x) - BigInt(y);
    return d < 0n ? -1 : d > 0n ? 1 : 0;
  };
  return (
    n(a.promptHash, b.promptHash) ||
    n(a.responseHash, b.responseHash) ||
    (a.traceId < b.traceId ? -1 : a.traceId > b.traceId ? 1 : 0) ||
    (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0)
  );
}

/** Index rows with the same key (versions not yet collapsed, replays) once each. */
export function distinctKeys(keys: readonly TrainingKey[]): TrainingKey[] {
  const out: TrainingKey[] = [];
  for (const k of keys) {
    const prev = out.at(-1);
    if (!prev || compareKeys(prev, k) !== 0) out.push(k);
  }
  return out;
}

/** A coach span's session (parameters.coachSessionId, as the native mapper stores parameters); '' when none. */
export function coachSessionOf(span: Pick<SpanRecord, 'attributes'>): string {
  const p = span.attributes.parameters;
  if (p === null || typeof p !== 'object' || Array.isArray(p)) return '';
  const id = p.coachSessionId;
  return typeof id === 'string' ? id : '';
}

/** A page's traces with what nothing was read for: no votes, no group, no tools. */
export function emptyTraces(traceIds: Iterable<string>): Map<string, TrainingTrace> {
  const out = new Map<string, TrainingTrace>();
  for (const t of traceIds) out.set(t, { up: 0, down: 0, groupId: '', tools: [] });
  return out;
}

/** Tool spans by trace, each trace's in start order (then span id), at most `max`. */
export function toolsByTrace(spans: readonly SpanRecord[], max: number): Map<string, SpanRecord[]> {
  const out = new Map<string, SpanRecord[]>();
  for (const s of spans) {
    const list = out.get(s.traceId);
    if (list) list.push(s);
    else out.set(s.traceId, [s]);
  }
  for (const [t, list] of out) {
    list.sort((a, b) => {
      const d = BigInt(a.startTimeNs) - BigInt(b.startTimeNs);
      return d < 0n ? -1 : d > 0n ? 1 : a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0;
    });
    out.set(t, list.slice(0, max));
  }
  return out;
}

/** What an engine reads a page's traces from: its signals and trace-link modules, and its newest-span lookup. */
export interface PageTraceSources {
  signals: Pick<SignalStore, 'voteCounts'>;
  links: Pick<TraceLinkStore, 'traceMeta'>;
  newest: NewestSpans;
}

/** Votes, group ids and tool spans of the traces of a page's rows (both engines). */
export async function pageTraces(
  src: PageTraceSources,
  ws: string,
  rows: TrainingPage['rows'],
  scan: TrainingScan,
): Promise<TrainingPage['traces']> {
  const ids = [...new Set(rows.map((r) => r.span.traceId))];
  const out = emptyTraces(ids);
  if (ids.length === 0) return out;
  if (scan.votes)
    for (const [t, c] of await src.signals.voteCounts(ws, ids)) {
      const entry = out.get(t);
      if (entry) [entry.up, entry.down] = [c.up, c.down];
    }
  for (const [t, meta] of await src.links.traceMeta(ws, ids)) {
    const entry = out.get(t);
    if (entry) entry.groupId = meta.groupId;
  }
  if (scan.tools > 0)
    for (const [t, tools] of toolsByTrace(
      await src.newest(ws, ids, { kind: 'tool', perTrace: scan.tools }),
      scan.tools,
    )) {
      const entry = out.get(t);
      if (entry) entry.tools = tools;
    }
  return out;
}
