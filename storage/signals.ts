// Backend-neutral pieces of feedback votes and security alerts: how a vote or an alert links to
// a trace, the security-alert listing's cursor, and feedback counts merged into usage rows. Both engines go through
// these so they answer alike.
import type { Severity } from '../core/governance.ts';
import type { FeedbackRecord, FeedbackTarget, SecurityAlertRecord } from '../core/enrichment-records.ts';
import type { SecurityAlertQuery, UsageQuery, UsageRow } from '../core/ports/storage.ts';
import { wellFormed } from './codec.ts';
import {
  decodeKeyCursor,
  encodeKeyCursor,
  type KeyCursor,
  type ListBase,
  SEVERITY_SET,
  usageRange,
} from './enrichment.ts';

const w = wellFormed;
// ---- links: what of a trace a vote or an alert may name instead of its id ----

/** The ids a trace answers to besides its own: its spans', their request ids and the provider response ids they hold. */
export interface TraceLinks {
  spanIds: Set<string>;
  requestIds: Set<string>;
  responseIds: Set<string>;
}

export function emptyLinks(): TraceLinks {
  return { spanIds: new Set(), requestIds: new Set(), responseIds: new Set() };
}

/** Adds one span's ids ('' left out). */
export function addLinks(links: TraceLinks, spanId: string, requestId: string, responseId: string): void {
  if (spanId) links.spanIds.add(spanId);
  if (requestId) links.requestIds.add(requestId);
  if (responseId) links.responseIds.add(responseId);
}

/** The (target type, id) pairs a vote without a trace id may name to be linked to a trace with these links. */
export function linkTargets(links: TraceLinks): Array<[FeedbackTarget, string]> {
  return [
    ...[...links.spanIds].map((id): [FeedbackTarget, string] => ['span', id]),
    ...[...links.responseIds].map((id): [FeedbackTarget, string] => ['response', id]),
    ...[...links.requestIds].map((id): [FeedbackTarget, string] => ['request', id]),
  ];
}

/** Whether a vote belongs to the trace: by its trace id, else by the span, response or request it names. */
export function voteLinked(v: FeedbackRecord, traceId: string, links: TraceLinks): boolean {
  if (v.traceId !== '') return v.traceId === traceId;
  if (v.targetType === 'span') return links.spanIds.has(v.targetId);
  if (v.targetType === 'response') return links.responseIds.has(v.targetId);
  if (v.targetType === 'request') return links.requestIds.has(v.targetId);
  return false;
}

/** Whether an alert belongs to the trace: by its trace id, else by its span, request or response id. */
export function alertLinked(a: SecurityAlertRecord, traceId: string, links: TraceLinks): boolean {
  if (a.traceId !== '') return a.traceId === traceId;
  return (
    (a.spanId !== '' && links.spanIds.has(a.spanId)) ||
    (a.requestId !== '' && links.requestIds.has(a.requestId)) ||
    (a.responseId !== '' && links.responseIds.has(a.responseId))
  );
}

/**
 * The standing votes linked to each of these traces, counted up and down: a vote naming a trace counts for it, one
 * naming a span, response or request for every trace whose links hold it (as voteLinked links them on a trace read).
 */
export function countVotes(
  votes: Iterable<FeedbackRecord>,
  links: ReadonlyMap<string, TraceLinks>,
): Map<string, { up: number; down: number }> {
  const out = new Map<string, { up: number; down: number }>();
  for (const t of links.keys()) out.set(t, { up: 0, down: 0 });
  const byTarget = new Map<string, string[]>();
  for (const [t, l] of links)
    for (const [type, id] of linkTargets(l)) {
      const k = `${type}\u0000${id}`;
      const list = byTarget.get(k);
      if (list) list.push(t);
      else byTarget.set(k, [t]);
    }
  for (const v of votes) {
    if (v.retracted || (v.value !== 'up' && v.value !== 'down')) continue;
    const traces = v.traceId !== '' ? [v.traceId] : (byTarget.get(`${v.targetType}\u0000${v.targetId}`) ?? []);
    for (const t of traces) {
      const c = out.get(t);
      if (c) c[v.value]++;
    }
  }
  return out;
}

/** Newest vote first, then vote key: the order of a trace's votes. */
export function byVoteTime(a: FeedbackRecord, b: FeedbackRecord): number {
  return b.votedAtMs - a.votedAtMs || (a.voteKey < b.voteKey ? 1 : a.voteKey > b.voteKey ? -1 : 0);
}

/** Newest alert first, then alert id descending: the order of every alert listing. */
export function byAlertTime(a: SecurityAlertRecord, b: SecurityAlertRecord): number {
  return b.receivedAtMs - a.receivedAtMs || (a.alertId < b.alertId ? 1 : a.alertId > b.alertId ? -1 : 0);
}

/** Pending targets grouped by type, for a reverse lookup (target id → trace id). */
export interface PendingTargets {
  span: string[];
  response: string[];
  request: string[];
}

/** Pending targets by type, each id once. */
export function pendingOf(votes: ReadonlyArray<{ targetType: FeedbackTarget; targetId: string }>): PendingTargets {
  const out = { span: new Set<string>(), response: new Set<string>(), request: new Set<string>() };
  for (const v of votes) if (v.targetType !== 'trace') out[v.targetType].add(v.targetId);
  return { span: [...out.span], response: [...out.response], request: [...out.request] };
}

/** Trace id of each pending target found, by type. */
export interface ResolvedTargets {
  span: Map<string, string>;
  response: Map<string, string>;
  request: Map<string, string>;
}

export function resolvedTrace(
  resolved: ResolvedTargets,
  v: Pick<FeedbackRecord, 'traceId' | 'targetType' | 'targetId'>,
): string {
  if (v.traceId !== '') return v.traceId;
  if (v.targetType === 'trace') return v.targetId;
  return resolved[v.targetType].get(v.targetId) ?? '';
}

// ---- security alert listing ----

export const SECURITY_ALERT_TIE = ['s'] as const;
export type SecurityAlertFilter = ListBase &
  Partial<Record<'source' | 'severity' | 'category' | 'traceId' | 'signature', string>>;

export function normalizeSecurityAlertQuery(q: SecurityAlertQuery): SecurityAlertFilter {
  const out: SecurityAlertFilter = { limit: Math.min(1000, Math.max(1, Math.trunc(q.limit) || 1)) };
  const bound = (ms: number) => Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.floor(ms)));
  if (q.fromMs !== undefined) out.fromMs = bound(q.fromMs);
  if (q.toMs !== undefined) out.toMs = bound(q.toMs);
  if (q.cursor) out.cursor = decodeKeyCursor(q.cursor, SECURITY_ALERT_TIE) as KeyCursor;
  for (const k of ['source', 'severity', 'category', 'traceId', 'signature'] as const) {
    const v = q[k];
    if (v !== undefined) out[k] = w(v);
  }
  return out;
}

export function securityAlertCursor(r: SecurityAlertRecord): string {
  return encodeKeyCursor(r.receivedAtMs, [r.alertId]);
}

// ---- feedback in usage analytics ----

/** Standing votes of one trace given in one bucket. */
export interface VoteCount {
  bucketSec: number;
  traceId: string;
  up: number;
  down: number;
}

/** The vote-time range of usage(): the same whole hours as the spans' (see usageRange). */
export function voteRange(q: UsageQuery): { fromMs?: number; toMs?: number } {
  const r = usageRange(q);
  return {
    ...(r.fromSec !== undefined ? { fromMs: r.fromSec * 1000 } : {}),
    ...(r.toSec !== undefined ? { toMs: r.toSec * 1000 } : {}),
  };
}

/** The bucket start (epoch seconds) of a vote time. */
export function voteBucket(atMs: number, bucket: UsageQuery['bucket']): number {
  const size = bucket === 'day' ? 86_400_000 : 3_600_000;
  return (Math.floor(atMs / size) * size) / 1000;
}

/**
 * Usage rows with the votes added: a vote counts in its bucket under its trace's group value (`groupOf`, '' for a
 * trace not stored); a (bucket, key) with votes but no model call gets a row of its own. Rows stay in (bucket, key)
 * order, keys compared as UTF-8 bytes.
 */
export function mergeFeedback(
  rows: UsageRow[],
  votes: readonly VoteCount[],
  groupOf: ReadonlyMap<string, string>,
): UsageRow[] {
  const at = (bucketSec: number, key: string) => `${bucketSec}\u0000${key}`;
  const byKey = new Map(rows.map((r) => [at(Date.parse(r.bucketStart) / 1000, r.key), r]));
  for (const v of votes) {
    const key = groupOf.get(v.traceId) ?? '';
    const k = at(v.bucketSec, key);
    let row = byKey.get(k);
    if (!row) {
      row = emptyUsageRow(v.bucketSec, key);
      byKey.set(k, row);
    }
    row.feedbackUp += v.up;
    row.feedbackDown += v.down;
  }
  return [...byKey.values()].sort(
    (a, b) =>
      Date.parse(a.bucketStart) - Date.parse(b.bucketStart) || Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)),
  );
}

function emptyUsageRow(bucketSec: number, key: string): UsageRow {
  return {
    bucketStart: new Date(bucketSec * 1000).toISOString(),
    key,
    requests: 0,
    errors: 0,
    errorRate: 0,
    promptTokens: 0,
    completionTokens: 0,
    totalTokens: 0,
    costUsd: 0,
    p50Ms: 0,
    p95Ms: 0,
    p99Ms: 0,
    feedbackUp: 0,
    feedbackDown: 0,
  };
}

/** A severity of the vocabulary (security alert filters compare with it). */
export function isSeverity(s: string): s is Severity {
  return SEVERITY_SET.has(s);
}
