// Backend-neutral pieces of the enrichment tables (findings, policy records, audit log, alerts, feedback votes,
// security alerts, verification records and checkpoints) and of the analytics: value normalization, the natural keys
// and which duplicate wins, query normalization, keyset cursors and the usage quantile definition. Both backends go
// through these so they return identical results.
import type {
  AlertRecord,
  AuditRecord,
  CheckpointRecord,
  EnrichmentRecord,
  FeedbackRecord,
  FindingRecord,
  PolicyRecord,
  SecurityAlertRecord,
  TraceMetaRecord,
  VerificationRecord,
} from '../core/enrichment-records.ts';
import { badQuery } from '../core/errors.ts';
import { SEVERITIES } from '../core/governance.ts';
import type { AlertQuery, AuditQuery, FindingQuery, UsageQuery, UsageRow } from '../core/ports/storage.ts';
import { count, decodeCursor, encodeCursor, finite, roundSum, wellFormed } from './codec.ts';

// ---- insert: normalize and partition by record type ----

export interface EnrichmentBatch {
  findings: FindingRecord[];
  policies: PolicyRecord[];
  audits: AuditRecord[];
  alerts: AlertRecord[];
  verifications: VerificationRecord[];
  checkpoints: CheckpointRecord[];
  feedback: FeedbackRecord[];
  securityAlerts: SecurityAlertRecord[];
  traceMetas: TraceMetaRecord[];
}

const w = wellFormed;

function normFinding(r: FindingRecord): FindingRecord {
  return {
    recordType: 'finding',
    workspaceId: w(r.workspaceId),
    traceId: w(r.traceId),
    spanId: w(r.spanId),
    detector: w(r.detector),
    rule: w(r.rule),
    category: w(r.category),
    severity: w(r.severity) as FindingRecord['severity'],
    field: w(r.field),
    start: count(r.start),
    end: count(r.end),
    preview: w(r.preview),
    score: finite(r.score),
    action: w(r.action),
    createdAtMs: count(r.createdAtMs),
  };
}

function normPolicy(r: PolicyRecord): PolicyRecord {
  return {
    recordType: 'policy',
    workspaceId: w(r.workspaceId),
    traceId: w(r.traceId),
    spanId: w(r.spanId),
    policyVersion: count(r.policyVersion),
    decision: w(r.decision) as PolicyRecord['decision'],
    reasons: w(r.reasons),
    createdAtMs: count(r.createdAtMs),
  };
}

export function normAudit(r: AuditRecord): AuditRecord {
  return {
    recordType: 'audit',
    workspaceId: w(r.workspaceId),
    chainId: w(r.chainId),
    seq: count(r.seq),
    atMs: count(r.atMs),
    actor: w(r.actor),
    action: w(r.action),
    route: w(r.route),
    outcome: w(r.outcome),
    accepted: count(r.accepted),
    rejected: count(r.rejected),
    details: w(r.details),
    prevHash: w(r.prevHash),
    hash: w(r.hash),
  };
}

function normAlert(r: AlertRecord): AlertRecord {
  return {
    recordType: 'alert',
    workspaceId: w(r.workspaceId),
    alertId: w(r.alertId),
    ruleId: w(r.ruleId),
    kind: w(r.kind),
    severity: w(r.severity) as AlertRecord['severity'],
    message: w(r.message),
    traceId: w(r.traceId),
    value: finite(r.value),
    threshold: finite(r.threshold),
    windowStartMs: count(r.windowStartMs),
    atMs: count(r.atMs),
    delivered: w(r.delivered),
  };
}

export function normVerification(r: VerificationRecord): VerificationRecord {
  return {
    recordType: 'verification',
    workspaceId: w(r.workspaceId),
    traceId: w(r.traceId),
    spanIds: r.spanIds.map(w),
    spanVersions: r.spanVersions.map(count),
    contentHash: w(r.contentHash),
    chainId: w(r.chainId),
    seq: count(r.seq),
    prevHash: w(r.prevHash),
    hash: w(r.hash),
    createdAtMs: count(r.createdAtMs),
  };
}

export function normCheckpoint(r: CheckpointRecord): CheckpointRecord {
  return {
    recordType: 'checkpoint',
    workspaceId: w(r.workspaceId),
    chainId: w(r.chainId),
    seq: count(r.seq),
    headHash: w(r.headHash),
    keyId: w(r.keyId),
    signature: w(r.signature),
    atMs: count(r.atMs),
  };
}

export function normTraceMeta(r: TraceMetaRecord): TraceMetaRecord {
  return {
    recordType: 'trace_meta',
    workspaceId: w(r.workspaceId),
    traceId: w(r.traceId),
    workflowName: w(r.workflowName),
    groupId: w(r.groupId),
    metadata: w(r.metadata),
    organization: w(r.organization),
    project: w(r.project),
    source: w(r.source),
    updatedAtMs: count(r.updatedAtMs),
  };
}

const TARGETS: ReadonlySet<string> = new Set(['trace', 'span', 'response', 'request']);

export function normFeedback(r: FeedbackRecord): FeedbackRecord {
  const value = r.value === 'up' || r.value === 'down' ? r.value : '';
  if (!TARGETS.has(r.targetType)) throw new RangeError(`feedback record: unknown targetType ${String(r.targetType)}`);
  return {
    recordType: 'feedback',
    workspaceId: w(r.workspaceId),
    voteKey: w(r.voteKey),
    voteId: w(r.voteId),
    traceId: w(r.traceId),
    targetType: r.targetType,
    targetId: w(r.targetId),
    name: w(r.name),
    value,
    retracted: r.retracted === true || value === '',
    comment: w(r.comment),
    userId: w(r.userId),
    source: w(r.source),
    metadata: w(r.metadata),
    votedAtMs: count(r.votedAtMs),
    receivedAtMs: count(r.receivedAtMs),
  };
}

export const SEVERITY_SET: ReadonlySet<string> = new Set(SEVERITIES);

export function normSecurityAlert(r: SecurityAlertRecord): SecurityAlertRecord {
  if (!SEVERITY_SET.has(r.severity)) throw new RangeError(`security_alert record: unknown severity ${r.severity}`);
  if (!['verified', 'unverified', 'unsigned'].includes(r.signature))
    throw new RangeError(`security_alert record: unknown signature ${r.signature}`);
  return {
    recordType: 'security_alert',
    workspaceId: w(r.workspaceId),
    alertId: w(r.alertId),
    source: w(r.source),
    severity: r.severity,
    rawSeverity: w(r.rawSeverity),
    title: w(r.title),
    category: w(r.category),
    externalId: w(r.externalId),
    detectedAtMs: count(r.detectedAtMs),
    receivedAtMs: count(r.receivedAtMs),
    traceId: w(r.traceId),
    spanId: w(r.spanId),
    requestId: w(r.requestId),
    responseId: w(r.responseId),
    sessionId: w(r.sessionId),
    userId: w(r.userId),
    signature: r.signature,
    secretId: w(r.secretId),
    correlation: w(r.correlation),
    body: w(r.body),
  };
}

/**
 * Collapse duplicates of one natural key within a batch the way the tables do across batches:
 * the highest version wins, the later one on a tie. Append-only records have no version
 * (every replay is identical), so the later one is kept.
 */
function latest<T>(rows: readonly T[], key: (r: T) => string, version: (r: T) => number): T[] {
  const byKey = new Map<string, T>();
  for (const r of rows) {
    const k = key(r);
    const prev = byKey.get(k);
    if (!prev || version(r) >= version(prev)) byKey.set(k, r);
  }
  return byKey.size === rows.length ? [...rows] : [...byKey.values()];
}

const key = (...parts: Array<string | number>) => JSON.stringify(parts);
const none = () => 0;

/** Normalizes every record (well-formed strings, non-negative integers, finite floats) and partitions by type. */
export function partitionEnrichment(rows: readonly EnrichmentRecord[]): EnrichmentBatch {
  const b: EnrichmentBatch = {
    findings: [],
    policies: [],
    audits: [],
    alerts: [],
    verifications: [],
    checkpoints: [],
    feedback: [],
    securityAlerts: [],
    traceMetas: [],
  };
  for (const r of rows) {
    switch (r.recordType) {
      case 'finding':
        b.findings.push(normFinding(r));
        break;
      case 'policy':
        b.policies.push(normPolicy(r));
        break;
      case 'audit':
        b.audits.push(normAudit(r));
        break;
      case 'alert':
        b.alerts.push(normAlert(r));
        break;
      case 'verification':
        b.verifications.push(normVerification(r));
        break;
      case 'checkpoint':
        b.checkpoints.push(normCheckpoint(r));
        break;
      case 'feedback':
        b.feedback.push(normFeedback(r));
        break;
      case 'security_alert':
        b.securityAlerts.push(normSecurityAlert(r));
        break;
      case 'trace_meta':
        b.traceMetas.push(normTraceMeta(r));
        break;
      default:
        throw new RangeError(
          `unknown enrichment recordType: ${JSON.stringify((r as { recordType?: unknown }).recordType)}`,
        );
    }
  }
  return {
    findings: latest(
      b.findings,
      (r) => key(r.workspaceId, r.traceId, r.spanId, r.field, r.rule, r.start),
      (r) => r.createdAtMs,
    ),
    policies: latest(
      b.policies,
      (r) => key(r.workspaceId, r.traceId, r.spanId),
      (r) => r.createdAtMs,
    ),
    audits: latest(b.audits, (r) => key(r.workspaceId, r.chainId, r.seq), none),
    alerts: latest(
      b.alerts,
      (r) => key(r.workspaceId, r.alertId),
      (r) => r.atMs,
    ),
    verifications: latest(b.verifications, (r) => key(r.workspaceId, r.chainId, r.seq), none),
    checkpoints: latest(b.checkpoints, (r) => key(r.workspaceId, r.chainId, r.seq), none),
    feedback: latest(
      b.feedback,
      (r) => key(r.workspaceId, r.voteKey),
      (r) => r.receivedAtMs,
    ),
    securityAlerts: latest(
      b.securityAlerts,
      (r) => key(r.workspaceId, r.alertId),
      (r) => r.receivedAtMs,
    ),
    traceMetas: latest(
      b.traceMetas,
      (r) => key(r.workspaceId, r.traceId),
      (r) => r.updatedAtMs,
    ),
  };
}

// ---- list queries: filters and keyset cursors ----

/**
 * The listings are newest first by (sort value DESC, tie-break parts DESC). A cursor carries the
 * last item's sort value (`s`, decimal uint64 via codec's cursor) and its tie-break parts as JSON.
 */
export type TiePart = string | number;
export interface KeyCursor {
  s: string;
  tie: TiePart[];
}

export function encodeKeyCursor(s: number, tie: readonly TiePart[]): string {
  return encodeCursor({ s: String(s), t: JSON.stringify(tie) });
}

/** `shape`: 's' for a string part, 'n' for a non-negative integer part. Throws a 400 on anything else. */
export function decodeKeyCursor(cursor: string, shape: ReadonlyArray<'s' | 'n'>): KeyCursor {
  const c = decodeCursor(cursor);
  let tie: unknown;
  try {
    tie = JSON.parse(c.t);
  } catch {
    throw badQuery('cursor', 'invalid cursor');
  }
  const ok =
    Array.isArray(tie) &&
    tie.length === shape.length &&
    tie.every((v: unknown, i) =>
      shape[i] === 's' ? typeof v === 'string' : typeof v === 'number' && Number.isSafeInteger(v) && v >= 0,
    );
  if (!ok || !/^\d{1,16}$/.test(c.s) || !Number.isSafeInteger(Number(c.s))) throw badQuery('cursor', 'invalid cursor');
  return { s: c.s, tie: tie as TiePart[] };
}

export interface ListBase {
  fromMs?: number;
  toMs?: number;
  limit: number;
  cursor?: KeyCursor;
}

function base(
  q: { fromMs?: number; toMs?: number; limit: number; cursor?: string },
  shape: ReadonlyArray<'s' | 'n'>,
): ListBase {
  const out: ListBase = { limit: Math.min(1000, Math.max(1, Math.trunc(q.limit) || 1)) };
  if (q.fromMs !== undefined) out.fromMs = msBound(q.fromMs);
  if (q.toMs !== undefined) out.toMs = msBound(q.toMs);
  if (q.cursor) out.cursor = decodeKeyCursor(q.cursor, shape);
  return out;
}

function msBound(ms: number): number {
  return Number.isFinite(ms)
    ? Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.floor(ms)))
    : ms > 0
      ? Number.MAX_SAFE_INTEGER
      : 0;
}

function strings<K extends string>(q: Partial<Record<K, string>>, keys: readonly K[]): Partial<Record<K, string>> {
  const out: Partial<Record<K, string>> = {};
  for (const k of keys) {
    const v = q[k];
    if (v !== undefined) out[k] = wellFormed(v);
  }
  return out;
}

/** Findings: newest createdAtMs first, then (traceId, spanId, field, rule, start) descending. */
export const FINDING_TIE = ['s', 's', 's', 's', 'n'] as const;
export type FindingFilter = ListBase & Partial<Record<'traceId' | 'category' | 'detector', string>>;
export function normalizeFindingQuery(q: FindingQuery): FindingFilter {
  return { ...base(q, FINDING_TIE), ...strings(q, ['traceId', 'category', 'detector']) };
}
export function findingCursor(r: FindingRecord): string {
  return encodeKeyCursor(r.createdAtMs, [r.traceId, r.spanId, r.field, r.rule, r.start]);
}

/** Audit: newest atMs first, then (chainId, seq) descending. */
export const AUDIT_TIE = ['s', 'n'] as const;
export type AuditFilter = ListBase & Partial<Record<'action' | 'actor' | 'outcome', string>>;
export function normalizeAuditQuery(q: AuditQuery): AuditFilter {
  return { ...base(q, AUDIT_TIE), ...strings(q, ['action', 'actor', 'outcome']) };
}
export function auditCursor(r: AuditRecord): string {
  return encodeKeyCursor(r.atMs, [r.chainId, r.seq]);
}

/** Alerts: newest atMs first, then alertId descending. */
export const ALERT_TIE = ['s'] as const;
export type AlertFilter = ListBase & Partial<Record<'kind' | 'ruleId', string>>;
export function normalizeAlertQuery(q: AlertQuery): AlertFilter {
  return { ...base(q, ALERT_TIE), ...strings(q, ['kind', 'ruleId']) };
}
export function alertCursor(r: AlertRecord): string {
  return encodeKeyCursor(r.atMs, [r.alertId]);
}

/** `rows` were fetched with limit + 1 so the extra one tells whether another page exists. */
export function toKeyPage<T>(
  rows: readonly T[],
  limit: number,
  cursorOf: (r: T) => string,
): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last !== undefined ? cursorOf(last) : null };
}

// ---- analytics ----

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/**
 * The time range of usage() in whole hours (epoch seconds of hour starts): an hour bucket is
 * included when it overlaps [fromMs, toMs), i.e. fromHour <= hour < toSec. ClickHouse's rollup
 * only knows hours, so DuckDB filters on the hour bucket of span start the same way; a day
 * bucket at the edge of the range therefore holds only the hours inside it.
 */
export interface HourRange {
  fromSec?: number;
  toSec?: number;
}
export function usageRange(q: UsageQuery): HourRange {
  const out: HourRange = {};
  if (q.fromMs !== undefined) out.fromSec = (Math.floor(msBound(q.fromMs) / HOUR_MS) * HOUR_MS) / 1000;
  if (q.toMs !== undefined) out.toSec = Math.ceil(msBound(q.toMs) / 1000);
  return out;
}

/** findingsDaily's range in UTC day numbers (days since the epoch): days overlapping [fromMs, toMs). */
export interface DayRange {
  fromDay?: number;
  toDay?: number;
}
export function dayRange(q: { fromMs?: number; toMs?: number }): DayRange {
  const out: DayRange = {};
  if (q.fromMs !== undefined) out.fromDay = Math.floor(msBound(q.fromMs) / DAY_MS);
  if (q.toMs !== undefined) out.toDay = Math.ceil(msBound(q.toMs) / DAY_MS);
  return out;
}

export function dayString(dayNumber: number): string {
  return new Date(dayNumber * DAY_MS).toISOString().slice(0, 10);
}

export const USAGE_GROUP_COLUMNS: Readonly<Record<UsageQuery['groupBy'], string>> = {
  model: 'model',
  actionName: 'action_name',
  environment: 'environment',
  source: 'source',
};

export function usageGroupColumn(groupBy: UsageQuery['groupBy']): string {
  const col = USAGE_GROUP_COLUMNS[groupBy];
  if (!col || !Object.hasOwn(USAGE_GROUP_COLUMNS, groupBy))
    throw badQuery('groupBy', `invalid groupBy: ${String(groupBy)}`);
  return col;
}

export function checkBucket(bucket: UsageQuery['bucket']): 'hour' | 'day' {
  if (bucket !== 'hour' && bucket !== 'day') throw badQuery('bucket', `invalid bucket: ${String(bucket)}`);
  return bucket;
}

/** Latency quantile levels; ClickHouse's rollup column type fixes them (see clickhouse-migrations.ts). */
export const USAGE_LEVELS = [0.5, 0.95, 0.99] as const;

/**
 * The quantile definition of ClickHouse's `quantiles` (ReservoirSampler::quantileInterpolated):
 * linear interpolation between the order statistics around level * (n - 1). DuckDB's quantile_cont
 * computes it with the same floating-point operations, so the usage quantiles of both backends are
 * bit-identical whenever ClickHouse's reservoir still holds every value (n <= 8192 per bucket and
 * key); the alert processor and the tests use this one. `sorted` must be ascending and non-empty.
 */
export function interpolatedQuantile(sorted: readonly number[], level: number): number {
  const n = sorted.length;
  const index = Math.max(0, Math.min(n - 1, level * (n - 1)));
  const left = Math.trunc(index);
  const right = left + 1;
  if (right === n) return sorted[left]!;
  return sorted[left]! * (right - index) + sorted[right]! * (index - left);
}

/** One aggregated usage group as both backends compute it. */
export interface UsageAgg {
  bucketSec: number;
  key: string;
  requests: number;
  errors: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  costUsd: number;
  quantiles: readonly number[]; // USAGE_LEVELS order
}

export function toUsageRow(a: UsageAgg): UsageRow {
  return {
    bucketStart: new Date(a.bucketSec * 1000).toISOString(),
    key: a.key,
    requests: a.requests,
    errors: a.errors,
    errorRate: a.requests > 0 ? a.errors / a.requests : 0,
    promptTokens: a.promptTokens,
    completionTokens: a.completionTokens,
    totalTokens: a.totalTokens,
    costUsd: roundSum(a.costUsd),
    p50Ms: a.quantiles[0] ?? 0,
    p95Ms: a.quantiles[1] ?? 0,
    p99Ms: a.quantiles[2] ?? 0,
    feedbackUp: 0,
    feedbackDown: 0,
  };
}

/** Both backends return rows in (bucket, key) order; keys compare as UTF-8 bytes like the SQL engines do. */
export function compareUsage(a: UsageAgg, b: UsageAgg): number {
  if (a.bucketSec !== b.bucketSec) return a.bucketSec - b.bucketSec;
  return Buffer.compare(Buffer.from(a.key), Buffer.from(b.key));
}
