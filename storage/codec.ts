// Backend-neutral pieces of the storage layer: value normalization, the typed attribute
// encoding, cursors, and the trace roll-up. Both backends go through these so they return
// identical results for the same input.
import type { AttrValue, Attributes, SpanRecord } from '../core/record.ts';
import { LATEST_STORABLE_NS, MAX_TOKENS, nsDiffMs, USAGE_KINDS } from '../core/record.ts';
import { badQuery } from '../core/errors.ts';
import { callRefsOf, ownershipKey, ownershipOf } from '../core/response-ownership.ts';
import type { TraceFilter, TracePage, TraceSummary } from '../core/ports/storage.ts';

/** USAGE_KINDS as an SQL list, for the roll-up and analytics queries of both backends. */
export const USAGE_KINDS_SQL = `(${[...USAGE_KINDS].map((k) => `'${k}'`).join(', ')})`;

const U64_MAX = (1n << 64n) - 1n;

/**
 * Lone UTF-16 surrogates cannot be encoded as UTF-8: ClickHouse rejects the whole insert
 * and DuckDB would mangle them. Replace them with U+FFFD so one bad string cannot poison a batch.
 */
export function wellFormed(s: string): string {
  const w = s as unknown as WellFormedString;
  return w.isWellFormed() ? s : w.toWellFormed();
}
// ES2024 String methods (Node >= 20); the project's TypeScript lib is es2023.
interface WellFormedString {
  isWellFormed(): boolean;
  toWellFormed(): string;
}

/** A decimal nanosecond string as stored (UInt64); throws on anything else. */
export function checkNs(ns: string, field: string): string {
  if (!/^\d{1,20}$/.test(ns) || BigInt(ns) > U64_MAX)
    throw new RangeError(`${field} is not a decimal uint64: ${JSON.stringify(ns)}`);
  return BigInt(ns).toString(); // canonical: no leading zeros
}

export interface ProxyResponseRow {
  workspace_id: string;
  response_id: string;
  upstream: string;
  trace_id: string;
}

/** The proxy_responses row of a span that proves a response id (core/response-ownership.ts), with its key; else null. */
export function proxyResponseRow(span: SpanRecord): { key: string; row: ProxyResponseRow } | null {
  const o = ownershipOf(span);
  if (!o) return null;
  const stored = { workspaceId: wellFormed(o.workspaceId), responseId: o.responseId, upstream: wellFormed(o.upstream) };
  return {
    key: ownershipKey(stored),
    row: {
      workspace_id: stored.workspaceId,
      response_id: stored.responseId,
      upstream: stored.upstream,
      trace_id: wellFormed(o.traceId),
    },
  };
}

/** The proxy_responses rows of a batch: one per response id, the later span's. */
export function proxyResponseRows(spans: readonly SpanRecord[]): ProxyResponseRow[] {
  const rows = new Map<string, ProxyResponseRow>();
  for (const span of spans) {
    const r = proxyResponseRow(span);
    if (r) rows.set(r.key, r.row);
  }
  return [...rows.values()];
}

export interface ProxyCallRow {
  workspace_id: string;
  id_kind: 'response' | 'request';
  call_id: string;
  trace_id: string;
  span_id: string;
}

/** The proxy_calls rows of a proxy span (TraceLinkStore.proxyCalls), one per id it names its call by. */
export function proxyCallRows(span: SpanRecord): ProxyCallRow[] {
  const at = {
    workspace_id: wellFormed(span.workspaceId),
    trace_id: wellFormed(span.traceId),
    span_id: wellFormed(span.spanId),
  };
  return callRefsOf(span).map((c) => ({ ...at, id_kind: c.kind, call_id: c.id }));
}

/** The proxy_calls rows of a batch, one per call (ids repeat only in a replayed span). */
export function proxyCallRowsOf(spans: readonly SpanRecord[]): ProxyCallRow[] {
  const rows = new Map<string, ProxyCallRow>();
  for (const span of spans) for (const r of proxyCallRows(span)) rows.set(proxyCallKey(r), r);
  return [...rows.values()];
}

/** (kind, id) order, as both engines answer TraceLinkStore.proxyCalls. */
export const byCall = (a: { kind: string; id: string }, b: { kind: string; id: string }) =>
  a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;

export const proxyCallKey = (r: ProxyCallRow) => `${r.workspace_id}\n${r.id_kind}\n${r.call_id}`;

/** Counters are non-negative integers in storage. */
export function count(n: number): number {
  // Capped: a larger value would not fit Int64 and would fail every later insert of its batch.
  return Number.isFinite(n) && n > 0 ? Math.min(Math.trunc(n), Number.MAX_SAFE_INTEGER) : 0;
}

/** A token count as stored: a count of at most MAX_TOKENS, so sums over many spans cannot wrap ClickHouse's UInt64. */
export function tokens(n: number): number {
  return Math.min(count(n), MAX_TOKENS);
}

/** NaN/Infinity cannot be stored or sent as JSON by both backends; store 0. */
export function finite(n: number): number {
  return Number.isFinite(n) ? n : 0;
}

/** Last day ClickHouse 18.16 parses into a Date: a later day would be stored as 0000-00-00. */
export const LAST_CH_DATE = '2105-12-31';

/**
 * UTC day of a nanosecond timestamp, 'YYYY-MM-DD' (ClickHouse partition/sort key), at most LAST_CH_DATE:
 * spans of 2106's first weeks share that day, and the exact start_ns filter tells them apart.
 */
export function utcDate(ns: string): string {
  const day = new Date(Number(BigInt(ns) / 1_000_000n)).toISOString().slice(0, 10);
  return day > LAST_CH_DATE ? LAST_CH_DATE : day;
}

export type AttrType = 's' | 'n' | 'b' | 'j';
export interface EncodedAttrs {
  keys: string[];
  values: string[];
  types: AttrType[];
}

/**
 * Attributes as parallel arrays of key, string form and type tag, so a typed value comes
 * back exactly: strings raw, numbers via String(), booleans 'true'/'false', anything else
 * (arrays, objects, null) as JSON. NaN/Infinity become null, as JSON (and so DuckDB) would have it.
 */
export function encodeAttrs(attrs: Attributes): EncodedAttrs {
  const out: EncodedAttrs = { keys: [], values: [], types: [] };
  for (const [k, v] of Object.entries(attrs)) {
    out.keys.push(wellFormed(k));
    if (typeof v === 'string') {
      out.values.push(wellFormed(v));
      out.types.push('s');
    } else if (typeof v === 'number' && Number.isFinite(v)) {
      out.values.push(String(v));
      out.types.push('n');
    } else if (typeof v === 'boolean') {
      out.values.push(v ? 'true' : 'false');
      out.types.push('b');
    } else {
      out.values.push(JSON.stringify(v));
      out.types.push('j');
    }
  }
  return out;
}

export function decodeAttrs(keys: readonly string[], values: readonly string[], types: readonly string[]): Attributes {
  const out: Attributes = {};
  for (let i = 0; i < keys.length; i++) {
    const raw = values[i] ?? '';
    let v: AttrValue;
    switch (types[i]) {
      case 'n':
        v = Number(raw);
        break;
      case 'b':
        v = raw === 'true';
        break;
      case 'j':
        v = JSON.parse(raw) as AttrValue;
        break;
      default:
        v = raw;
    }
    setOwn(out, keys[i] ?? '', v);
  }
  return out;
}

/** Plain JSON text of attributes for DuckDB, with top-level strings made well-formed like encodeAttrs does. */
export function attrsJson(attrs: Attributes): string {
  const clean: Attributes = {};
  for (const [k, v] of Object.entries(attrs)) setOwn(clean, wellFormed(k), typeof v === 'string' ? wellFormed(v) : v);
  return JSON.stringify(clean);
}

// `obj['__proto__'] = v` would set the prototype instead of an own key.
function setOwn(obj: Attributes, key: string, value: AttrValue): void {
  if (key === '__proto__')
    Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  else obj[key] = value;
}

/** What makes two records versions of one span (a batch keeps one per key: see latestPerSpan). */
export function spanVersionKey(r: Pick<SpanRecord, 'workspaceId' | 'traceId' | 'spanId'>): string {
  return JSON.stringify([r.workspaceId, r.traceId, r.spanId]);
}

/**
 * Collapse duplicates within one batch, keeping the highest ingestedAtMs (the later one on a
 * tie), so the batch itself obeys the same rule as replays across batches.
 */
export function latestPerSpan(rows: readonly SpanRecord[]): SpanRecord[] {
  if (rows.length < 2) return [...rows];
  const byKey = new Map<string, SpanRecord>();
  for (const r of rows) {
    const key = spanVersionKey(r);
    const prev = byKey.get(key);
    if (!prev || r.ingestedAtMs >= prev.ingestedAtMs) byKey.set(key, r);
  }
  return byKey.size === rows.length ? [...rows] : [...byKey.values()];
}

/** (traceId, spanId) order, as spanVersions answers on every backend. */
export function bySpanKey(a: { traceId: string; spanId: string }, b: { traceId: string; spanId: string }): number {
  return a.traceId < b.traceId
    ? -1
    : a.traceId > b.traceId
      ? 1
      : a.spanId < b.spanId
        ? -1
        : a.spanId > b.spanId
          ? 1
          : 0;
}

/** A trace's order (start time, then span id), as getTrace answers on every backend. */
export function byStartThenId(
  a: { startTimeNs: string; spanId: string },
  b: { startTimeNs: string; spanId: string },
): number {
  if (a.startTimeNs !== b.startTimeNs) return BigInt(a.startTimeNs) < BigInt(b.startTimeNs) ? -1 : 1;
  return a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0;
}

// ---- listTraces ----

export interface Cursor {
  s: string;
  t: string;
}

export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify({ s: c.s, t: c.t })).toString('base64url');
}

/** A cursor's fields as `read` takes them (it throws on a wrong shape), or 400 invalid_query naming `field`. */
function readCursor<T>(cursor: string, field: string, read: (v: Record<string, unknown>) => T): T {
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (v && typeof v === 'object' && !Array.isArray(v)) return read(v as Record<string, unknown>);
  } catch {
    /* fall through */
  }
  throw badQuery(field, 'invalid cursor');
}

const text = (v: unknown): string => {
  if (typeof v !== 'string') throw new TypeError('not a string');
  return v;
};

export function decodeCursor(cursor: string): Cursor {
  return readCursor(cursor, 'cursor', (v) => ({ s: checkNs(text(v.s), 'cursor'), t: text(v.t) }));
}

/** GET /api/traces/:id?spanCursor: where the next part of a trace's spans starts (after this start and span id). */
export function encodeSpanCursor(after: { startNs: string; spanId: string }): string {
  return Buffer.from(JSON.stringify({ s: after.startNs, span: after.spanId })).toString('base64url');
}

export function decodeSpanCursor(cursor: string): { startNs: string; spanId: string } {
  return readCursor(cursor, 'spanCursor', (v) => ({ startNs: checkNs(text(v.s), 'spanCursor'), spanId: text(v.span) }));
}

/**
 * A part's spans out of its candidates (in order, each with its stored size, `limit + 1` of them read): at most
 * `limit`, ending with the one whose size reaches `maxBytes`; `more` when candidates are left.
 */
export function cutPart<K extends { bytes: number }>(
  candidates: readonly K[],
  limit: number,
  maxBytes = Infinity,
): { take: K[]; more: boolean } {
  const take: K[] = [];
  let bytes = 0;
  for (const k of candidates) {
    if (take.length === limit || bytes >= maxBytes) break;
    take.push(k);
    bytes += k.bytes;
  }
  return { take, more: take.length < candidates.length };
}

/** The filter with values checked and converted, ready for either backend's SQL. */
export interface SpanFilter {
  fromNs?: string;
  toNs?: string;
  model?: string;
  actionName?: string;
  environment?: string;
  status?: string;
  source?: string;
  cursor?: Cursor;
  traceId?: string;
  feedback?: 'up' | 'down';
  limit: number;
}

/**
 * A time bound clamped to [0, just past LATEST_STORABLE_NS (2106-02-07)]: a bound such as ?to=9999-12-31 or
 * ?from=1960-01-01 would otherwise overflow UInt64 or ClickHouse's Date. Just past, so that `to` (exclusive) still
 * includes a span starting at the latest storable instant and a `from` after it matches nothing.
 */
export const clampNs = (ns: bigint): bigint => (ns < 0n ? 0n : ns > LATEST_STORABLE_NS ? LATEST_STORABLE_NS + 1n : ns);

export function normalizeFilter(f: TraceFilter): SpanFilter {
  const clamp = (ns: bigint) => clampNs(ns).toString();
  const msNs = (ms: number) => BigInt(Math.max(0, Math.floor(ms))) * 1_000_000n;
  const out: SpanFilter = { limit: Math.min(1000, Math.max(1, Math.trunc(f.limit) || 1)) };
  if (f.fromNs !== undefined) out.fromNs = clamp(f.fromNs);
  else if (f.fromMs !== undefined) out.fromNs = clamp(msNs(f.fromMs));
  if (f.toNs !== undefined) out.toNs = clamp(f.toNs);
  else if (f.toMs !== undefined) out.toNs = clamp(msNs(f.toMs));
  for (const k of ['model', 'actionName', 'environment', 'status', 'source'] as const) {
    const v = f[k];
    if (v !== undefined) out[k] = wellFormed(v);
  }
  if (f.cursor) out.cursor = decodeCursor(f.cursor);
  if (f.traceId !== undefined) out.traceId = wellFormed(f.traceId);
  if (f.feedback !== undefined) {
    if (f.feedback !== 'up' && f.feedback !== 'down') throw new RangeError(`invalid feedback filter: ${f.feedback}`);
    out.feedback = f.feedback;
  }
  return out;
}

/** Filters that match a trace when any of its spans matches (status is a trace-level filter, see listTraces). */
export function hasSpanFilter(f: SpanFilter): boolean {
  return [f.fromNs, f.toNs, f.model, f.actionName, f.environment, f.source].some((v) => v !== undefined);
}

/** One aggregated trace row as both backends compute it. */
export interface TraceAgg {
  traceId: string;
  startNs: string;
  endNs: string;
  spanCount: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  costUsd: number;
  errorCount: number;
  /** Of the first LLM span (parent '' first, then earliest start, then lowest span id); the root's when none. */
  model: string;
  // of the root-most span: parent '' first, then earliest start, then lowest span id
  name: string;
  source: string;
  actionName: string;
  environment: string;
  status: string;
}

/**
 * Float sums depend on summation order, which differs between engines; 15 significant
 * digits is far below a cent and makes both backends agree.
 */
export function roundSum(x: number): number {
  return Number.isFinite(x) ? Number(x.toPrecision(15)) : 0;
}

export function toSummary(a: TraceAgg): TraceSummary {
  return {
    traceId: a.traceId,
    name: a.name,
    startTimeNs: a.startNs,
    endTimeNs: a.endNs,
    durationMs: nsDiffMs(a.startNs, a.endNs),
    spanCount: a.spanCount,
    status: a.errorCount > 0 ? 'error' : a.status,
    errorCount: a.errorCount,
    model: a.model,
    source: a.source,
    actionName: a.actionName,
    environment: a.environment,
    promptTokens: a.promptTokens,
    completionTokens: a.completionTokens,
    totalTokens: a.totalTokens,
    costUsd: roundSum(a.costUsd),
  };
}

/** `rows` were fetched with limit + 1 so the extra one tells whether another page exists. */
export function toPage(rows: readonly TraceAgg[], limit: number): TracePage {
  const items = rows.slice(0, limit).map(toSummary);
  const last = items.at(-1);
  return {
    items,
    nextCursor: rows.length > limit && last ? encodeCursor({ s: last.startTimeNs, t: last.traceId }) : null,
  };
}
