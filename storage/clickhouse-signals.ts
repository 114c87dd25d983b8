// ClickHouse side of feedback votes, security alerts, webhook signing secrets and accepted deliveries (schema:
// clickhouse-migrations.ts v12). Same conventions as clickhouse.ts: literals only through clickhouse-sql.ts.
import { randomUUID } from 'node:crypto';
import type { ClickHouseClient } from '@clickhouse/client';
import type { FeedbackRecord, FeedbackTarget, SecurityAlertRecord } from '../core/enrichment-records.ts';
import type { Severity } from '../core/governance.ts';
import type {
  DeliveryClaim,
  Page,
  SecurityAlertQuery,
  UsageQuery,
  UsageRow,
  WebhookSecretRecord,
} from '../core/ports/storage.ts';
import { str, strList, u64 } from './clickhouse-sql.ts';
import { LOOKUP_SETTINGS, lookupChunks, traceDaysOf } from './clickhouse-rollup.ts';
import { insertTsv } from './clickhouse-tsv.ts';
import { count, USAGE_KINDS_SQL, wellFormed } from './codec.ts';
import { toKeyPage, usageGroupColumn } from './enrichment.ts';
import {
  addLinks,
  alertLinked,
  byAlertTime,
  byVoteTime,
  countVotes,
  emptyLinks,
  linkTargets,
  mergeFeedback,
  normalizeSecurityAlertQuery,
  pendingOf,
  type PendingTargets,
  type ResolvedTargets,
  resolvedTrace,
  securityAlertCursor,
  type TraceLinks,
  type VoteCount,
  voteBucket,
  voteLinked,
  voteRange,
} from './signals.ts';

const n64 = (n: number) => u64(String(Math.max(0, Math.trunc(n))));
const and = (conds: readonly string[]) => (conds.length ? conds.join(' AND ') : '1 = 1');

export const feedbackRow = (r: FeedbackRecord) => ({
  workspace_id: r.workspaceId,
  vote_key: r.voteKey,
  vote_id: r.voteId,
  trace_id: r.traceId,
  target_type: r.targetType,
  target_id: r.targetId,
  name: r.name,
  value: r.value,
  retracted: r.retracted ? 1 : 0,
  comment: r.comment,
  user_id: r.userId,
  source: r.source,
  metadata: r.metadata,
  voted_at_ms: r.votedAtMs,
  received_at_ms: r.receivedAtMs,
});

export const securityAlertRow = (r: SecurityAlertRecord) => ({
  workspace_id: r.workspaceId,
  alert_id: r.alertId,
  source: r.source,
  severity: r.severity,
  raw_severity: r.rawSeverity,
  title: r.title,
  category: r.category,
  external_id: r.externalId,
  detected_at_ms: r.detectedAtMs,
  received_at_ms: r.receivedAtMs,
  trace_id: r.traceId,
  span_id: r.spanId,
  request_id: r.requestId,
  response_id: r.responseId,
  session_id: r.sessionId,
  user_id: r.userId,
  signature: r.signature,
  secret_id: r.secretId,
  correlation: r.correlation,
  body: r.body,
});

const FEEDBACK_COLUMNS = `workspace_id, vote_key, vote_id, trace_id, target_type, target_id, name, value, retracted,
  comment, user_id, source, metadata, voted_at_ms, received_at_ms`;
type FeedbackRow = Omit<ReturnType<typeof feedbackRow>, 'voted_at_ms' | 'received_at_ms'> & {
  voted_at_ms: string;
  received_at_ms: string;
};
function fromFeedback(r: FeedbackRow): FeedbackRecord {
  return {
    recordType: 'feedback',
    workspaceId: r.workspace_id,
    voteKey: r.vote_key,
    voteId: r.vote_id,
    traceId: r.trace_id,
    targetType: r.target_type as FeedbackTarget,
    targetId: r.target_id,
    name: r.name,
    value: r.value as FeedbackRecord['value'],
    retracted: Number(r.retracted) === 1,
    comment: r.comment,
    userId: r.user_id,
    source: r.source,
    metadata: r.metadata,
    votedAtMs: Number(r.voted_at_ms),
    receivedAtMs: Number(r.received_at_ms),
  };
}

/** Every column but the body, which the trace read leaves out ('' in its records). */
const ALERT_HEAD = `workspace_id, alert_id, source, severity, raw_severity, title, category, external_id,
  detected_at_ms, received_at_ms, trace_id, span_id, request_id,
  response_id, session_id, user_id, signature, secret_id, correlation`;
type AlertRow = Omit<ReturnType<typeof securityAlertRow>, 'detected_at_ms' | 'received_at_ms' | 'body'> & {
  detected_at_ms: string;
  received_at_ms: string;
  body?: string;
};
function fromAlert(r: AlertRow): SecurityAlertRecord {
  return {
    recordType: 'security_alert',
    workspaceId: r.workspace_id,
    alertId: r.alert_id,
    source: r.source,
    severity: r.severity as Severity,
    rawSeverity: r.raw_severity,
    title: r.title,
    category: r.category,
    externalId: r.external_id,
    detectedAtMs: Number(r.detected_at_ms),
    receivedAtMs: Number(r.received_at_ms),
    traceId: r.trace_id,
    spanId: r.span_id,
    requestId: r.request_id,
    responseId: r.response_id,
    sessionId: r.session_id,
    userId: r.user_id,
    signature: r.signature as SecurityAlertRecord['signature'],
    secretId: r.secret_id,
    correlation: r.correlation,
    body: r.body ?? '',
  };
}

// Versions of webhook_secrets rows: strictly increasing within the process, so a revocation written in the same
// millisecond as the secret still wins.
let lastVersion = 0;
function nextVersion(atLeast = 0): number {
  lastVersion = Math.max(Date.now() * 1000, lastVersion + 1, atLeast);
  return lastVersion;
}

export class ClickHouseSignals {
  private readonly client: ClickHouseClient;
  private readonly db: string;
  private readonly usageOf: (workspaceId: string, q: UsageQuery) => Promise<UsageRow[]>;

  /** `db` must already be a checked identifier; `usage` answers the usage rows votes are added to. */
  constructor(
    client: ClickHouseClient,
    db: string,
    usage: (workspaceId: string, q: UsageQuery) => Promise<UsageRow[]>,
  ) {
    this.client = client;
    this.db = db;
    this.usageOf = usage;
  }

  private t(table: string): string {
    return `${this.db}.${table}`;
  }

  private async rows<T>(query: string): Promise<T[]> {
    const rs = await this.client.query({ query, format: 'JSONEachRow', clickhouse_settings: LOOKUP_SETTINGS });
    return rs.json<T>();
  }

  // ---- links ----

  async responseTraces(workspaceId: string, responseIds: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const ws = str(wellFormed(workspaceId));
    for (const ids of lookupChunks(responseIds.map(wellFormed))) {
      const rows = await this.rows<{ response_id: string; t: string }>(
        `SELECT response_id, any(trace_id) AS t FROM ${this.t('proxy_responses')}
         WHERE workspace_id = ${ws} AND response_id IN ${strList(ids)} GROUP BY response_id`,
      );
      for (const r of rows) out.set(r.response_id, r.t);
    }
    return out;
  }

  async spanTraces(workspaceId: string, spanIds: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const ws = str(wellFormed(workspaceId));
    for (const ids of lookupChunks(spanIds.map(wellFormed))) {
      const rows = await this.rows<{ span_id: string; t: string }>(
        `SELECT span_id, any(trace_id) AS t FROM ${this.t('spans')}
         WHERE workspace_id = ${ws} AND span_id IN ${strList(ids)} GROUP BY span_id`,
      );
      for (const r of rows) out.set(r.span_id, r.t);
    }
    return out;
  }

  /** The trace's span ids, request ids and the response ids its spans hold (gen_ai.response.id). */
  private async traceLinks(ws: string, traceId: string): Promise<TraceLinks> {
    const links = emptyLinks();
    const days = [...new Set((await traceDaysOf(this.client, this.db, ws, [traceId])).map((r) => r.d))];
    if (days.length === 0) return links;
    const rows = await this.rows<{ span_id: string; request_id: string; r: string }>(
      `SELECT DISTINCT span_id, request_id, attr_values[indexOf(attr_keys, 'gen_ai.response.id')] AS r
       FROM ${this.t('spans')} WHERE workspace_id = ${ws} AND start_date IN ${strList(days)} AND trace_id = ${str(traceId)}`,
    );
    for (const r of rows) addLinks(links, r.span_id, r.request_id, r.r);
    return links;
  }

  /**
   * Trace ids of pending targets: span and request ids from the spans, response ids from the proxy's index first,
   * then from the spans that hold them (gen_ai.response.id). A scan of the workspace's spans, for pending ones only.
   */
  private async resolve(ws: string, pending: PendingTargets): Promise<ResolvedTargets> {
    const out: ResolvedTargets = { span: new Map(), response: new Map(), request: new Map() };
    const bySpans = async (column: string, ids: string[], into: Map<string, string>) => {
      for (const chunk of lookupChunks(ids)) {
        const rows = await this.rows<{ k: string; t: string }>(
          `SELECT ${column} AS k, any(trace_id) AS t FROM ${this.t('spans')}
           WHERE workspace_id = ${ws} AND ${column} IN ${strList(chunk)} GROUP BY k`,
        );
        for (const r of rows) into.set(r.k, r.t);
      }
    };
    if (pending.span.length) await bySpans('span_id', pending.span, out.span);
    if (pending.request.length) await bySpans('request_id', pending.request, out.request);
    if (pending.response.length) {
      for (const chunk of lookupChunks(pending.response)) {
        const rows = await this.rows<{ response_id: string; t: string }>(
          `SELECT response_id, any(trace_id) AS t FROM ${this.t('proxy_responses')}
           WHERE workspace_id = ${ws} AND response_id IN ${strList(chunk)} GROUP BY response_id`,
        );
        for (const r of rows) out.response.set(r.response_id, r.t);
      }
      const left = pending.response.filter((id) => !out.response.has(id));
      const attr = `attr_values[indexOf(attr_keys, 'gen_ai.response.id')]`;
      for (const chunk of lookupChunks(left)) {
        const rows = await this.rows<{ k: string; t: string }>(
          `SELECT k, any(trace_id) AS t FROM (
             SELECT trace_id, ${attr} AS k FROM ${this.t('spans')}
             WHERE workspace_id = ${ws} AND has(attr_keys, 'gen_ai.response.id'))
           WHERE k IN ${strList(chunk)} GROUP BY k`,
        );
        for (const r of rows) out.response.set(r.k, r.t);
      }
    }
    return out;
  }

  // ---- feedback ----

  /** The newest version of each vote whose versions `match` selects (any version), as a subquery's rows. */
  private newestVotes(ws: string, match: string, columns = FEEDBACK_COLUMNS): string {
    // The keys first (any version matching), then every version of those keys: a vote whose newest version moved
    // elsewhere (a re-vote by id on another target) must not be counted where an older one was.
    return `SELECT ${columns} FROM ${this.t('feedback')}
      WHERE workspace_id = ${ws} AND vote_key IN (SELECT vote_key FROM ${this.t('feedback')} WHERE workspace_id = ${ws} AND ${match})
      ORDER BY received_at_ms DESC LIMIT 1 BY vote_key`;
  }

  async traceFeedback(workspaceId: string, traceId: string): Promise<FeedbackRecord[]> {
    const ws = str(wellFormed(workspaceId));
    const id = wellFormed(traceId);
    const links = await this.traceLinks(ws, id);
    const targets = linkTargets(links);
    const votes = new Map<string, FeedbackRecord>();
    // The direct votes, then the pending ones naming the trace's spans, responses or requests, a chunk at a time.
    const chunks: string[] = [`trace_id = ${str(id)}`];
    for (let i = 0; i < targets.length; i += 2000) {
      const part = targets.slice(i, i + 2000).map(([t, v]) => `(${str(t)}, ${str(v)})`);
      chunks.push(`trace_id = '' AND (target_type, target_id) IN (${part.join(', ')})`);
    }
    for (const match of chunks) {
      const rows = await this.rows<FeedbackRow>(`SELECT * FROM (${this.newestVotes(ws, match)}) WHERE retracted = 0`);
      for (const r of rows) votes.set(r.vote_key, fromFeedback(r));
    }
    return [...votes.values()].filter((v) => voteLinked(v, id, links)).sort(byVoteTime);
  }

  /** The standing votes linked to each of these traces, counted (the training export's selection, a page at a time). */
  async voteCounts(
    workspaceId: string,
    traceIds: readonly string[],
  ): Promise<Map<string, { up: number; down: number }>> {
    const ws = str(wellFormed(workspaceId));
    const out = new Map<string, { up: number; down: number }>();
    for (const ids of lookupChunks([...new Set(traceIds.map(wellFormed))])) {
      const links = new Map(ids.map((t) => [t, emptyLinks()]));
      const days = [...new Set((await traceDaysOf(this.client, this.db, ws, ids)).map((r) => r.d))];
      if (days.length) {
        const rows = await this.rows<{ trace_id: string; span_id: string; request_id: string; r: string }>(
          `SELECT DISTINCT trace_id, span_id, request_id, attr_values[indexOf(attr_keys, 'gen_ai.response.id')] AS r
           FROM ${this.t('spans')} WHERE workspace_id = ${ws} AND start_date IN ${strList(days)} AND trace_id IN ${strList(ids)}`,
        );
        for (const r of rows) {
          const l = links.get(r.trace_id);
          if (l) addLinks(l, r.span_id, r.request_id, r.r);
        }
      }
      const targets = [...links.values()].flatMap(linkTargets);
      const matches = [`trace_id IN ${strList(ids)}`];
      for (let i = 0; i < targets.length; i += 2000) {
        const part = targets.slice(i, i + 2000).map(([t, v]) => `(${str(t)}, ${str(v)})`);
        matches.push(`trace_id = '' AND (target_type, target_id) IN (${part.join(', ')})`);
      }
      const votes = new Map<string, FeedbackRecord>();
      for (const match of matches) {
        const rows = await this.rows<FeedbackRow>(`SELECT * FROM (${this.newestVotes(ws, match)}) WHERE retracted = 0`);
        for (const r of rows) votes.set(r.vote_key, fromFeedback(r));
      }
      for (const [t, c] of countVotes(votes.values(), links)) out.set(t, c);
    }
    return out;
  }

  /** The standing votes' (vote key, trace id as sent, target) of a value, for the trace list's feedback filter. */
  async votedTraces(workspaceId: string, value: 'up' | 'down'): Promise<{ direct: string; resolved: string[] }> {
    const ws = str(wellFormed(workspaceId));
    const standing = `SELECT vote_key, trace_id AS t, target_type AS tt, target_id AS ti, value AS v, retracted AS r
      FROM ${this.t('feedback')} WHERE workspace_id = ${ws} ORDER BY received_at_ms DESC LIMIT 1 BY vote_key`;
    const direct = `SELECT t FROM (${standing}) WHERE r = 0 AND v = ${str(value)} AND t != ''`;
    const pending = await this.rows<{ tt: FeedbackTarget; ti: string }>(
      `SELECT DISTINCT tt, ti FROM (${standing}) WHERE r = 0 AND v = ${str(value)} AND t = ''`,
    );
    const resolved = await this.resolve(ws, pendingOf(pending.map((p) => ({ targetType: p.tt, targetId: p.ti }))));
    const traces = new Set<string>();
    for (const p of pending) {
      const t = resolvedTrace(resolved, { traceId: '', targetType: p.tt, targetId: p.ti });
      if (t) traces.add(t);
    }
    return { direct, resolved: [...traces] };
  }

  /** The usage rows with the standing votes given in the range added (storage/signals.ts mergeFeedback). */
  async usage(workspaceId: string, q: UsageQuery): Promise<UsageRow[]> {
    const rows = await this.usageOf(workspaceId, q);
    const ws = str(wellFormed(workspaceId));
    const range = voteRange(q);
    const c = ['r = 0'];
    if (range.fromMs !== undefined) c.push(`vat >= ${n64(range.fromMs)}`);
    if (range.toMs !== undefined) c.push(`vat < ${n64(range.toMs)}`);
    const size = q.bucket === 'day' ? 86_400_000 : 3_600_000;
    const grouped = await this.rows<{ b: string; t: string; tt: FeedbackTarget; ti: string; up: string; down: string }>(
      `SELECT toString(intDiv(vat, ${size}) * ${size / 1000}) AS b, t, tt, ti,
         countIf(v = 'up') AS up, countIf(v = 'down') AS down
       FROM (
         SELECT vote_key, trace_id AS t, target_type AS tt, target_id AS ti, value AS v, retracted AS r, voted_at_ms AS vat
         FROM ${this.t('feedback')} WHERE workspace_id = ${ws} ORDER BY received_at_ms DESC LIMIT 1 BY vote_key)
       WHERE ${and(c)}
       GROUP BY b, t, tt, ti`,
    );
    if (grouped.length === 0) return rows;
    const resolved = await this.resolve(
      ws,
      pendingOf(grouped.filter((g) => g.t === '').map((g) => ({ targetType: g.tt, targetId: g.ti }))),
    );
    const votes: VoteCount[] = grouped.map((g) => ({
      bucketSec: voteBucket(Number(g.b) * 1000, q.bucket),
      traceId: resolvedTrace(resolved, { traceId: g.t, targetType: g.tt, targetId: g.ti }),
      up: Number(g.up),
      down: Number(g.down),
    }));
    const traces = [...new Set(votes.map((v) => v.traceId).filter((t) => t !== ''))];
    return mergeFeedback(rows, votes, await this.groupOf(ws, traces, usageGroupColumn(q.groupBy)));
  }

  /** Each trace's group value: of its first model call in list order, of its root-most span when it has none. */
  private async groupOf(ws: string, traceIds: readonly string[], column: string): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const ids of lookupChunks(traceIds)) {
      const days = [...new Set((await traceDaysOf(this.client, this.db, ws, ids)).map((r) => r.d))];
      if (days.length === 0) continue;
      const rows = await this.rows<{ trace_id: string; g: string }>(
        `SELECT trace_id, argMin(${column}, tuple(kind NOT IN ${USAGE_KINDS_SQL}, parent_span_id != '', start_ns, span_id)) AS g
         FROM ${this.t('spans')} FINAL
         WHERE workspace_id = ${ws} AND start_date IN ${strList(days)} AND trace_id IN ${strList(ids)}
         GROUP BY trace_id`,
      );
      for (const r of rows) out.set(r.trace_id, r.g);
    }
    return out;
  }

  // ---- security alerts ----

  async traceSecurityAlerts(workspaceId: string, traceId: string, limit: number): Promise<SecurityAlertRecord[]> {
    const ws = str(wellFormed(workspaceId));
    const id = wellFormed(traceId);
    const links = await this.traceLinks(ws, id);
    const found = new Map<string, SecurityAlertRecord>();
    const matches = [`trace_id = ${str(id)}`];
    const pendingBy = (column: string, ids: Set<string>) => {
      for (const chunk of lookupChunks([...ids])) matches.push(`trace_id = '' AND ${column} IN ${strList(chunk)}`);
    };
    pendingBy('span_id', links.spanIds);
    pendingBy('request_id', links.requestIds);
    pendingBy('response_id', links.responseIds);
    const cap = Math.max(1, Math.trunc(limit));
    for (const match of matches) {
      const rows = await this.rows<AlertRow>(
        `SELECT * FROM (
           SELECT ${ALERT_HEAD} FROM ${this.t('security_alerts')} WHERE workspace_id = ${ws} AND ${match}
           ORDER BY received_at_ms DESC LIMIT 1 BY alert_id)
         ORDER BY received_at_ms DESC, alert_id DESC LIMIT ${cap}`,
      );
      for (const r of rows) found.set(r.alert_id, fromAlert(r));
    }
    return [...found.values()]
      .filter((a) => alertLinked(a, id, links))
      .sort(byAlertTime)
      .slice(0, cap);
  }

  async listSecurityAlerts(workspaceId: string, q: SecurityAlertQuery): Promise<Page<SecurityAlertRecord>> {
    const f = normalizeSecurityAlertQuery(q);
    const inner = [`workspace_id = ${str(wellFormed(workspaceId))}`];
    const eq = (column: string, v: string | undefined) => {
      if (v !== undefined) inner.push(`${column} = ${str(v)}`);
    };
    eq('source', f.source);
    eq('severity', f.severity);
    eq('category', f.category);
    eq('trace_id', f.traceId);
    eq('signature', f.signature);
    const outer: string[] = [];
    if (f.fromMs !== undefined) outer.push(`received_at_ms >= ${n64(f.fromMs)}`);
    if (f.toMs !== undefined) outer.push(`received_at_ms < ${n64(f.toMs)}`);
    if (f.cursor) {
      const s = n64(Number(f.cursor.s));
      const t = str(String(f.cursor.tie[0]));
      outer.push(`(received_at_ms < ${s} OR (received_at_ms = ${s} AND alert_id < ${t}))`);
    }
    const rows = await this.rows<AlertRow>(`
      SELECT * FROM (
        SELECT ${ALERT_HEAD}, body FROM ${this.t('security_alerts')}
        WHERE ${and(inner)}
        ORDER BY received_at_ms DESC LIMIT 1 BY alert_id)
      WHERE ${and(outer)}
      ORDER BY received_at_ms DESC, alert_id DESC
      LIMIT ${f.limit + 1}`);
    return toKeyPage(rows.map(fromAlert), f.limit, securityAlertCursor);
  }

  // ---- webhook signing secrets ----

  async putWebhookSecret(rec: WebhookSecretRecord): Promise<void> {
    await this.writeSecret(rec, nextVersion());
  }

  private async writeSecret(rec: WebhookSecretRecord, version: number): Promise<void> {
    await insertTsv(this.client, this.t('webhook_secrets'), [
      {
        secret_id: wellFormed(rec.secretId),
        workspace_id: wellFormed(rec.workspaceId),
        sealed: wellFormed(rec.sealed),
        created_at_ms: count(rec.createdAtMs),
        revoked_at_ms: count(rec.revokedAtMs),
        version,
      },
    ]);
  }

  private async readSecrets(where: string): Promise<Array<WebhookSecretRecord & { version: number }>> {
    const rows = await this.rows<{
      secret_id: string;
      workspace_id: string;
      sealed: string;
      created_at_ms: string;
      revoked_at_ms: string;
      version: string;
    }>(
      `SELECT secret_id, workspace_id, sealed, created_at_ms, revoked_at_ms, version
       FROM (SELECT * FROM ${this.t('webhook_secrets')} WHERE ${where} ORDER BY version DESC LIMIT 1 BY secret_id)
       ORDER BY created_at_ms, secret_id`,
    );
    return rows.map((r) => ({
      secretId: r.secret_id,
      workspaceId: r.workspace_id,
      sealed: r.sealed,
      createdAtMs: Number(r.created_at_ms),
      revokedAtMs: Number(r.revoked_at_ms),
      version: Number(r.version),
    }));
  }

  async getWebhookSecret(secretId: string): Promise<WebhookSecretRecord | null> {
    const [s] = await this.readSecrets(`secret_id = ${str(wellFormed(secretId))}`);
    return s ? withoutVersion(s) : null;
  }

  async listWebhookSecrets(workspaceId?: string): Promise<WebhookSecretRecord[]> {
    const where = workspaceId === undefined ? '1 = 1' : `workspace_id = ${str(wellFormed(workspaceId))}`;
    return (await this.readSecrets(where)).map(withoutVersion);
  }

  async revokeWebhookSecret(secretId: string, atMs: number): Promise<boolean> {
    const [s] = await this.readSecrets(`secret_id = ${str(wellFormed(secretId))}`);
    if (!s) return false;
    if (s.revokedAtMs !== 0) return true;
    await this.writeSecret({ ...s, revokedAtMs: count(atMs) || 1 }, nextVersion(s.version + 1));
    return true;
  }

  // ---- accepted deliveries ----

  /**
   * First writer wins: each claim is a row of its own (a claimant id in the key), written synchronously (one insert
   * for the call), then the keys' rows are read back; a claim wins only when it is the one row of its key. Of two
   * claims racing, the one that read before the other's row landed wins and the other loses; when both read both,
   * both lose (never two winners: the caller has stored the record already, and a replay of it changes nothing).
   */
  async claimDeliveries(claims: readonly DeliveryClaim[], atMs: number): Promise<boolean[]> {
    const mine = new Map<string, string>(); // the first claim of each key in the call; later ones lose at once
    const rows = claims.flatMap((c) => {
      const id = deliveryId(c);
      if (mine.has(id)) return [];
      const claimant = randomUUID();
      mine.set(id, claimant);
      return [
        { workspace_id: wellFormed(c.workspaceId), delivery_key: wellFormed(c.key), claimant, at_ms: count(atMs) },
      ];
    });
    if (rows.length === 0) return claims.map(() => false);
    await insertTsv(this.client, this.t('webhook_deliveries'), rows);
    const found = await this.claimRows(claims);
    const firsts = new Set<string>();
    return claims.map((c) => {
      const id = deliveryId(c);
      if (firsts.has(id)) return false;
      firsts.add(id);
      const all = found.get(id) ?? [];
      return all.length === 1 && all[0] === mine.get(id);
    });
  }

  async claimedDeliveries(claims: readonly DeliveryClaim[]): Promise<boolean[]> {
    if (claims.length === 0) return [];
    const found = await this.claimRows(claims);
    return claims.map((c) => (found.get(deliveryId(c))?.length ?? 0) > 0);
  }

  /** The claimants of each (workspace, key), at most two each (one is what a claim is judged on). */
  private async claimRows(claims: readonly DeliveryClaim[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    const pairs = [...new Set(claims.map((c) => `(${str(wellFormed(c.workspaceId))}, ${str(wellFormed(c.key))})`))];
    for (let i = 0; i < pairs.length; i += 2000) {
      const rows = await this.rows<{ workspace_id: string; delivery_key: string; claimant: string }>(
        `SELECT workspace_id, delivery_key, claimant FROM ${this.t('webhook_deliveries')}
         WHERE (workspace_id, delivery_key) IN (${pairs.slice(i, i + 2000).join(', ')})
         LIMIT 2 BY workspace_id, delivery_key`,
      );
      for (const r of rows) {
        const id = deliveryId({ workspaceId: r.workspace_id, key: r.delivery_key });
        (out.get(id) ?? out.set(id, []).get(id)!).push(r.claimant);
      }
    }
    return out;
  }
}

const deliveryId = (c: DeliveryClaim) => `${wellFormed(c.workspaceId)}\u0000${wellFormed(c.key)}`;

function withoutVersion(s: WebhookSecretRecord & { version: number }): WebhookSecretRecord {
  const { version: _v, ...rest } = s;
  return rest;
}
