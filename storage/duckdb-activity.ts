// DuckDB side of AnalyticsStore.activity: spans and security alerts are unique by key here (upserts), so plain
// counts over the range.
import type { DuckDBConnection } from '@duckdb/node-api';
import type { ActivityQuery, ActivityRow } from '../core/ports/storage.ts';
import { activityRange, bucketSeconds, activityRows } from './activity.ts';
import { wellFormed } from './codec.ts';
import type { Serial } from './duckdb-enrichment.ts';

type Row = Record<string, unknown>;
async function all(c: DuckDBConnection, sql: string, params: Record<string, string | bigint>): Promise<Row[]> {
  return (await c.runAndReadAll(sql, params)).getRowObjectsJS() as Row[];
}

export class DuckDbActivity {
  private readonly serial: Serial;
  constructor(serial: Serial) {
    this.serial = serial;
  }

  async activity(workspaceId: string, q: ActivityQuery): Promise<ActivityRow[]> {
    const sec = bucketSeconds(q);
    const range = activityRange(q);
    const ws = wellFormed(workspaceId);
    // DuckDB refuses a parameter a statement does not use: one set per table.
    const spanParams: Record<string, string | bigint> = { ws };
    const alertParams: Record<string, string | bigint> = { ws };
    const spanConds = ['workspace_id = $ws'];
    const alertConds = ['workspace_id = $ws'];
    if (range.fromNs !== undefined) {
      spanConds.push('start_ns >= $from_ns');
      alertConds.push('received_at_ms >= $from_ms');
      spanParams.from_ns = range.fromNs;
      alertParams.from_ms = BigInt(range.fromMs!);
    }
    if (range.toNs !== undefined) {
      spanConds.push('start_ns < $to_ns');
      alertConds.push('received_at_ms < $to_ms');
      spanParams.to_ns = range.toNs;
      alertParams.to_ms = BigInt(range.toMs!);
    }
    const bucketOf = (ns: string) => `(${ns} // ${sec * 1_000_000_000})::BIGINT * ${sec}`;
    const [spans, traces, alerts] = await this.serial(async (c) => [
      await all(
        c,
        `SELECT ${bucketOf('start_ns')} AS b, count(*) AS n, count(*) FILTER (WHERE status = 'error') AS e,
          count(*) FILTER (WHERE kind = 'tool') AS tc, count(*) FILTER (WHERE kind = 'tool' AND status = 'error') AS te,
          count(*) FILTER (WHERE kind = 'guardrail') AS g
        FROM spans WHERE ${spanConds.join(' AND ')} GROUP BY b`,
        spanParams,
      ),
      await all(
        c,
        `SELECT ${bucketOf('first')} AS b, count(*) AS n
        FROM (SELECT min(start_ns) AS first FROM spans WHERE ${spanConds.join(' AND ')} GROUP BY trace_id) GROUP BY b`,
        spanParams,
      ),
      await all(
        c,
        `SELECT (received_at_ms // ${sec * 1000})::BIGINT * ${sec} AS b, count(*) AS n
        FROM security_alerts WHERE ${alertConds.join(' AND ')} GROUP BY b`,
        alertParams,
      ),
    ]);
    return activityRows(spans, traces, alerts);
  }
}
