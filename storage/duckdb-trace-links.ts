// DuckDB side of TraceLinkStore (schema: duckdb-migrations.ts v9). The rows are written with the batch they came in
// (trace_meta by DuckDbEnrichment.insertEnrichment, proxy_calls by DuckDbStorage.insertSpans).
import { listValue, type DuckDBConnection } from '@duckdb/node-api';
import type { TraceMetaRecord } from '../core/enrichment-records.ts';
import type { ProxyCall, ProxyCallRef } from '../core/ports/storage.ts';
import { byCall, wellFormed, type ProxyCallRow } from './codec.ts';
import type { Serial } from './duckdb-enrichment.ts';
import { insertStaged, stagingOf } from './duckdb-columns.ts';

async function all<T>(c: DuckDBConnection, sql: string, params: Record<string, string | ReturnType<typeof listValue>>) {
  return (await c.runAndReadAll(sql, params)).getRowObjectsJS() as T[];
}

/** Adds the calls a batch's proxy spans name; a call indexed already keeps its row (a replay names the same span). */
export async function insertProxyCalls(c: DuckDBConnection, rows: readonly ProxyCallRow[]): Promise<void> {
  if (rows.length === 0) return;
  await insertStaged(
    c,
    'proxy_calls',
    (cols) => {
      for (const r of rows) {
        cols.appendVarchar(r.workspace_id);
        cols.appendVarchar(r.id_kind);
        cols.appendVarchar(r.call_id);
        cols.appendVarchar(r.trace_id);
        cols.appendVarchar(r.span_id);
        cols.endRow();
      }
    },
    `INSERT INTO proxy_calls SELECT * FROM ${stagingOf('proxy_calls')} ON CONFLICT DO NOTHING`,
  );
}

export class DuckDbTraceLinks {
  private readonly serial: Serial;

  constructor(serial: Serial) {
    this.serial = serial;
  }

  async traceMeta(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, TraceMetaRecord>> {
    const out = new Map<string, TraceMetaRecord>();
    if (traceIds.length === 0) return out;
    const rows = await this.serial((c) =>
      all<Record<string, string | bigint>>(
        c,
        `SELECT * FROM trace_meta WHERE workspace_id = $ws AND trace_id IN (SELECT unnest($ids))`,
        { ws: wellFormed(workspaceId), ids: listValue([...new Set(traceIds.map(wellFormed))]) },
      ),
    );
    for (const r of rows) {
      out.set(r.trace_id as string, {
        recordType: 'trace_meta',
        workspaceId: r.workspace_id as string,
        traceId: r.trace_id as string,
        workflowName: r.workflow_name as string,
        groupId: r.group_id as string,
        metadata: r.metadata as string,
        organization: r.organization as string,
        project: r.project as string,
        source: r.source as string,
        updatedAtMs: Number(r.updated_at_ms),
      });
    }
    return out;
  }

  async proxyCalls(workspaceId: string, refs: readonly ProxyCallRef[]): Promise<ProxyCall[]> {
    const out: ProxyCall[] = [];
    for (const kind of ['request', 'response'] as const) {
      const ids = [...new Set(refs.filter((r) => r.kind === kind).map((r) => wellFormed(r.id)))];
      if (ids.length === 0) continue;
      const rows = await this.serial((c) =>
        all<{ call_id: string; trace_id: string; span_id: string }>(
          c,
          `SELECT call_id, trace_id, span_id FROM proxy_calls
          WHERE workspace_id = $ws AND id_kind = $kind AND call_id IN (SELECT unnest($ids))`,
          { ws: wellFormed(workspaceId), kind, ids: listValue(ids) },
        ),
      );
      for (const r of rows) out.push({ kind, id: r.call_id, traceId: r.trace_id, spanId: r.span_id });
    }
    return out.sort(byCall);
  }
}
