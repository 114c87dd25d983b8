// ClickHouse side of the enrichment tables and analytics (schema: clickhouse-migrations.ts v3/v4).
// Same conventions as clickhouse.ts: inlined literals only via clickhouse-sql.ts, floats as
// IEEE bits on insert, UInt64 read back as decimal strings.
import type { ClickHouseClient } from '@clickhouse/client';
import type {
  AlertRecord,
  AuditRecord,
  CheckpointRecord,
  EnrichmentRecord,
  FindingRecord,
  PolicyRecord,
  VerificationRecord,
} from '../core/enrichment-records.ts';
import type {
  AlertQuery,
  AuditQuery,
  ChainPos,
  ChainState,
  FindingQuery,
  Page,
  UsageQuery,
  UsageRow,
} from '../core/ports/storage.ts';
import { str, strList, strSet, u64 } from './clickhouse-sql.ts';
import {
  byWorkspace,
  dayOfMs,
  lookupChunks,
  LOOKUP_SETTINGS,
  findingKey,
  planFindingRollup,
  storedFindings,
  type FindingCorrection,
} from './clickhouse-rollup.ts';
import { finite, wellFormed } from './codec.ts';
import { insertTsv } from './clickhouse-tsv.ts';
import { feedbackRow, securityAlertRow } from './clickhouse-signals.ts';
import {
  alertCursor,
  auditCursor,
  checkBucket,
  compareUsage,
  dayRange,
  findingCursor,
  normalizeAlertQuery,
  normalizeAuditQuery,
  normalizeFindingQuery,
  partitionEnrichment,
  toKeyPage,
  toUsageRow,
  usageGroupColumn,
  usageRange,
  USAGE_LEVELS,
  type KeyCursor,
  type ListBase,
  type UsageAgg,
} from './enrichment.ts';

const f64 = new Float64Array(1);
const u64view = new BigUint64Array(f64.buffer);
function floatBits(x: number): string {
  f64[0] = finite(x);
  return u64view[0]!.toString();
}

const DATETIME_MAX = 4_294_967_295;
const DATE_MAX = 65_535;

/** A number that is a safe integer as a UInt64 literal. */
const n64 = (n: number) => u64(String(n));

/** `(a, b, …) < (x, y, …)`: the keyset condition of a newest-first listing. */
function before(columns: readonly string[], c: KeyCursor): string {
  const values = [n64(Number(c.s)), ...c.tie.map((v) => (typeof v === 'number' ? n64(v) : str(v)))];
  return `(${columns.join(', ')}) < (${values.join(', ')})`;
}

function timeConditions(col: string, f: ListBase): string[] {
  const c: string[] = [];
  if (f.fromMs !== undefined) c.push(`${col} >= ${n64(f.fromMs)}`);
  if (f.toMs !== undefined) c.push(`${col} < ${n64(f.toMs)}`);
  return c;
}

/** The first window of time a newest-first listing reads, and how much each next one reaches further back. */
const FIRST_WINDOW_MS = 60_000;
const WINDOW_GROWTH = 16;

const and = (conds: readonly string[]) => (conds.length ? conds.join(' AND ') : '1 = 1');

// ---- read rows (UInt64 arrive as strings) ----

interface FindingRow {
  workspace_id: string;
  trace_id: string;
  span_id: string;
  field: string;
  rule: string;
  start_offset: string;
  end_offset: string;
  detector: string;
  category: string;
  severity: string;
  preview: string;
  score: number;
  action: string;
  created_at_ms: string;
}
const FINDING_COLUMNS = `workspace_id, trace_id, span_id, field, rule, start_offset, end_offset, detector, category,
  severity, preview, score, action, created_at_ms`;
function fromFinding(r: FindingRow): FindingRecord {
  return {
    recordType: 'finding',
    workspaceId: r.workspace_id,
    traceId: r.trace_id,
    spanId: r.span_id,
    detector: r.detector,
    rule: r.rule,
    category: r.category,
    severity: r.severity as FindingRecord['severity'],
    field: r.field,
    start: Number(r.start_offset),
    end: Number(r.end_offset),
    preview: r.preview,
    score: r.score,
    action: r.action,
    createdAtMs: Number(r.created_at_ms),
  };
}

interface PolicyRow {
  workspace_id: string;
  trace_id: string;
  span_id: string;
  policy_version: string;
  decision: string;
  reasons: string;
  created_at_ms: string;
}
function fromPolicy(r: PolicyRow): PolicyRecord {
  return {
    recordType: 'policy',
    workspaceId: r.workspace_id,
    traceId: r.trace_id,
    spanId: r.span_id,
    policyVersion: Number(r.policy_version),
    decision: r.decision as PolicyRecord['decision'],
    reasons: r.reasons,
    createdAtMs: Number(r.created_at_ms),
  };
}

interface AuditRow {
  workspace_id: string;
  chain_id: string;
  seq: string;
  at_ms: string;
  actor: string;
  action: string;
  route: string;
  outcome: string;
  accepted: string;
  rejected: string;
  details: string;
  prev_hash: string;
  hash: string;
}
const AUDIT_COLUMNS =
  'workspace_id, chain_id, seq, at_ms, actor, action, route, outcome, accepted, rejected, details, prev_hash, hash';
function fromAudit(r: AuditRow): AuditRecord {
  return {
    recordType: 'audit',
    workspaceId: r.workspace_id,
    chainId: r.chain_id,
    seq: Number(r.seq),
    atMs: Number(r.at_ms),
    actor: r.actor,
    action: r.action,
    route: r.route,
    outcome: r.outcome,
    accepted: Number(r.accepted),
    rejected: Number(r.rejected),
    details: r.details,
    prevHash: r.prev_hash,
    hash: r.hash,
  };
}

interface AlertRow {
  workspace_id: string;
  alert_id: string;
  rule_id: string;
  kind: string;
  severity: string;
  message: string;
  trace_id: string;
  value: number;
  threshold: number;
  window_start_ms: string;
  at_ms: string;
  delivered: string;
}
const ALERT_COLUMNS =
  'workspace_id, alert_id, rule_id, kind, severity, message, trace_id, value, threshold, window_start_ms, at_ms, delivered';
function fromAlert(r: AlertRow): AlertRecord {
  return {
    recordType: 'alert',
    workspaceId: r.workspace_id,
    alertId: r.alert_id,
    ruleId: r.rule_id,
    kind: r.kind,
    severity: r.severity as AlertRecord['severity'],
    message: r.message,
    traceId: r.trace_id,
    value: r.value,
    threshold: r.threshold,
    windowStartMs: Number(r.window_start_ms),
    atMs: Number(r.at_ms),
    delivered: r.delivered,
  };
}

interface VerificationRow {
  workspace_id: string;
  chain_id: string;
  seq: string;
  trace_id: string;
  span_ids: string[];
  span_versions: string[];
  content_hash: string;
  prev_hash: string;
  hash: string;
  created_at_ms: string;
}
const VERIFICATION_COLUMNS =
  'workspace_id, chain_id, seq, trace_id, span_ids, span_versions, content_hash, prev_hash, hash, created_at_ms';
function fromVerification(r: VerificationRow): VerificationRecord {
  return {
    recordType: 'verification',
    workspaceId: r.workspace_id,
    traceId: r.trace_id,
    spanIds: r.span_ids,
    spanVersions: r.span_versions.map(Number),
    contentHash: r.content_hash,
    chainId: r.chain_id,
    seq: Number(r.seq),
    prevHash: r.prev_hash,
    hash: r.hash,
    createdAtMs: Number(r.created_at_ms),
  };
}

interface CheckpointRow {
  workspace_id: string;
  chain_id: string;
  seq: string;
  head_hash: string;
  key_id: string;
  signature: string;
  at_ms: string;
}
function fromCheckpoint(r: CheckpointRow): CheckpointRecord {
  return {
    recordType: 'checkpoint',
    workspaceId: r.workspace_id,
    chainId: r.chain_id,
    seq: Number(r.seq),
    headHash: r.head_hash,
    keyId: r.key_id,
    signature: r.signature,
    atMs: Number(r.at_ms),
  };
}

interface UsageReadRow {
  bucket: string;
  group_key: string;
  n_requests: string;
  n_errors: string;
  prompt_tokens: string;
  completion_tokens: string;
  total_tokens: string;
  cost_usd: number;
  latency: number[];
}

interface UsageCorrectionRow {
  bucket: string;
  group_key: string;
  n_requests: string;
  n_errors: string;
  prompt_tokens: string;
  completion_tokens: string;
  total_tokens: string;
  cost_usd: number;
}

// Rows of the chained tables. They have no rollup, and a copy of one (a replay, identical) is harmless as reads
// collapse copies, so a batch of spooled records (ClickHouseStorage.recordBatch) encodes them as they come.
export const auditRow = (r: AuditRecord) => ({
  workspace_id: r.workspaceId,
  chain_id: r.chainId,
  seq: r.seq,
  at_ms: r.atMs,
  actor: r.actor,
  action: r.action,
  route: r.route,
  outcome: r.outcome,
  accepted: r.accepted,
  rejected: r.rejected,
  details: r.details,
  prev_hash: r.prevHash,
  hash: r.hash,
});
export const verificationRow = (r: VerificationRecord) => ({
  workspace_id: r.workspaceId,
  chain_id: r.chainId,
  seq: r.seq,
  trace_id: r.traceId,
  span_ids: r.spanIds,
  span_versions: r.spanVersions,
  content_hash: r.contentHash,
  prev_hash: r.prevHash,
  hash: r.hash,
  created_at_ms: r.createdAtMs,
});
export const checkpointRow = (r: CheckpointRecord) => ({
  workspace_id: r.workspaceId,
  chain_id: r.chainId,
  seq: r.seq,
  head_hash: r.headHash,
  key_id: r.keyId,
  signature: r.signature,
  at_ms: r.atMs,
});

export class ClickHouseEnrichment {
  private readonly client: ClickHouseClient;
  private readonly db: string;
  private readonly exactRollups: boolean;

  /** `db` must already be a checked identifier. */
  constructor(client: ClickHouseClient, db: string, exactRollups = true) {
    this.exactRollups = exactRollups;
    this.client = client;
    this.db = db;
  }

  private t(table: string): string {
    return `${this.db}.${table}`;
  }

  private async rows<T>(query: string, settings?: typeof LOOKUP_SETTINGS): Promise<T[]> {
    const rs = await this.client.query({
      query,
      format: 'JSONEachRow',
      ...(settings ? { clickhouse_settings: settings } : {}),
    });
    return rs.json<T>();
  }

  /** The newest time among the rows matching `conds` (null: none): where a listing's windows start. */
  private async newest(table: string, column: string, conds: readonly string[]): Promise<number | null> {
    const [r] = await this.rows<{ top: string; n: string }>(
      `SELECT max(${column}) AS top, count() AS n FROM ${this.t(table)} WHERE ${and(conds)}`,
    );
    return r && r.n !== '0' ? Number(r.top) : null;
  }

  /**
   * A newest-first page's keys: `read(since)` in windows of time reaching back from `top` that grow 16-fold until
   * one holds more than `limit` rows, or reaches `fromMs` (then `since` is null: no bound). Only the window that
   * fills the page is sorted, not every record of the workspace.
   */
  private async windows<K>(
    top: number,
    fromMs: number | undefined,
    limit: number,
    read: (since: string | null) => string,
  ): Promise<K[]> {
    for (let span = FIRST_WINDOW_MS; ; span *= WINDOW_GROWTH) {
      const from = top - span;
      const open = from <= (fromMs ?? 0);
      const keys = await this.rows<K>(read(open ? null : n64(from)));
      if (open || keys.length > limit) return keys;
    }
  }

  private async insert(table: string, values: readonly object[]): Promise<void> {
    await insertTsv(this.client, this.t(table), values);
  }

  /**
   * One insert per table, the tables in parallel. Not atomic across tables: a failed call is
   * retried whole by the writer, and every table collapses the replay (the rollup caveat in
   * clickhouse-migrations.ts v4 applies to findings_daily).
   */
  async insertEnrichment(input: EnrichmentRecord[]): Promise<void> {
    if (input.length === 0) return;
    const b = partitionEnrichment(input);
    await Promise.all([
      this.insertFindings(b.findings),
      this.insert(
        'policy_records',
        b.policies.map((r) => ({
          workspace_id: r.workspaceId,
          trace_id: r.traceId,
          span_id: r.spanId,
          policy_version: r.policyVersion,
          decision: r.decision,
          reasons: r.reasons,
          created_at_ms: r.createdAtMs,
        })),
      ),
      this.insert('audit_log', b.audits.map(auditRow)),
      this.insert(
        'alerts',
        b.alerts.map((r) => ({
          workspace_id: r.workspaceId,
          alert_id: r.alertId,
          rule_id: r.ruleId,
          kind: r.kind,
          severity: r.severity,
          message: r.message,
          trace_id: r.traceId,
          value_bits: floatBits(r.value),
          threshold_bits: floatBits(r.threshold),
          window_start_ms: r.windowStartMs,
          at_ms: r.atMs,
          delivered: r.delivered,
        })),
      ),
      this.insert('verification', b.verifications.map(verificationRow)),
      this.insert('verification_checkpoints', b.checkpoints.map(checkpointRow)),
      this.insert('feedback', b.feedback.map(feedbackRow)),
      this.insert('security_alerts', b.securityAlerts.map(securityAlertRow)),
      this.insert(
        'trace_meta',
        b.traceMetas.map((r) => ({
          workspace_id: r.workspaceId,
          trace_id: r.traceId,
          workflow_name: r.workflowName,
          group_id: r.groupId,
          metadata: r.metadata,
          organization: r.organization,
          project: r.project,
          source: r.source,
          updated_at_ms: r.updatedAtMs,
        })),
      ),
    ]);
  }

  /** Findings with their rollup flag (see clickhouse-rollup.ts), then the day-count corrections. */
  private async insertFindings(findings: FindingRecord[]): Promise<void> {
    if (findings.length === 0) return;
    const rows = findings.map((r) => ({
      workspace_id: wellFormed(r.workspaceId),
      trace_id: wellFormed(r.traceId),
      span_id: wellFormed(r.spanId),
      field: wellFormed(r.field),
      rule: wellFormed(r.rule),
      start_offset: r.start,
      end_offset: r.end,
      detector: r.detector,
      category: wellFormed(r.category),
      severity: wellFormed(r.severity),
      preview: r.preview,
      score_bits: floatBits(r.score),
      action: r.action,
      created_at_ms: r.createdAtMs,
      rollup: 1,
    }));
    const corrections: FindingCorrection[] = [];
    if (this.exactRollups)
      for (const [ws, at] of byWorkspace(rows, (r) => r.workspace_id)) {
        const facts = new Map(
          at.map((i) => {
            const r = rows[i]!;
            return [
              i,
              {
                traceId: r.trace_id,
                spanId: r.span_id,
                field: r.field,
                rule: r.rule,
                startOffset: r.start_offset,
                day: dayOfMs(r.created_at_ms),
                category: r.category,
                severity: r.severity,
                createdAtMs: r.created_at_ms,
              },
            ];
          }),
        );
        // Only the newest row per key in the batch can count: one insert must not count a key twice either.
        const newest = new Map<string, number>();
        for (const [i, f] of facts) {
          const j = newest.get(findingKey(f));
          if (j === undefined || f.createdAtMs >= facts.get(j)!.createdAtMs) newest.set(findingKey(f), i);
          rows[i]!.rollup = 0;
        }
        const keep = [...newest.values()];
        const kept = keep.map((i) => facts.get(i)!);
        const plan = planFindingRollup(ws, kept, await storedFindings(this.client, this.db, ws, kept));
        keep.forEach((i, n) => {
          rows[i]!.rollup = plan.flags[n]!;
        });
        corrections.push(...plan.corrections);
      }
    await this.insert('findings', rows);
    await this.insert('findings_daily_corrections', corrections);
  }

  /** Newest first, as listAudit: keys from windows of time, then their rows by primary key. */
  async listFindings(workspaceId: string, q: FindingQuery): Promise<Page<FindingRecord>> {
    const f = normalizeFindingQuery(q);
    const ws = str(wellFormed(workspaceId));
    const inner = [`workspace_id = ${ws}`];
    if (f.traceId !== undefined) inner.push(`trace_id = ${str(f.traceId)}`);
    if (f.category !== undefined) inner.push(`category = ${str(f.category)}`);
    if (f.detector !== undefined) inner.push(`detector = ${str(f.detector)}`);
    const key = 'trace_id, span_id, field, rule, start_offset';
    const order = `ORDER BY ${['created_at_ms', ...key.split(', ')].map((c) => `${c} DESC`).join(', ')}`;
    const outer = timeConditions('created_at_ms', f);
    if (f.cursor) outer.push(before(['created_at_ms', ...key.split(', ')], f.cursor));
    const top = f.cursor ? Number(f.cursor.s) : await this.newest('findings', 'created_at_ms', [...inner, ...outer]);
    if (top === null) return { items: [], nextCursor: null };
    type Key = { trace_id: string; span_id: string; field: string; rule: string; start_offset: string };
    // Dedup first (newest version per key), then filter on the version's time: a key re-written with a later time
    // must not show its older version. A window's lower bound may go before the dedup: a key whose newest version is
    // older than the window has none in it.
    const keys = await this.windows<Key>(
      top,
      f.fromMs,
      f.limit,
      (since) => `
      SELECT ${key} FROM (
        SELECT created_at_ms, ${key} FROM ${this.t('findings')}
        WHERE ${and(since ? [...inner, `created_at_ms >= ${since}`] : inner)}
        ORDER BY created_at_ms DESC LIMIT 1 BY ${key})
      WHERE ${and(outer)}
      ${order} LIMIT ${f.limit + 1}`,
    );
    if (keys.length === 0) return { items: [], nextCursor: null };
    // The rows of the page's traces, by primary key and FINAL (each key's newest version); their other findings are dropped.
    const want = new Set(keys.map((k) => JSON.stringify([k.trace_id, k.span_id, k.field, k.rule, k.start_offset])));
    const rows = (
      await this.rows<FindingRow>(
        `
      SELECT ${FINDING_COLUMNS} FROM ${this.t('findings')} FINAL
      WHERE workspace_id = ${ws} AND trace_id IN ${strSet([...new Set(keys.map((k) => k.trace_id))])}
      ${order}`,
        LOOKUP_SETTINGS,
      )
    ).filter((r) => want.has(JSON.stringify([r.trace_id, r.span_id, r.field, r.rule, r.start_offset])));
    return toKeyPage(rows.map(fromFinding), f.limit, findingCursor);
  }

  async findingCounts(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, number>> {
    const ids = [...new Set(traceIds.map(wellFormed))];
    const out = new Map<string, number>();
    if (ids.length === 0) return out;
    // Distinct natural keys: a finding's versions (replays) count once, as listFindings shows it once.
    const rows = await this.rows<{ trace_id: string; n: string }>(
      `SELECT trace_id, toString(count()) AS n FROM (
         SELECT DISTINCT trace_id, span_id, field, rule, start_offset FROM ${this.t('findings')}
         WHERE workspace_id = ${str(wellFormed(workspaceId))} AND trace_id IN ${strSet(ids)})
       GROUP BY trace_id`,
      LOOKUP_SETTINGS,
    );
    for (const r of rows) out.set(r.trace_id, Number(r.n));
    return out;
  }

  /** The newest decision per span of the trace, ordered by (createdAtMs, spanId). */
  async getPolicyRecords(workspaceId: string, traceId: string, spanIds?: readonly string[]): Promise<PolicyRecord[]> {
    const read = (only: string) =>
      this.rows<PolicyRow>(`
      SELECT * FROM (
        SELECT workspace_id, trace_id, span_id, policy_version, decision, reasons, created_at_ms
        FROM ${this.t('policy_records')} FINAL
        WHERE workspace_id = ${str(wellFormed(workspaceId))} AND trace_id = ${str(wellFormed(traceId))} ${only}
        ORDER BY created_at_ms DESC LIMIT 1 BY span_id)
      ORDER BY created_at_ms, span_id`);
    if (!spanIds) return (await read('')).map(fromPolicy);
    const rows: PolicyRow[] = [];
    for (const ids of lookupChunks(spanIds.map(wellFormed)))
      for (const r of await read(`AND span_id IN ${strList(ids)}`)) rows.push(r);
    return rows
      .map(fromPolicy)
      .sort((a, b) => a.createdAtMs - b.createdAtMs || (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0));
  }

  /**
   * Newest first, in two steps: the page's keys from the narrow key columns, in windows of time reaching back from
   * the cursor or the newest match (see windows), then its rows by primary key.
   */
  async listAudit(workspaceId: string, q: AuditQuery): Promise<Page<AuditRecord>> {
    const f = normalizeAuditQuery(q);
    const ws = str(wellFormed(workspaceId));
    const c = [`workspace_id = ${ws}`, ...timeConditions('at_ms', f)];
    if (f.action !== undefined) c.push(`action = ${str(f.action)}`);
    if (f.actor !== undefined) c.push(`actor = ${str(f.actor)}`);
    if (f.outcome !== undefined) c.push(`outcome = ${str(f.outcome)}`);
    if (f.cursor) c.push(before(['at_ms', 'chain_id', 'seq'], f.cursor));
    const order = 'ORDER BY at_ms DESC, chain_id DESC, seq DESC';
    const top = f.cursor ? Number(f.cursor.s) : await this.newest('audit_log', 'at_ms', c);
    if (top === null) return { items: [], nextCursor: null };
    // Append-only: a key has one content, so the filters can go before the dedup. The LIMIT stays outside the
    // subquery: on a Distributed table 18.16 applies LIMIT before LIMIT BY on each shard.
    const keys = await this.windows<{ chain_id: string; seq: string }>(
      top,
      f.fromMs,
      f.limit,
      (since) => `
      SELECT chain_id, seq FROM (
        SELECT at_ms, chain_id, seq FROM ${this.t('audit_log')}
        WHERE ${and(since ? [...c, `at_ms >= ${since}`] : c)}
        ${order} LIMIT 1 BY chain_id, seq)
      ${order} LIMIT ${f.limit + 1}`,
    );
    if (keys.length === 0) return { items: [], nextCursor: null };
    const rows = await this.rows<AuditRow>(`
      SELECT * FROM (
        SELECT ${AUDIT_COLUMNS} FROM ${this.t('audit_log')} FINAL
        WHERE workspace_id = ${ws} AND (chain_id, seq) IN (${keys.map((k) => `(${str(k.chain_id)}, ${u64(k.seq)})`).join(', ')})
        ${order} LIMIT 1 BY chain_id, seq)
      ${order}`);
    return toKeyPage(rows.map(fromAudit), f.limit, auditCursor);
  }

  async auditPage(workspaceId: string, after: ChainPos | null, limit: number): Promise<AuditRecord[]> {
    return (await this.chainPage<AuditRow>('audit_log', AUDIT_COLUMNS, workspaceId, after, limit)).map(fromAudit);
  }

  async hasAuditHash(workspaceId: string, hash: string): Promise<boolean> {
    const rows = await this.rows<{ hash: string }>(
      `SELECT hash FROM ${this.t('audit_log')} WHERE workspace_id = ${str(wellFormed(workspaceId))} AND hash = ${str(wellFormed(hash))} LIMIT 1`,
    );
    return rows.length > 0;
  }

  /** Rows of a chain table in (chain_id, seq) order after `after`: keyset pages on the sort key, each as cheap however deep. */
  private chainPage<R>(
    table: 'audit_log' | 'verification' | 'verification_checkpoints',
    columns: string,
    workspaceId: string,
    after: ChainPos | null,
    limit: number,
  ): Promise<R[]> {
    const cond = after
      ? `AND (chain_id > ${str(wellFormed(after.chainId))} OR (chain_id = ${str(wellFormed(after.chainId))} AND seq > ${Math.max(0, Math.trunc(after.seq))}))`
      : '';
    return this.rows<R>(`
      SELECT * FROM (
        SELECT ${columns} FROM ${this.t(table)} FINAL
        WHERE workspace_id = ${str(wellFormed(workspaceId))} ${cond}
        ORDER BY chain_id, seq LIMIT 1 BY chain_id, seq)
      ORDER BY chain_id, seq LIMIT ${Math.max(1, Math.trunc(limit))}`);
  }

  async listAlerts(workspaceId: string, q: AlertQuery): Promise<Page<AlertRecord>> {
    const f = normalizeAlertQuery(q);
    const inner = [`workspace_id = ${str(wellFormed(workspaceId))}`];
    if (f.kind !== undefined) inner.push(`kind = ${str(f.kind)}`);
    if (f.ruleId !== undefined) inner.push(`rule_id = ${str(f.ruleId)}`);
    const outer = timeConditions('at_ms', f);
    if (f.cursor) outer.push(before(['at_ms', 'alert_id'], f.cursor));
    const rows = await this.rows<AlertRow>(`
      SELECT ${ALERT_COLUMNS} FROM (
        SELECT ${ALERT_COLUMNS} FROM ${this.t('alerts')} FINAL
        WHERE ${and(inner)}
        ORDER BY at_ms DESC LIMIT 1 BY alert_id)
      WHERE ${and(outer)}
      ORDER BY at_ms DESC, alert_id DESC
      LIMIT ${f.limit + 1}`);
    return toKeyPage(rows.map(fromAlert), f.limit, alertCursor);
  }

  async getVerification(workspaceId: string, traceId: string): Promise<VerificationRecord[]> {
    return (await this.verificationOfTraces(workspaceId, [traceId])).get(wellFormed(traceId)) ?? [];
  }

  /**
   * Found through verification_traces (v11), by the primary key of both tables: the cost follows the ids asked for,
   * not the workspace's records. On a cluster each shard answers from its own index and records (the view fills
   * the index where the record lands).
   */
  async verificationOfTraces(
    workspaceId: string,
    traceIds: readonly string[],
  ): Promise<Map<string, VerificationRecord[]>> {
    const out = new Map<string, VerificationRecord[]>();
    const ws = str(wellFormed(workspaceId));
    for (const ids of lookupChunks(traceIds.map(wellFormed))) {
      const rows = await this.rows<VerificationRow>(
        `
        SELECT ${VERIFICATION_COLUMNS} FROM ${this.t('verification')} FINAL
        WHERE workspace_id = ${ws} AND (chain_id, seq) IN (
          SELECT chain_id, seq FROM ${this.t('verification_traces')} WHERE workspace_id = ${ws} AND trace_id IN ${strSet(ids)})
        ORDER BY chain_id, seq LIMIT 1 BY chain_id, seq`,
        LOOKUP_SETTINGS,
      );
      for (const r of rows.map(fromVerification))
        (out.get(r.traceId) ?? out.set(r.traceId, []).get(r.traceId)!).push(r);
    }
    return out;
  }

  async verificationPage(workspaceId: string, after: ChainPos | null, limit: number): Promise<VerificationRecord[]> {
    return (await this.chainPage<VerificationRow>('verification', VERIFICATION_COLUMNS, workspaceId, after, limit)).map(
      fromVerification,
    );
  }

  async checkpointPage(workspaceId: string, after: ChainPos | null, limit: number): Promise<CheckpointRecord[]> {
    return (
      await this.chainPage<CheckpointRow>(
        'verification_checkpoints',
        'workspace_id, chain_id, seq, head_hash, key_id, signature, at_ms',
        workspaceId,
        after,
        limit,
      )
    ).map(fromCheckpoint);
  }

  async verificationRange(
    workspaceId: string,
    chainId: string,
    fromSeq: number,
    toSeq: number,
  ): Promise<VerificationRecord[]> {
    const rows = await this.rows<VerificationRow>(`
      SELECT ${VERIFICATION_COLUMNS} FROM ${this.t('verification')} FINAL
      WHERE workspace_id = ${str(wellFormed(workspaceId))} AND chain_id = ${str(wellFormed(chainId))}
        AND seq >= ${Math.max(0, Math.trunc(fromSeq))} AND seq <= ${Math.max(0, Math.trunc(toSeq))}
      ORDER BY seq LIMIT 1 BY seq`);
    return rows.map(fromVerification);
  }

  async chainState(workspaceId: string, chainId: string, seq: number): Promise<ChainState> {
    const where = `workspace_id = ${str(wellFormed(workspaceId))} AND chain_id = ${str(wellFormed(chainId))}`;
    const checkpoint = (cond: string, order: string) =>
      this.rows<CheckpointRow>(`
      SELECT workspace_id, chain_id, seq, head_hash, key_id, signature, at_ms FROM ${this.t('verification_checkpoints')} FINAL
      WHERE ${where} ${cond} ORDER BY seq ${order} LIMIT 1`);
    const [[next], [lastCheckpoint], [last]] = await Promise.all([
      checkpoint(`AND seq >= ${Math.max(0, Math.trunc(seq))}`, 'ASC'),
      checkpoint('', 'DESC'),
      this.rows<{ seq: string; created_at_ms: string }>(
        `SELECT seq, created_at_ms FROM ${this.t('verification')} WHERE ${where} ORDER BY seq DESC LIMIT 1`,
      ),
    ]);
    return {
      next: next ? fromCheckpoint(next) : null,
      lastCheckpoint: lastCheckpoint ? fromCheckpoint(lastCheckpoint) : null,
      last: last ? { seq: Number(last.seq), createdAtMs: Number(last.created_at_ms) } : null,
    };
  }

  async hasVerificationHash(workspaceId: string, hash: string): Promise<boolean> {
    // The column itself, not a constant: 18.16's Distributed tables cannot select a constant under this WHERE.
    const rows = await this.rows<{ hash: string }>(
      `SELECT hash FROM ${this.t('verification')} WHERE workspace_id = ${str(wellFormed(workspaceId))} AND hash = ${str(wellFormed(hash))} LIMIT 1`,
    );
    return rows.length > 0;
  }

  async verificationWorkspaces(): Promise<string[]> {
    const rows = await this.rows<{ workspace_id: string }>(
      `SELECT DISTINCT workspace_id FROM (SELECT id AS workspace_id FROM ${this.t('workspaces')} UNION ALL SELECT workspace_id FROM ${this.t('verification')}
        UNION ALL SELECT workspace_id FROM ${this.t('spans')} UNION ALL SELECT workspace_id FROM ${this.t('audit_log')}) ORDER BY workspace_id`,
    );
    return rows.map((r) => r.workspace_id);
  }

  /**
   * Reads only the rollups: usage_hourly (merging its aggregate states, migrations v4/v5) plus
   * usage_corrections, which takes replaced span versions back out (clickhouse-rollup.ts).
   */
  async usage(workspaceId: string, q: UsageQuery): Promise<UsageRow[]> {
    const col = usageGroupColumn(q.groupBy);
    // Bucket start in seconds; days by arithmetic: 18.16's toStartOfDay turns days after 2105 into 0000-00-00.
    const bucket = checkBucket(q.bucket) === 'hour' ? 'toUInt32(hour)' : 'intDiv(toUInt32(hour), 86400) * 86400';
    const range = usageRange(q);
    const c = [`workspace_id = ${str(wellFormed(workspaceId))}`];
    // DateTime is a UInt32: keep literals in range (a bound past 2106 cannot exclude anything).
    if (range.fromSec !== undefined) c.push(`hour >= toDateTime(${n64(Math.min(range.fromSec, DATETIME_MAX))})`);
    if (range.toSec !== undefined && range.toSec <= DATETIME_MAX) c.push(`hour < toDateTime(${n64(range.toSec)})`);
    const levels = USAGE_LEVELS.join(', ');
    const rows = await this.rows<UsageReadRow>(`
      SELECT
        toString(${bucket}) AS bucket,
        ${col} AS group_key,
        countMerge(requests) AS n_requests,
        sumMerge(errors) AS n_errors,
        sumMerge(prompt_tokens_sum) AS prompt_tokens,
        sumMerge(completion_tokens_sum) AS completion_tokens,
        sumMerge(total_tokens_sum) AS total_tokens,
        sumMerge(cost_usd_total) AS cost_usd,
        quantilesMerge(${levels})(latency_ms) AS latency
      FROM ${this.t('usage_hourly')}
      WHERE ${c.join(' AND ')}
      GROUP BY bucket, group_key`);
    const fixes = await this.rows<UsageCorrectionRow>(`
      SELECT toString(${bucket}) AS bucket, ${col} AS group_key,
        toString(sum(requests)) AS n_requests, toString(sum(errors)) AS n_errors,
        toString(sum(prompt_tokens)) AS prompt_tokens, toString(sum(completion_tokens)) AS completion_tokens,
        toString(sum(total_tokens)) AS total_tokens, sum(cost_usd) AS cost_usd
      FROM ${this.t('usage_corrections')}
      WHERE ${c.join(' AND ')}
      GROUP BY bucket, group_key`);
    const fixOf = new Map(fixes.map((f) => [JSON.stringify([f.bucket, f.group_key]), f]));
    const aggs: UsageAgg[] = [];
    for (const r of rows) {
      const f = fixOf.get(JSON.stringify([r.bucket, r.group_key]));
      const a: UsageAgg = {
        bucketSec: Number(r.bucket),
        key: r.group_key,
        requests: Number(r.n_requests) + Number(f?.n_requests ?? 0),
        errors: Number(r.n_errors) + Number(f?.n_errors ?? 0),
        promptTokens: Number(r.prompt_tokens) + Number(f?.prompt_tokens ?? 0),
        completionTokens: Number(r.completion_tokens) + Number(f?.completion_tokens ?? 0),
        totalTokens: Number(r.total_tokens) + Number(f?.total_tokens ?? 0),
        costUsd: r.cost_usd + (f?.cost_usd ?? 0),
        quantiles: r.latency,
      };
      if (a.requests > 0) aggs.push(a); // a group whose every span moved elsewhere is gone
    }
    return aggs.sort(compareUsage).map(toUsageRow);
  }

  /** Reads only the rollups: findings_daily plus its corrections (see usage()). */
  async findingsDaily(
    workspaceId: string,
    q: { fromMs?: number; toMs?: number },
  ): Promise<Array<{ day: string; category: string; severity: string; count: number }>> {
    const range = dayRange(q);
    const c = [`workspace_id = ${str(wellFormed(workspaceId))}`];
    // Day numbers as Date: toDate(UInt16) would be taken as days, but 18.16 reads other ints as
    // timestamps; a 'YYYY-MM-DD' literal is unambiguous.
    const date = (d: number) => `toDate(${str(new Date(d * 86_400_000).toISOString().slice(0, 10))})`;
    // Date is a UInt16 day number: keep literals in range, as for usage().
    if (range.fromDay !== undefined) c.push(`day >= ${date(Math.min(range.fromDay, DATE_MAX))}`);
    if (range.toDay !== undefined && range.toDay <= DATE_MAX) c.push(`day < ${date(range.toDay)}`);
    // (ClickHouse aliases are visible in WHERE: the output name must not shadow `day`.)
    const rows = await this.rows<{ d: string; category: string; severity: string; n: string }>(`
      SELECT toString(day) AS d, category, severity, sum(k) AS n
      FROM (
        SELECT day, category, severity, toInt64(finding_count) AS k FROM ${this.t('findings_daily')} WHERE ${c.join(' AND ')}
        UNION ALL
        SELECT day, category, severity, delta AS k FROM ${this.t('findings_daily_corrections')} WHERE ${c.join(' AND ')}
      )
      GROUP BY day, category, severity
      HAVING n > 0
      ORDER BY day, category, severity`);
    return rows.map((r) => ({ day: r.d, category: r.category, severity: r.severity, count: Number(r.n) }));
  }
}
