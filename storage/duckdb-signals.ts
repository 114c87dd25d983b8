// DuckDB side of feedback votes, security alerts, webhook signing secrets and accepted deliveries (schema:
// duckdb-migrations.ts v7). Votes and alerts are written by duckdb-enrichment.ts (keyed tables, newest wins).
import { listValue, type DuckDBConnection, type DuckDBValue } from '@duckdb/node-api';
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
import { count, USAGE_KINDS_SQL, wellFormed } from './codec.ts';
import type { Serial } from './duckdb-enrichment.ts';
import { toKeyPage, usageGroupColumn } from './enrichment.ts';
import {
  addLinks,
  alertLinked,
  byAlertTime,
  byVoteTime,
  countVotes,
  emptyLinks,
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

type Params = Record<string, DuckDBValue>;
type Row = Record<string, unknown>;

async function all<T extends Row>(c: DuckDBConnection, sql: string, params: Params = {}): Promise<T[]> {
  const reader = await c.runAndReadAll(sql, params);
  return reader.getRowObjectsJS() as T[];
}

/** The provider response id a span holds; try(): attributes kept as sent may hold a lone surrogate DuckDB's JSON refuses. */
const RESPONSE_ID = `try(json_extract_string(attributes, '$."gen_ai.response.id"'))`;

function fromFeedback(r: Row): FeedbackRecord {
  return {
    recordType: 'feedback',
    workspaceId: r.workspace_id as string,
    voteKey: r.vote_key as string,
    voteId: r.vote_id as string,
    traceId: r.trace_id as string,
    targetType: r.target_type as FeedbackTarget,
    targetId: r.target_id as string,
    name: r.name as string,
    value: r.value as FeedbackRecord['value'],
    retracted: r.retracted as boolean,
    comment: r.comment as string,
    userId: r.user_id as string,
    source: r.source as string,
    metadata: r.metadata as string,
    votedAtMs: Number(r.voted_at_ms),
    receivedAtMs: Number(r.received_at_ms),
  };
}

function fromAlert(r: Row): SecurityAlertRecord {
  return {
    recordType: 'security_alert',
    workspaceId: r.workspace_id as string,
    alertId: r.alert_id as string,
    source: r.source as string,
    severity: r.severity as Severity,
    rawSeverity: r.raw_severity as string,
    title: r.title as string,
    category: r.category as string,
    externalId: r.external_id as string,
    detectedAtMs: Number(r.detected_at_ms),
    receivedAtMs: Number(r.received_at_ms),
    traceId: r.trace_id as string,
    spanId: r.span_id as string,
    requestId: r.request_id as string,
    responseId: r.response_id as string,
    sessionId: r.session_id as string,
    userId: r.user_id as string,
    signature: r.signature as SecurityAlertRecord['signature'],
    secretId: r.secret_id as string,
    correlation: r.correlation as string,
    body: (r.body as string | undefined) ?? '',
  };
}

function fromSecret(r: Row): WebhookSecretRecord {
  return {
    secretId: r.secret_id as string,
    workspaceId: r.workspace_id as string,
    sealed: r.sealed as string,
    createdAtMs: Number(r.created_at_ms),
    revokedAtMs: Number(r.revoked_at_ms),
  };
}

/** Every column of security_alerts but the body, which the trace read leaves out. */
const ALERT_HEAD = `workspace_id, alert_id, source, severity, raw_severity, title, category, external_id, detected_at_ms,
  received_at_ms, trace_id, span_id, request_id, response_id, session_id, user_id, signature, secret_id, correlation`;

export class DuckDbSignals {
  private readonly serial: Serial;
  private readonly usageOf: (workspaceId: string, q: UsageQuery) => Promise<UsageRow[]>;
  /** Claims are purged of entries older than this now and then (a replay that old is refused as stale anyway). */
  private readonly claimTtlMs: number;
  private claimsSincePurge = 0;

  constructor(
    serial: Serial,
    usage: (workspaceId: string, q: UsageQuery) => Promise<UsageRow[]>,
    claimTtlMs = 7 * 86_400_000,
  ) {
    this.serial = serial;
    this.usageOf = usage;
    this.claimTtlMs = claimTtlMs;
  }

  private read<T extends Row>(sql: string, params: Params): Promise<T[]> {
    return this.serial((c) => all<T>(c, sql, params));
  }

  // ---- links ----

  async responseTraces(workspaceId: string, responseIds: readonly string[]): Promise<Map<string, string>> {
    if (responseIds.length === 0) return new Map();
    const rows = await this.read<{ response_id: string; t: string }>(
      `SELECT response_id, any_value(trace_id) AS t FROM proxy_responses
       WHERE workspace_id = $ws AND response_id IN (SELECT unnest($ids)) GROUP BY response_id`,
      { ws: wellFormed(workspaceId), ids: listValue(responseIds.map(wellFormed)) },
    );
    return new Map(rows.map((r) => [r.response_id, r.t]));
  }

  async spanTraces(workspaceId: string, spanIds: readonly string[]): Promise<Map<string, string>> {
    if (spanIds.length === 0) return new Map();
    const rows = await this.read<{ span_id: string; t: string }>(
      `SELECT span_id, any_value(trace_id) AS t FROM spans
       WHERE workspace_id = $ws AND span_id IN (SELECT unnest($ids)) GROUP BY span_id`,
      { ws: wellFormed(workspaceId), ids: listValue(spanIds.map(wellFormed)) },
    );
    return new Map(rows.map((r) => [r.span_id, r.t]));
  }

  private async traceLinks(ws: string, traceId: string): Promise<TraceLinks> {
    const links = emptyLinks();
    const rows = await this.read<{ span_id: string; request_id: string; r: string | null }>(
      `SELECT span_id, request_id, ${RESPONSE_ID} AS r FROM spans WHERE workspace_id = $ws AND trace_id = $t`,
      { ws, t: traceId },
    );
    for (const r of rows) addLinks(links, r.span_id, r.request_id, r.r ?? '');
    return links;
  }

  /** Trace ids of pending targets (see clickhouse-signals.ts resolve): the proxy's index first for response ids. */
  private async resolve(ws: string, pending: PendingTargets): Promise<ResolvedTargets> {
    const out: ResolvedTargets = { span: new Map(), response: new Map(), request: new Map() };
    const lookup = async (sql: string, ids: string[], into: Map<string, string>) => {
      if (ids.length === 0) return;
      for (const r of await this.read<{ k: string; t: string }>(sql, { ws, ids: listValue(ids) })) into.set(r.k, r.t);
    };
    const bySpans = (column: string) =>
      `SELECT ${column} AS k, any_value(trace_id) AS t FROM spans
       WHERE workspace_id = $ws AND ${column} IN (SELECT unnest($ids)) GROUP BY k`;
    await lookup(bySpans('span_id'), pending.span, out.span);
    await lookup(bySpans('request_id'), pending.request, out.request);
    await lookup(
      `SELECT response_id AS k, any_value(trace_id) AS t FROM proxy_responses
       WHERE workspace_id = $ws AND response_id IN (SELECT unnest($ids)) GROUP BY k`,
      pending.response,
      out.response,
    );
    await lookup(
      `SELECT ${RESPONSE_ID} AS k, any_value(trace_id) AS t FROM spans
       WHERE workspace_id = $ws AND ${RESPONSE_ID} IN (SELECT unnest($ids)) GROUP BY k`,
      pending.response.filter((id) => !out.response.has(id)),
      out.response,
    );
    return out;
  }

  // ---- feedback ----

  async traceFeedback(workspaceId: string, traceId: string): Promise<FeedbackRecord[]> {
    const ws = wellFormed(workspaceId);
    const id = wellFormed(traceId);
    const links = await this.traceLinks(ws, id);
    // One row per vote (the primary key): its newest version, as upserted.
    const params: Params = { ws, t: id };
    const pending = [
      ['span', 'spans', links.spanIds],
      ['response', 'responses', links.responseIds],
      ['request', 'requests', links.requestIds],
    ].flatMap(([type, name, ids]) => {
      if ((ids as Set<string>).size === 0) return [];
      params[name as string] = listValue([...(ids as Set<string>)]);
      return [`(target_type = '${type}' AND target_id IN (SELECT unnest($${name})))`];
    });
    const rows = await this.read(
      `SELECT * FROM feedback WHERE workspace_id = $ws AND NOT retracted
       AND (trace_id = $t ${pending.length ? `OR (trace_id = '' AND (${pending.join(' OR ')}))` : ''})`,
      params,
    );
    return rows
      .map(fromFeedback)
      .filter((v) => voteLinked(v, id, links))
      .sort(byVoteTime);
  }

  /** The standing votes linked to each of these traces, counted (the training export's selection, a page at a time). */
  async voteCounts(
    workspaceId: string,
    traceIds: readonly string[],
  ): Promise<Map<string, { up: number; down: number }>> {
    const ws = wellFormed(workspaceId);
    const ids = [...new Set(traceIds.map(wellFormed))];
    if (ids.length === 0) return new Map();
    const links = new Map(ids.map((t) => [t, emptyLinks()]));
    const rows = await this.read<{ trace_id: string; span_id: string; request_id: string; r: string | null }>(
      `SELECT trace_id, span_id, request_id, ${RESPONSE_ID} AS r FROM spans
       WHERE workspace_id = $ws AND trace_id IN (SELECT unnest($ids))`,
      { ws, ids: listValue(ids) },
    );
    for (const r of rows) addLinks(links.get(r.trace_id)!, r.span_id, r.request_id, r.r ?? '');
    const params: Params = { ws, ids: listValue(ids) };
    const pending = (['span', 'response', 'request'] as const).flatMap((type) => {
      const set = new Set([...links.values()].flatMap((l) => [...l[`${type}Ids`]]));
      if (set.size === 0) return [];
      params[type] = listValue([...set]);
      return [`(target_type = '${type}' AND target_id IN (SELECT unnest($${type})))`];
    });
    const votes = await this.read(
      `SELECT * FROM feedback WHERE workspace_id = $ws AND NOT retracted
       AND (trace_id IN (SELECT unnest($ids)) ${pending.length ? `OR (trace_id = '' AND (${pending.join(' OR ')}))` : ''})`,
      params,
    );
    return countVotes(votes.map(fromFeedback), links);
  }

  /** Trace ids with a standing vote of this value (direct, or pending and resolved now), for the trace list. */
  async votedTraces(workspaceId: string, value: 'up' | 'down'): Promise<string[]> {
    const ws = wellFormed(workspaceId);
    const rows = await this.read<{ trace_id: string; target_type: FeedbackTarget; target_id: string }>(
      `SELECT DISTINCT trace_id, target_type, target_id FROM feedback
       WHERE workspace_id = $ws AND NOT retracted AND value = $v`,
      { ws, v: value },
    );
    const resolved = await this.resolve(
      ws,
      pendingOf(
        rows.filter((r) => r.trace_id === '').map((r) => ({ targetType: r.target_type, targetId: r.target_id })),
      ),
    );
    const traces = new Set<string>();
    for (const r of rows) {
      const t = resolvedTrace(resolved, { traceId: r.trace_id, targetType: r.target_type, targetId: r.target_id });
      if (t) traces.add(t);
    }
    return [...traces];
  }

  async usage(workspaceId: string, q: UsageQuery): Promise<UsageRow[]> {
    const rows = await this.usageOf(workspaceId, q);
    const ws = wellFormed(workspaceId);
    const range = voteRange(q);
    const params: Params = { ws };
    const c = ['workspace_id = $ws', 'NOT retracted'];
    if (range.fromMs !== undefined) {
      c.push('voted_at_ms >= $from_ms');
      params.from_ms = BigInt(range.fromMs);
    }
    if (range.toMs !== undefined) {
      c.push('voted_at_ms < $to_ms');
      params.to_ms = BigInt(range.toMs);
    }
    const size = q.bucket === 'day' ? 86_400_000 : 3_600_000;
    const grouped = await this.read<{
      b: bigint;
      trace_id: string;
      target_type: FeedbackTarget;
      target_id: string;
      up: bigint;
      down: bigint;
    }>(
      `SELECT (voted_at_ms // ${size}) * ${size} AS b, trace_id, target_type, target_id,
         count(*) FILTER (WHERE value = 'up') AS up, count(*) FILTER (WHERE value = 'down') AS down
       FROM feedback WHERE ${c.join(' AND ')} GROUP BY ALL`,
      params,
    );
    if (grouped.length === 0) return rows;
    const resolved = await this.resolve(
      ws,
      pendingOf(
        grouped.filter((g) => g.trace_id === '').map((g) => ({ targetType: g.target_type, targetId: g.target_id })),
      ),
    );
    const votes: VoteCount[] = grouped.map((g) => ({
      bucketSec: voteBucket(Number(g.b), q.bucket),
      traceId: resolvedTrace(resolved, { traceId: g.trace_id, targetType: g.target_type, targetId: g.target_id }),
      up: Number(g.up),
      down: Number(g.down),
    }));
    const traces = [...new Set(votes.map((v) => v.traceId).filter((t) => t !== ''))];
    const column = usageGroupColumn(q.groupBy);
    const groups = traces.length
      ? await this.read<{ trace_id: string; g: string }>(
          `SELECT trace_id, arg_min(${column}, (kind NOT IN ${USAGE_KINDS_SQL}, parent_span_id <> '', start_ns, span_id)) AS g
           FROM spans WHERE workspace_id = $ws AND trace_id IN (SELECT unnest($ids)) GROUP BY trace_id`,
          { ws, ids: listValue(traces) },
        )
      : [];
    return mergeFeedback(rows, votes, new Map(groups.map((g) => [g.trace_id, g.g])));
  }

  // ---- security alerts ----

  async traceSecurityAlerts(workspaceId: string, traceId: string, limit: number): Promise<SecurityAlertRecord[]> {
    const ws = wellFormed(workspaceId);
    const id = wellFormed(traceId);
    const links = await this.traceLinks(ws, id);
    const params: Params = { ws, t: id, lim: BigInt(Math.max(1, Math.trunc(limit))) };
    const pending = [
      ['span_id', links.spanIds],
      ['request_id', links.requestIds],
      ['response_id', links.responseIds],
    ].flatMap(([column, ids]) => {
      if ((ids as Set<string>).size === 0) return [];
      params[column as string] = listValue([...(ids as Set<string>)]);
      return [`${column} IN (SELECT unnest($${column}))`];
    });
    const rows = await this.read(
      `SELECT ${ALERT_HEAD} FROM security_alerts WHERE workspace_id = $ws
       AND (trace_id = $t ${pending.length ? `OR (trace_id = '' AND (${pending.join(' OR ')}))` : ''})
       ORDER BY received_at_ms DESC, alert_id DESC LIMIT $lim`,
      params,
    );
    return rows
      .map(fromAlert)
      .filter((a) => alertLinked(a, id, links))
      .sort(byAlertTime);
  }

  async listSecurityAlerts(workspaceId: string, q: SecurityAlertQuery): Promise<Page<SecurityAlertRecord>> {
    const f = normalizeSecurityAlertQuery(q);
    const params: Params = { ws: wellFormed(workspaceId), lim: BigInt(f.limit + 1) };
    const c = ['workspace_id = $ws'];
    for (const [column, v] of [
      ['source', f.source],
      ['severity', f.severity],
      ['category', f.category],
      ['trace_id', f.traceId],
      ['signature', f.signature],
    ] as const) {
      if (v === undefined) continue;
      c.push(`${column} = $${column}`);
      params[column] = v;
    }
    if (f.fromMs !== undefined) {
      c.push('received_at_ms >= $from_ms');
      params.from_ms = BigInt(f.fromMs);
    }
    if (f.toMs !== undefined) {
      c.push('received_at_ms < $to_ms');
      params.to_ms = BigInt(f.toMs);
    }
    if (f.cursor) {
      c.push('(received_at_ms < $cs OR (received_at_ms = $cs AND alert_id < $ct))');
      params.cs = BigInt(f.cursor.s);
      params.ct = String(f.cursor.tie[0]);
    }
    const rows = await this.read(
      `SELECT * FROM security_alerts WHERE ${c.join(' AND ')} ORDER BY received_at_ms DESC, alert_id DESC LIMIT $lim`,
      params,
    );
    return toKeyPage(rows.map(fromAlert), f.limit, securityAlertCursor);
  }

  // ---- webhook signing secrets ----

  async putWebhookSecret(rec: WebhookSecretRecord): Promise<void> {
    await this.serial((c) =>
      c.run('INSERT INTO webhook_secrets VALUES ($id, $ws, $sealed, $at, $rev)', {
        id: wellFormed(rec.secretId),
        ws: wellFormed(rec.workspaceId),
        sealed: wellFormed(rec.sealed),
        at: BigInt(count(rec.createdAtMs)),
        rev: BigInt(count(rec.revokedAtMs)),
      }),
    );
  }

  async getWebhookSecret(secretId: string): Promise<WebhookSecretRecord | null> {
    const [row] = await this.read('SELECT * FROM webhook_secrets WHERE secret_id = $id', { id: wellFormed(secretId) });
    return row ? fromSecret(row) : null;
  }

  async listWebhookSecrets(workspaceId?: string): Promise<WebhookSecretRecord[]> {
    const rows =
      workspaceId === undefined
        ? await this.read('SELECT * FROM webhook_secrets ORDER BY created_at_ms, secret_id', {})
        : await this.read('SELECT * FROM webhook_secrets WHERE workspace_id = $ws ORDER BY created_at_ms, secret_id', {
            ws: wellFormed(workspaceId),
          });
    return rows.map(fromSecret);
  }

  async revokeWebhookSecret(secretId: string, atMs: number): Promise<boolean> {
    const rows = await this.read(
      `UPDATE webhook_secrets SET revoked_at_ms = CASE WHEN revoked_at_ms = 0 THEN $at ELSE revoked_at_ms END
       WHERE secret_id = $id RETURNING secret_id`,
      { id: wellFormed(secretId), at: BigInt(count(atMs) || 1) },
    );
    return rows.length > 0;
  }

  // ---- accepted deliveries ----

  /** The primary key decides: the first insert of a key wins, any later one conflicts (one statement for the call). */
  async claimDeliveries(claims: readonly DeliveryClaim[], atMs: number): Promise<boolean[]> {
    if (claims.length === 0) return [];
    const purge = (this.claimsSincePurge += claims.length) >= 1000;
    if (purge) this.claimsSincePurge = 0;
    const won = await this.serial(async (c) => {
      if (purge)
        await c.run('DELETE FROM webhook_deliveries WHERE at_ms < $before', {
          before: BigInt(Math.max(0, atMs - this.claimTtlMs)),
        });
      const rows = await all<{ workspace_id: string; delivery_key: string }>(
        c,
        `INSERT INTO webhook_deliveries
         SELECT DISTINCT ON (w, k) w, k, $at FROM (SELECT unnest($ws) AS w, unnest($keys) AS k)
         ON CONFLICT DO NOTHING RETURNING workspace_id, delivery_key`,
        {
          ws: listValue(claims.map((x) => wellFormed(x.workspaceId))),
          keys: listValue(claims.map((x) => wellFormed(x.key))),
          at: BigInt(count(atMs)),
        },
      );
      return new Set(rows.map((r) => `${r.workspace_id}\u0000${r.delivery_key}`));
    }, true);
    // Each inserted key won for its first claim in the call only.
    return claims.map((x) => won.delete(`${wellFormed(x.workspaceId)}\u0000${wellFormed(x.key)}`));
  }

  async claimedDeliveries(claims: readonly DeliveryClaim[]): Promise<boolean[]> {
    if (claims.length === 0) return [];
    const rows = await this.read<{ workspace_id: string; delivery_key: string }>(
      `SELECT d.workspace_id, d.delivery_key FROM webhook_deliveries d
       JOIN (SELECT DISTINCT unnest($ws) AS w, unnest($keys) AS k) q ON d.workspace_id = q.w AND d.delivery_key = q.k`,
      {
        ws: listValue(claims.map((x) => wellFormed(x.workspaceId))),
        keys: listValue(claims.map((x) => wellFormed(x.key))),
      },
    );
    const found = new Set(rows.map((r) => `${r.workspace_id}\u0000${r.delivery_key}`));
    return claims.map((x) => found.has(`${wellFormed(x.workspaceId)}\u0000${wellFormed(x.key)}`));
  }
}
