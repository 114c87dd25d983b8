// DuckDB side of the enrichment tables and analytics (schema: duckdb-migrations.ts v3, v6).
// Analytics are plain SQL over spans/findings, defined to match ClickHouse's rollups exactly
// (see enrichment.ts for the shared definitions).
import { listValue, type DuckDBConnection, type DuckDBValue } from '@duckdb/node-api';
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
import { ENRICHMENT_TABLES, type EnrichmentTable } from './duckdb-migrations.ts';
import { USAGE_KINDS_SQL, wellFormed } from './codec.ts';
import { clearStaging, ColumnRows, stagingOf } from './duckdb-columns.ts';
import {
  alertCursor,
  auditCursor,
  checkBucket,
  compareUsage,
  dayRange,
  dayString,
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

type Params = Record<string, DuckDBValue>;
type Row = Record<string, unknown>;
type Appender = Pick<ColumnRows, 'appendVarchar' | 'appendBigInt' | 'appendDouble' | 'appendList' | 'appendBoolean'>;
/** Runs fn with the storage's one connection, one call at a time (DuckDbStorage.serial). */
/** The store's one connection, a statement at a time; `write`: a batch insert (see DuckDbStorage.writeThreads). */
export type Serial = <T>(fn: (c: DuckDBConnection) => Promise<T>, write?: boolean) => Promise<T>;

/** Values ClickHouse's quantiles state holds (a reservoir sampler): usage quantiles are exact up to this many per group. */
const RESERVOIR = 8192;

type KeyedTable = 'findings' | 'policy_records' | 'alerts' | 'feedback' | 'security_alerts' | 'trace_meta';

/** Versioned records: the newest version wins, the later write on a tie. */
function upsertSql(table: KeyedTable): string {
  const t = ENRICHMENT_TABLES[table];
  const head = `INSERT INTO ${table} SELECT * FROM ${stagingOf(table)} ON CONFLICT (${t.key.join(', ')})`;
  const keys: readonly string[] = t.key;
  const set = t.columns
    .filter((c) => !keys.includes(c))
    .map((c) => `${c} = excluded.${c}`)
    .join(', ');
  return `${head} DO UPDATE SET ${set} WHERE excluded.${t.version} >= ${table}.${t.version}`;
}

async function all<T extends Row>(c: DuckDBConnection, sql: string, params: Params = {}): Promise<T[]> {
  const reader = await c.runAndReadAll(sql, params);
  return reader.getRowObjectsJS() as T[];
}

/**
 * `(c1, c2, …) < (v1, v2, …)` spelled out as a lexicographic condition (DuckDB's row comparison
 * would do too, but this one keeps parameter types explicit).
 */
function before(columns: readonly string[], c: KeyCursor, params: Params): string {
  const values: Array<[string, DuckDBValue]> = [
    [`${columns[0]}`, BigInt(c.s)],
    ...c.tie.map((v, i): [string, DuckDBValue] => [columns[i + 1]!, typeof v === 'number' ? BigInt(v) : v]),
  ];
  const names = values.map(([, v], i) => {
    const name = `cur${i}`;
    params[name] = v;
    return typeof v === 'bigint' ? `$${name}::BIGINT` : `$${name}::VARCHAR`;
  });
  let cond = '';
  for (let i = values.length - 1; i >= 0; i--) {
    const col = values[i]![0];
    cond = cond ? `(${col} < ${names[i]} OR (${col} = ${names[i]} AND ${cond}))` : `${col} < ${names[i]}`;
  }
  return cond;
}

function timeConditions(col: string, f: ListBase, params: Params): string[] {
  const c: string[] = [];
  if (f.fromMs !== undefined) {
    c.push(`${col} >= $from_ms`);
    params.from_ms = BigInt(f.fromMs);
  }
  if (f.toMs !== undefined) {
    c.push(`${col} < $to_ms`);
    params.to_ms = BigInt(f.toMs);
  }
  return c;
}

function eq(c: string[], params: Params, col: string, value: string | undefined): void {
  if (value === undefined) return;
  c.push(`${col} = $${col}`);
  params[col] = value;
}

// ---- row mapping (BIGINT arrive as bigint) ----

function fromFinding(r: Row): FindingRecord {
  return {
    recordType: 'finding',
    workspaceId: r.workspace_id as string,
    traceId: r.trace_id as string,
    spanId: r.span_id as string,
    detector: r.detector as string,
    rule: r.rule as string,
    category: r.category as string,
    severity: r.severity as FindingRecord['severity'],
    field: r.field as string,
    start: Number(r.start_offset),
    end: Number(r.end_offset),
    preview: r.preview as string,
    score: r.score as number,
    action: r.action as string,
    createdAtMs: Number(r.created_at_ms),
  };
}

function fromPolicy(r: Row): PolicyRecord {
  return {
    recordType: 'policy',
    workspaceId: r.workspace_id as string,
    traceId: r.trace_id as string,
    spanId: r.span_id as string,
    policyVersion: Number(r.policy_version),
    decision: r.decision as PolicyRecord['decision'],
    reasons: r.reasons as string,
    createdAtMs: Number(r.created_at_ms),
  };
}

function fromAudit(r: Row): AuditRecord {
  return {
    recordType: 'audit',
    workspaceId: r.workspace_id as string,
    chainId: r.chain_id as string,
    seq: Number(r.seq),
    atMs: Number(r.at_ms),
    actor: r.actor as string,
    action: r.action as string,
    route: r.route as string,
    outcome: r.outcome as string,
    accepted: Number(r.accepted),
    rejected: Number(r.rejected),
    details: r.details as string,
    prevHash: r.prev_hash as string,
    hash: r.hash as string,
  };
}

function fromAlert(r: Row): AlertRecord {
  return {
    recordType: 'alert',
    workspaceId: r.workspace_id as string,
    alertId: r.alert_id as string,
    ruleId: r.rule_id as string,
    kind: r.kind as string,
    severity: r.severity as AlertRecord['severity'],
    message: r.message as string,
    traceId: r.trace_id as string,
    value: r.value as number,
    threshold: r.threshold as number,
    windowStartMs: Number(r.window_start_ms),
    atMs: Number(r.at_ms),
    delivered: r.delivered as string,
  };
}

function fromVerification(r: Row): VerificationRecord {
  return {
    recordType: 'verification',
    workspaceId: r.workspace_id as string,
    traceId: r.trace_id as string,
    spanIds: r.span_ids as string[],
    spanVersions: (r.span_versions as bigint[]).map(Number),
    contentHash: r.content_hash as string,
    chainId: r.chain_id as string,
    seq: Number(r.seq),
    prevHash: r.prev_hash as string,
    hash: r.hash as string,
    createdAtMs: Number(r.created_at_ms),
  };
}

function fromCheckpoint(r: Row): CheckpointRecord {
  return {
    recordType: 'checkpoint',
    workspaceId: r.workspace_id as string,
    chainId: r.chain_id as string,
    seq: Number(r.seq),
    headHash: r.head_hash as string,
    keyId: r.key_id as string,
    signature: r.signature as string,
    atMs: Number(r.at_ms),
  };
}

// ---- appends, one row in ENRICHMENT_TABLES column order ----

const big = (n: number) => BigInt(n);

const APPEND = {
  findings: (a: Appender, r: FindingRecord) => {
    a.appendVarchar(r.workspaceId);
    a.appendVarchar(r.traceId);
    a.appendVarchar(r.spanId);
    a.appendVarchar(r.field);
    a.appendVarchar(r.rule);
    a.appendBigInt(big(r.start));
    a.appendBigInt(big(r.end));
    a.appendVarchar(r.detector);
    a.appendVarchar(r.category);
    a.appendVarchar(r.severity);
    a.appendVarchar(r.preview);
    a.appendDouble(r.score);
    a.appendVarchar(r.action);
    a.appendBigInt(big(r.createdAtMs));
  },
  policy_records: (a: Appender, r: PolicyRecord) => {
    a.appendVarchar(r.workspaceId);
    a.appendVarchar(r.traceId);
    a.appendVarchar(r.spanId);
    a.appendBigInt(big(r.policyVersion));
    a.appendVarchar(r.decision);
    a.appendVarchar(r.reasons);
    a.appendBigInt(big(r.createdAtMs));
  },
  audit_log: (a: Appender, r: AuditRecord) => {
    a.appendVarchar(r.workspaceId);
    a.appendVarchar(r.chainId);
    a.appendBigInt(big(r.seq));
    a.appendBigInt(big(r.atMs));
    a.appendVarchar(r.actor);
    a.appendVarchar(r.action);
    a.appendVarchar(r.route);
    a.appendVarchar(r.outcome);
    a.appendBigInt(big(r.accepted));
    a.appendBigInt(big(r.rejected));
    a.appendVarchar(r.details);
    a.appendVarchar(r.prevHash);
    a.appendVarchar(r.hash);
  },
  alerts: (a: Appender, r: AlertRecord) => {
    a.appendVarchar(r.workspaceId);
    a.appendVarchar(r.alertId);
    a.appendVarchar(r.ruleId);
    a.appendVarchar(r.kind);
    a.appendVarchar(r.severity);
    a.appendVarchar(r.message);
    a.appendVarchar(r.traceId);
    a.appendDouble(r.value);
    a.appendDouble(r.threshold);
    a.appendBigInt(big(r.windowStartMs));
    a.appendBigInt(big(r.atMs));
    a.appendVarchar(r.delivered);
  },
  verification: (a: Appender, r: VerificationRecord) => {
    a.appendVarchar(r.workspaceId);
    a.appendVarchar(r.chainId);
    a.appendBigInt(big(r.seq));
    a.appendVarchar(r.traceId);
    a.appendList(r.spanIds);
    a.appendList(r.spanVersions.map(big));
    a.appendVarchar(r.contentHash);
    a.appendVarchar(r.prevHash);
    a.appendVarchar(r.hash);
    a.appendBigInt(big(r.createdAtMs));
  },
  verification_checkpoints: (a: Appender, r: CheckpointRecord) => {
    a.appendVarchar(r.workspaceId);
    a.appendVarchar(r.chainId);
    a.appendBigInt(big(r.seq));
    a.appendVarchar(r.headHash);
    a.appendVarchar(r.keyId);
    a.appendVarchar(r.signature);
    a.appendBigInt(big(r.atMs));
  },
  feedback: (a: Appender, r: FeedbackRecord) => {
    for (const v of [r.workspaceId, r.voteKey, r.voteId, r.traceId, r.targetType, r.targetId, r.name, r.value])
      a.appendVarchar(v);
    a.appendBoolean(r.retracted);
    for (const v of [r.comment, r.userId, r.source, r.metadata]) a.appendVarchar(v);
    a.appendBigInt(big(r.votedAtMs));
    a.appendBigInt(big(r.receivedAtMs));
  },
  security_alerts: (a: Appender, r: SecurityAlertRecord) => {
    for (const v of [r.workspaceId, r.alertId, r.source, r.severity, r.rawSeverity, r.title, r.category, r.externalId])
      a.appendVarchar(v);
    a.appendBigInt(big(r.detectedAtMs));
    a.appendBigInt(big(r.receivedAtMs));
    for (const v of [r.traceId, r.spanId, r.requestId, r.responseId, r.sessionId, r.userId, r.signature])
      a.appendVarchar(v);
    for (const v of [r.secretId, r.correlation, r.body]) a.appendVarchar(v);
  },
  trace_meta: (a: Appender, r: TraceMetaRecord) => {
    a.appendVarchar(r.workspaceId);
    a.appendVarchar(r.traceId);
    a.appendVarchar(r.workflowName);
    a.appendVarchar(r.groupId);
    a.appendVarchar(r.metadata);
    a.appendVarchar(r.organization);
    a.appendVarchar(r.project);
    a.appendVarchar(r.source);
    a.appendBigInt(big(r.updatedAtMs));
  },
} as const;

function rowsFor(cols: ColumnRows, table: EnrichmentTable, rows: readonly unknown[]): ColumnRows {
  const append = APPEND[table] as (a: Appender, r: unknown) => void;
  for (const r of rows) {
    append(cols, r);
    cols.endRow();
  }
  return cols;
}

type ChainedTable = 'audit_log' | 'verification' | 'verification_checkpoints';
type ChainedRecord = Pick<AuditRecord, 'workspaceId' | 'chainId' | 'seq'>;
const topKey = (table: ChainedTable, r: ChainedRecord) => `${table}\u0000${r.workspaceId}\u0000${r.chainId}`;

function raiseTop(tops: Map<string, number>, table: ChainedTable, r: ChainedRecord): void {
  const k = topKey(table, r);
  if (r.seq > (tops.get(k) ?? -1)) tops.set(k, r.seq);
}

/**
 * The records of `rows` not stored yet. A chain's records are written in seq order (by the one writer of its
 * run), so one above the chain's highest stored seq is new: that top is read once per chain and then kept up
 * by the writes (topsOf), and only a record at or below it (a replay of a spooled segment, or an earlier record
 * arriving late) is looked up. Exact whatever the order, as the primary key before v6 was.
 */
async function newOnly<R extends ChainedRecord>(
  c: DuckDBConnection,
  tops: Map<string, number>,
  table: ChainedTable,
  rows: readonly R[],
): Promise<R[]> {
  const unknown = new Set<string>(); // chain ids with a (workspace, chain) not seen yet
  for (const r of rows) {
    const k = topKey(table, r);
    if (!tops.has(k)) {
      tops.set(k, -1);
      unknown.add(r.chainId);
    }
  }
  if (unknown.size) {
    const found = await all<{ workspace_id: string; chain_id: string; top: bigint }>(
      c,
      `SELECT workspace_id, chain_id, max(seq) AS top
      FROM ${table} WHERE chain_id IN (SELECT unnest($chains)) GROUP BY workspace_id, chain_id`,
      { chains: listValue([...unknown]) },
    );
    for (const f of found)
      raiseTop(tops, table, { workspaceId: f.workspace_id, chainId: f.chain_id, seq: Number(f.top) });
  }
  const below = rows.filter((r) => r.seq <= tops.get(topKey(table, r))!);
  if (below.length === 0) return [...rows];
  const stored = new Set(
    (
      await all<{ workspace_id: string; chain_id: string; seq: bigint }>(
        c,
        `SELECT workspace_id, chain_id, seq FROM ${table}
    WHERE chain_id IN (SELECT unnest($chains)) AND seq IN (SELECT unnest($seqs))`,
        {
          chains: listValue([...new Set(below.map((r) => r.chainId))]),
          seqs: listValue([...new Set(below.map((r) => BigInt(r.seq)))]),
        },
      )
    ).map((h) => `${h.workspace_id}\u0000${h.chain_id}\u0000${h.seq}`),
  );
  return rows.filter((r) => !stored.has(`${r.workspaceId}\u0000${r.chainId}\u0000${r.seq}`));
}

export class DuckDbEnrichment {
  private readonly serial: Serial;
  /** Per connection: a reopened database starts with none. */
  private readonly tops = new WeakMap<DuckDBConnection, Map<string, number>>();

  constructor(serial: Serial) {
    this.serial = serial;
  }

  /**
   * One statement per table, all tables in one transaction: the call is atomic. Keyed tables are upserted; the
   * append-only ones (audit, verification, checkpoints) are appended, less the records already stored (newOnly).
   */
  async insertEnrichment(input: EnrichmentRecord[]): Promise<void> {
    if (input.length === 0) return;
    const b = partitionEnrichment(input); // also collapses in-batch duplicates: ON CONFLICT cannot touch a row twice
    const keyed: Array<[KeyedTable, readonly unknown[]]> = [
      ['findings', b.findings],
      ['policy_records', b.policies],
      ['alerts', b.alerts],
      ['feedback', b.feedback],
      ['security_alerts', b.securityAlerts],
      ['trace_meta', b.traceMetas],
    ];
    const chained: Array<[ChainedTable, readonly ChainedRecord[]]> = [
      ['audit_log', b.audits],
      ['verification', b.verifications],
      ['verification_checkpoints', b.checkpoints],
    ];
    await this.serial(async (c) => {
      const tops = this.topsOf(c);
      const appended: Array<[ChainedTable, readonly ChainedRecord[]]> = [];
      await c.run('BEGIN TRANSACTION');
      try {
        for (const [table, rows] of keyed) {
          if (rows.length === 0) continue;
          const cols = rowsFor(await ColumnRows.forTable(c, table), table, rows);
          await cols.fillStaging(c, table);
          await c.run(upsertSql(table));
        }
        for (const [table, given] of chained) {
          const rows = given.length ? await newOnly(c, tops, table, given) : given;
          if (rows.length === 0) continue;
          await rowsFor(await ColumnRows.forTable(c, table), table, rows).appendInto(c, table);
          appended.push([table, rows]);
        }
        await c.run('COMMIT');
      } catch (err) {
        await c.run('ROLLBACK').catch(() => undefined);
        tops.clear(); // whatever the outcome, the next call asks the table again
        throw err;
      }
      for (const [table, rows] of appended) for (const r of rows) raiseTop(tops, table, r);
      for (const [table, rows] of keyed) if (rows.length) await clearStaging(c, table); // their memory back now
    }, true);
  }

  /** The highest seq stored per (table, workspace, chain), as this connection has seen it (see newOnly). */
  private topsOf(c: DuckDBConnection): Map<string, number> {
    let m = this.tops.get(c);
    if (!m) this.tops.set(c, (m = new Map()));
    return m;
  }

  async listFindings(workspaceId: string, q: FindingQuery): Promise<Page<FindingRecord>> {
    const f = normalizeFindingQuery(q);
    const params: Params = { ws: wellFormed(workspaceId), lim: f.limit + 1 };
    const c = ['workspace_id = $ws', ...timeConditions('created_at_ms', f, params)];
    eq(c, params, 'trace_id', f.traceId);
    eq(c, params, 'category', f.category);
    eq(c, params, 'detector', f.detector);
    const order = ['created_at_ms', 'trace_id', 'span_id', 'field', 'rule', 'start_offset'];
    if (f.cursor) c.push(before(order, f.cursor, params));
    const rows = await this.serial((conn) =>
      all(
        conn,
        `SELECT * FROM findings WHERE ${c.join(' AND ')}
      ORDER BY ${order.map((o) => `${o} DESC`).join(', ')} LIMIT $lim`,
        params,
      ),
    );
    return toKeyPage(rows.map(fromFinding), f.limit, findingCursor);
  }

  async findingCounts(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, number>> {
    const ids = [...new Set(traceIds.map(wellFormed))];
    const out = new Map<string, number>();
    if (ids.length === 0) return out;
    const rows = await this.serial((conn) =>
      all(
        conn,
        `SELECT trace_id, count(*) AS n FROM findings
         WHERE workspace_id = $ws AND trace_id IN (SELECT unnest($ids)) GROUP BY trace_id`,
        { ws: wellFormed(workspaceId), ids: listValue(ids) },
      ),
    );
    for (const r of rows) out.set(String(r.trace_id), Number(r.n));
    return out;
  }

  /** The newest decision per span of the trace, ordered by (createdAtMs, spanId). */
  async getPolicyRecords(workspaceId: string, traceId: string, spanIds?: readonly string[]): Promise<PolicyRecord[]> {
    if (spanIds?.length === 0) return [];
    const params: Params = { ws: wellFormed(workspaceId), t: wellFormed(traceId) };
    // A list of span ids as one parameter (a part of a large trace names up to TRACEGATE_MAX_TRACE_SPANS), as a
    // semi-join: list_contains compared every row with every id (5x slower at 5,000 ids).
    if (spanIds) params.ids = listValue(spanIds.map(wellFormed));
    const rows = await this.serial((c) =>
      all(
        c,
        `SELECT * FROM policy_records WHERE workspace_id = $ws AND trace_id = $t
      ${spanIds ? 'AND span_id IN (SELECT unnest($ids))' : ''} ORDER BY created_at_ms, span_id`,
        params,
      ),
    );
    return rows.map(fromPolicy);
  }

  async listAudit(workspaceId: string, q: AuditQuery): Promise<Page<AuditRecord>> {
    const f = normalizeAuditQuery(q);
    const params: Params = { ws: wellFormed(workspaceId), lim: f.limit + 1 };
    const c = ['workspace_id = $ws', ...timeConditions('at_ms', f, params)];
    eq(c, params, 'action', f.action);
    eq(c, params, 'actor', f.actor);
    eq(c, params, 'outcome', f.outcome);
    if (f.cursor) c.push(before(['at_ms', 'chain_id', 'seq'], f.cursor, params));
    const rows = await this.serial((conn) =>
      all(
        conn,
        `SELECT * FROM audit_log WHERE ${c.join(' AND ')}
      ORDER BY at_ms DESC, chain_id DESC, seq DESC LIMIT $lim`,
        params,
      ),
    );
    return toKeyPage(rows.map(fromAudit), f.limit, auditCursor);
  }

  async auditPage(workspaceId: string, after: ChainPos | null, limit: number): Promise<AuditRecord[]> {
    return (await this.chainPage('audit_log', workspaceId, after, limit)).map(fromAudit);
  }

  async hasAuditHash(workspaceId: string, hash: string): Promise<boolean> {
    const rows = await this.serial((c) =>
      all(c, 'SELECT 1 AS x FROM audit_log WHERE workspace_id = $ws AND hash = $h LIMIT 1', {
        ws: wellFormed(workspaceId),
        h: wellFormed(hash),
      }),
    );
    return rows.length > 0;
  }

  /** Rows of a chain table in (chain_id, seq) order after `after`: keyset pages, so each costs the same however deep. */
  private chainPage(
    table: 'audit_log' | 'verification' | 'verification_checkpoints',
    workspaceId: string,
    after: ChainPos | null,
    limit: number,
  ) {
    const params: Params = { ws: wellFormed(workspaceId), lim: BigInt(Math.max(1, Math.trunc(limit))) };
    let cond = '';
    if (after) {
      Object.assign(params, { ac: wellFormed(after.chainId), as: BigInt(Math.max(0, Math.trunc(after.seq))) });
      cond = 'AND (chain_id > $ac OR (chain_id = $ac AND seq > $as))';
    }
    return this.serial((c) =>
      all(c, `SELECT * FROM ${table} WHERE workspace_id = $ws ${cond} ORDER BY chain_id, seq LIMIT $lim`, params),
    );
  }

  async listAlerts(workspaceId: string, q: AlertQuery): Promise<Page<AlertRecord>> {
    const f = normalizeAlertQuery(q);
    const params: Params = { ws: wellFormed(workspaceId), lim: f.limit + 1 };
    const c = ['workspace_id = $ws', ...timeConditions('at_ms', f, params)];
    eq(c, params, 'kind', f.kind);
    eq(c, params, 'rule_id', f.ruleId);
    if (f.cursor) c.push(before(['at_ms', 'alert_id'], f.cursor, params));
    const rows = await this.serial((conn) =>
      all(
        conn,
        `SELECT * FROM alerts WHERE ${c.join(' AND ')}
      ORDER BY at_ms DESC, alert_id DESC LIMIT $lim`,
        params,
      ),
    );
    return toKeyPage(rows.map(fromAlert), f.limit, alertCursor);
  }

  async getVerification(workspaceId: string, traceId: string): Promise<VerificationRecord[]> {
    const rows = await this.serial((c) =>
      all(
        c,
        `SELECT * FROM verification WHERE workspace_id = $ws AND trace_id = $t
      ORDER BY chain_id, seq`,
        { ws: wellFormed(workspaceId), t: wellFormed(traceId) },
      ),
    );
    return rows.map(fromVerification);
  }

  async verificationOfTraces(
    workspaceId: string,
    traceIds: readonly string[],
  ): Promise<Map<string, VerificationRecord[]>> {
    const out = new Map<string, VerificationRecord[]>();
    if (traceIds.length === 0) return out;
    // One list parameter, not one per id: faster with thousands of ids.
    const rows = await this.serial((c) =>
      all(
        c,
        `SELECT * FROM verification WHERE workspace_id = $ws
      AND trace_id IN (SELECT unnest($ids)) ORDER BY chain_id, seq`,
        { ws: wellFormed(workspaceId), ids: listValue(traceIds.map(wellFormed)) },
      ),
    );
    for (const r of rows.map(fromVerification)) (out.get(r.traceId) ?? out.set(r.traceId, []).get(r.traceId)!).push(r);
    return out;
  }

  async verificationPage(workspaceId: string, after: ChainPos | null, limit: number): Promise<VerificationRecord[]> {
    return (await this.chainPage('verification', workspaceId, after, limit)).map(fromVerification);
  }

  async checkpointPage(workspaceId: string, after: ChainPos | null, limit: number): Promise<CheckpointRecord[]> {
    return (await this.chainPage('verification_checkpoints', workspaceId, after, limit)).map(fromCheckpoint);
  }

  async verificationRange(
    workspaceId: string,
    chainId: string,
    fromSeq: number,
    toSeq: number,
  ): Promise<VerificationRecord[]> {
    const rows = await this.serial((c) =>
      all(
        c,
        'SELECT * FROM verification WHERE workspace_id = $ws AND chain_id = $c AND seq BETWEEN $a AND $b ORDER BY seq',
        {
          ws: wellFormed(workspaceId),
          c: wellFormed(chainId),
          a: BigInt(Math.max(0, fromSeq)),
          b: BigInt(Math.max(0, toSeq)),
        },
      ),
    );
    return rows.map(fromVerification);
  }

  async chainState(workspaceId: string, chainId: string, seq: number): Promise<ChainState> {
    const params = { ws: wellFormed(workspaceId), c: wellFormed(chainId) };
    const where = 'workspace_id = $ws AND chain_id = $c';
    return this.serial(async (c) => {
      const [next] = await all(
        c,
        `SELECT * FROM verification_checkpoints WHERE ${where} AND seq >= $s ORDER BY seq LIMIT 1`,
        { ...params, s: BigInt(Math.max(0, seq)) },
      );
      const [lastCheckpoint] = await all(
        c,
        `SELECT * FROM verification_checkpoints WHERE ${where} ORDER BY seq DESC LIMIT 1`,
        params,
      );
      const [last] = await all(
        c,
        `SELECT seq, created_at_ms FROM verification WHERE ${where} ORDER BY seq DESC LIMIT 1`,
        params,
      );
      return {
        next: next ? fromCheckpoint(next) : null,
        lastCheckpoint: lastCheckpoint ? fromCheckpoint(lastCheckpoint) : null,
        last: last ? { seq: Number(last.seq), createdAtMs: Number(last.created_at_ms) } : null,
      };
    });
  }

  async hasVerificationHash(workspaceId: string, hash: string): Promise<boolean> {
    const rows = await this.serial((c) =>
      all(c, 'SELECT 1 AS x FROM verification WHERE workspace_id = $ws AND hash = $h LIMIT 1', {
        ws: wellFormed(workspaceId),
        h: wellFormed(hash),
      }),
    );
    return rows.length > 0;
  }

  async verificationWorkspaces(): Promise<string[]> {
    const rows = await this.serial((c) =>
      all<{ workspace_id: string }>(
        c,
        `SELECT DISTINCT workspace_id FROM (SELECT id AS workspace_id FROM workspaces UNION ALL SELECT workspace_id FROM verification
        UNION ALL SELECT workspace_id FROM spans UNION ALL SELECT workspace_id FROM audit_log) ORDER BY workspace_id`,
      ),
    );
    return rows.map((r) => r.workspace_id);
  }

  /**
   * Plain SQL over spans, defined as ClickHouse's usage_hourly rollup: hour bucket of span start
   * (UTC), errors = status 'error', Kahan-summed cost, and the latency quantiles of ClickHouse's
   * `quantiles` state: exact while a group holds at most its reservoir's 8,192 durations, with
   * ClickHouse's interpolation (quantile_cont does the same float operations); beyond, from a uniform
   * sample of about 8,192 of them (picked by row hash, so the same on every read). Holding every duration
   * (a list) grew with the workspace until it ran out of the memory limit.
   */
  async usage(workspaceId: string, q: UsageQuery): Promise<UsageRow[]> {
    const col = usageGroupColumn(q.groupBy);
    const bucket = checkBucket(q.bucket) === 'hour' ? 'h' : '(h // 86400) * 86400';
    const range = usageRange(q);
    const params: Params = { ws: wellFormed(workspaceId) };
    const c: string[] = [];
    if (range.fromSec !== undefined) {
      c.push('h >= $from_sec');
      params.from_sec = BigInt(range.fromSec);
    }
    if (range.toSec !== undefined) {
      c.push('h < $to_sec');
      params.to_sec = BigInt(range.toSec);
    }
    const spans = `(SELECT ${bucket} AS bucket, k, status, prompt_tokens, completion_tokens, total_tokens, cost_usd, duration_ms, rid FROM (
        SELECT (start_ns // 3600000000000)::BIGINT * 3600 AS h, ${col} AS k, status,
          prompt_tokens, completion_tokens, total_tokens, cost_usd, duration_ms, rowid AS rid
        FROM spans WHERE workspace_id = $ws AND kind IN ${USAGE_KINDS_SQL})
      ${c.length ? `WHERE ${c.join(' AND ')}` : ''})`;
    // The sample's group sizes come from a window, not a join with the groups: DuckDB built a join's hash table on
    // the spans side when its estimates were off, and ran out of memory.
    const rows = await this.serial((conn) =>
      all(
        conn,
        `
      SELECT g.*, q.quantiles FROM (
        SELECT bucket, k,
          count(*) AS requests,
          count(*) FILTER (WHERE status = 'error') AS errors,
          sum(prompt_tokens) AS prompt_tokens,
          sum(completion_tokens) AS completion_tokens,
          sum(total_tokens) AS total_tokens,
          fsum(cost_usd) AS cost_usd
        FROM ${spans} GROUP BY ALL) g
      LEFT JOIN (
        SELECT bucket, k, quantile_cont(duration_ms, [${USAGE_LEVELS.join(', ')}]) AS quantiles
        FROM (SELECT bucket, k, duration_ms, rid, count(*) OVER (PARTITION BY bucket, k) AS n FROM ${spans})
        WHERE n <= ${RESERVOIR} OR hash(rid) % n::UBIGINT < ${RESERVOIR}
        GROUP BY ALL) q ON q.bucket = g.bucket AND q.k = g.k`,
        params,
      ),
    );
    const aggs: UsageAgg[] = rows.map((r) => ({
      bucketSec: Number(r.bucket),
      key: r.k as string,
      requests: Number(r.requests),
      errors: Number(r.errors),
      promptTokens: Number(r.prompt_tokens),
      completionTokens: Number(r.completion_tokens),
      totalTokens: Number(r.total_tokens),
      costUsd: r.cost_usd as number,
      quantiles: (r.quantiles as number[] | null) ?? [],
    }));
    return aggs.sort(compareUsage).map(toUsageRow);
  }

  async findingsDaily(
    workspaceId: string,
    q: { fromMs?: number; toMs?: number },
  ): Promise<Array<{ day: string; category: string; severity: string; count: number }>> {
    const range = dayRange(q);
    const params: Params = { ws: wellFormed(workspaceId) };
    const c = ['workspace_id = $ws'];
    if (range.fromDay !== undefined) {
      c.push('created_at_ms // 86400000 >= $from_day');
      params.from_day = BigInt(range.fromDay);
    }
    if (range.toDay !== undefined) {
      c.push('created_at_ms // 86400000 < $to_day');
      params.to_day = BigInt(range.toDay);
    }
    const rows = await this.serial((conn) =>
      all(
        conn,
        `
      SELECT created_at_ms // 86400000 AS d, category, severity, count(*) AS n
      FROM findings WHERE ${c.join(' AND ')}
      GROUP BY ALL ORDER BY d, category, severity`,
        params,
      ),
    );
    return rows.map((r) => ({
      day: dayString(Number(r.d)),
      category: r.category as string,
      severity: r.severity as string,
      count: Number(r.n),
    }));
  }
}
