// ClickHouse side of AnalyticsStore.activity. Read from the spans and security_alerts tables, not a rollup: their
// keys collapse re-deliveries only at merge time, so each span counts once by its newest version (argMax), each
// alert once by its id. A rollup fed by a materialized view would count a re-delivered span twice without the
// correction rows usage_hourly needs (clickhouse-rollup.ts). The range prunes by start_date (the partition key) first.
import type { ClickHouseClient } from '@clickhouse/client';
import type { ActivityQuery, ActivityRow } from '../core/ports/storage.ts';
import { activityRange, bucketSeconds, activityRows } from './activity.ts';
import { str, u64 } from './clickhouse-sql.ts';
import { wellFormed } from './codec.ts';

const DAY_MS = 86_400_000;
/** The last day a ClickHouse Date holds (a UInt16 day number). */
const DATE_MAX = 65_535;
const date = (day: number) => `toDate(${str(new Date(Math.min(day, DATE_MAX) * DAY_MS).toISOString().slice(0, 10))})`;

export class ClickHouseActivity {
  private readonly client: ClickHouseClient;
  private readonly db: string;

  /** `db` must already be a checked identifier. */
  constructor(client: ClickHouseClient, db: string) {
    this.client = client;
    this.db = db;
  }

  private async rows<T>(query: string): Promise<T[]> {
    const rs = await this.client.query({ query, format: 'JSONEachRow' });
    return rs.json<T>();
  }

  async activity(workspaceId: string, q: ActivityQuery): Promise<ActivityRow[]> {
    const sec = bucketSeconds(q);
    const range = activityRange(q);
    const ws = str(wellFormed(workspaceId));
    const spanConds = [`workspace_id = ${ws}`];
    if (range.fromMs !== undefined) {
      spanConds.push(`start_date >= ${date(Math.floor(range.fromMs / DAY_MS))}`);
      spanConds.push(`start_ns >= ${u64(String(range.fromNs))}`);
    }
    if (range.toMs !== undefined) {
      if (Math.floor(range.toMs / DAY_MS) <= DATE_MAX)
        spanConds.push(`start_date <= ${date(Math.floor(range.toMs / DAY_MS))}`);
      spanConds.push(`start_ns < ${u64(String(range.toNs))}`);
    }
    const bucketOf = (ns: string) => `intDiv(${ns}, ${sec * 1_000_000_000}) * ${sec}`;
    // One row per span, its newest version (names differ from the columns: an alias equal to a column would shadow
    // it inside the aggregates on 18.16).
    const newest = `SELECT trace_id AS t, argMax(kind, ingested_at_ms) AS k, argMax(status, ingested_at_ms) AS st,
        argMax(start_ns, ingested_at_ms) AS s
      FROM ${this.db}.spans WHERE ${spanConds.join(' AND ')} GROUP BY trace_id, span_id`;
    const spans = await this.rows<Record<string, string>>(`
      SELECT toString(${bucketOf('s')}) AS b, count() AS n, countIf(st = 'error') AS e, countIf(k = 'tool') AS tc,
        countIf(k = 'tool' AND st = 'error') AS te, countIf(k = 'guardrail') AS g
      FROM (${newest}) GROUP BY b`);
    const traces = await this.rows<Record<string, string>>(`
      SELECT toString(${bucketOf('first')}) AS b, count() AS n
      FROM (SELECT t, min(s) AS first FROM (${newest}) GROUP BY t) GROUP BY b`);
    const alertConds = [`workspace_id = ${ws}`];
    if (range.fromMs !== undefined) alertConds.push(`received_at_ms >= ${u64(String(range.fromMs))}`);
    if (range.toMs !== undefined) alertConds.push(`received_at_ms < ${u64(String(range.toMs))}`);
    const alerts = await this.rows<Record<string, string>>(`
      SELECT toString(intDiv(r, ${sec * 1000}) * ${sec}) AS b, count() AS n
      FROM (SELECT alert_id, any(received_at_ms) AS r FROM ${this.db}.security_alerts
        WHERE ${alertConds.join(' AND ')} GROUP BY alert_id)
      GROUP BY b`);
    return activityRows(spans, traces, alerts);
  }
}
