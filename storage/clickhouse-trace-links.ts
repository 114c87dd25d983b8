// ClickHouse side of TraceLinkStore (schema: clickhouse-migrations.ts v14). The rows are written with the batch they
// came in (trace_meta by ClickHouseEnrichment.insertEnrichment, proxy_calls by ClickHouseStorage.recordBatch).
import type { ClickHouseClient } from '@clickhouse/client';
import type { TraceMetaRecord } from '../core/enrichment-records.ts';
import type { ProxyCall, ProxyCallRef } from '../core/ports/storage.ts';
import { str, strList } from './clickhouse-sql.ts';
import { LOOKUP_SETTINGS, lookupChunks } from './clickhouse-rollup.ts';
import { byCall, wellFormed } from './codec.ts';

// Output names differ from the columns: an alias equal to a column would shadow it in the aggregates (18.16).
interface MetaRow {
  t: string;
  w: string;
  g: string;
  m: string;
  o: string;
  p: string;
  s: string;
  v: string;
}
interface CallRow {
  k: 'response' | 'request';
  c: string;
  t: string;
  s: string;
}

export class ClickHouseTraceLinks {
  private readonly client: ClickHouseClient;
  private readonly db: string;

  /** `db` must already be a checked identifier. */
  constructor(client: ClickHouseClient, db: string) {
    this.client = client;
    this.db = db;
  }

  private async rows<T>(query: string): Promise<T[]> {
    const rs = await this.client.query({ query, format: 'JSONEachRow', clickhouse_settings: LOOKUP_SETTINGS });
    return rs.json<T>();
  }

  async traceMeta(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, TraceMetaRecord>> {
    const out = new Map<string, TraceMetaRecord>();
    const ws = wellFormed(workspaceId);
    const newest = (col: string) => `argMax(${col}, updated_at_ms)`;
    for (const chunk of lookupChunks(traceIds.map(wellFormed))) {
      const rows = await this.rows<MetaRow>(
        `SELECT trace_id AS t, ${newest('workflow_name')} AS w, ${newest('group_id')} AS g, ${newest('metadata')} AS m,
          ${newest('organization')} AS o, ${newest('project')} AS p, ${newest('source')} AS s, max(updated_at_ms) AS v
        FROM ${this.db}.trace_meta
        WHERE workspace_id = ${str(ws)} AND trace_id IN ${strList(chunk)}
        GROUP BY trace_id`,
      );
      for (const r of rows) {
        out.set(r.t, {
          recordType: 'trace_meta',
          workspaceId: ws,
          traceId: r.t,
          workflowName: r.w,
          groupId: r.g,
          metadata: r.m,
          organization: r.o,
          project: r.p,
          source: r.s,
          updatedAtMs: Number(r.v),
        });
      }
    }
    return out;
  }

  async proxyCalls(workspaceId: string, refs: readonly ProxyCallRef[]): Promise<ProxyCall[]> {
    const ws = str(wellFormed(workspaceId));
    const out: ProxyCall[] = [];
    for (const kind of ['request', 'response'] as const) {
      const ids = refs.filter((r) => r.kind === kind).map((r) => wellFormed(r.id));
      for (const chunk of lookupChunks(ids)) {
        const rows = await this.rows<CallRow>(
          `SELECT id_kind AS k, call_id AS c, min(trace_id) AS t, argMin(span_id, trace_id) AS s
          FROM ${this.db}.proxy_calls
          WHERE workspace_id = ${ws} AND id_kind = ${str(kind)} AND call_id IN ${strList(chunk)}
          GROUP BY id_kind, call_id`,
        );
        for (const r of rows) out.push({ kind: r.k, id: r.c, traceId: r.t, spanId: r.s });
      }
    }
    return out.sort(byCall);
  }
}
