// DuckDB side of TrainingStore (schema: duckdb-migrations.ts v10): the training export's scan over training_spans, as
// clickhouse-training.ts does it. The table has no index (see v10): a page reads its narrow columns whole and keeps the
// first rows of its range in key order (a top-N, in DuckDB's bounded memory).
import { listValue, type DuckDBValue } from '@duckdb/node-api';
import type { TrainingFilter, TrainingKey, TrainingPage, TrainingScan, TrainingScope } from '../core/ports/storage.ts';
import type { SpanRecord } from '../core/record.ts';
import { clampNs, cutPart, wellFormed } from './codec.ts';
import type { Serial } from './duckdb-enrichment.ts';
import type { DuckDbSignals } from './duckdb-signals.ts';
import type { DuckDbTraceLinks } from './duckdb-trace-links.ts';
import { coachSessionOf, distinctKeys, isCurrent, type NewestSpans, pageTraces } from './training.ts';

type Params = Record<string, DuckDBValue>;
type Row = Record<string, unknown>;

/** Drafts read per coach session (its newest ones). */
const DRAFTS_PER_SESSION = 8;

const hash = (decimal: string) => {
  if (!/^\d{1,20}$/.test(decimal) || BigInt(decimal) >= 1n << 64n)
    throw new RangeError(`not a hash: ${JSON.stringify(decimal)}`);
  return BigInt(decimal);
};

/** The filter on training_spans' own columns, its values added to `params`. */
function filterSql(f: TrainingFilter, params: Params): string[] {
  const c: string[] = [];
  const add = (sql: string, name: string, v: DuckDBValue) => {
    c.push(sql);
    params[name] = v;
  };
  if (f.fromNs !== undefined) add('start_ns >= $from_ns::UBIGINT', 'from_ns', clampNs(f.fromNs).toString());
  if (f.toNs !== undefined) add('start_ns < $to_ns::UBIGINT', 'to_ns', clampNs(f.toNs).toString());
  if (f.model !== undefined) add('model = $model', 'model', wellFormed(f.model));
  if (f.actionName !== undefined) add('action_name = $action', 'action', wellFormed(f.actionName));
  if (f.environment !== undefined) add('environment = $env', 'env', wellFormed(f.environment));
  if (f.source !== undefined) add('source = $source', 'source', wellFormed(f.source));
  if (f.curated) c.push('training_preferred');
  return c;
}

/** Rows strictly after `k` in the key order (VARCHARs compare as bytes, as on ClickHouse). */
function afterSql(k: TrainingKey, params: Params): string {
  Object.assign(params, {
    a_p: hash(k.promptHash).toString(),
    a_r: hash(k.responseHash).toString(),
    a_t: wellFormed(k.traceId),
    a_s: wellFormed(k.spanId),
  });
  const p = '$a_p::UBIGINT';
  const r = '$a_r::UBIGINT';
  return `(prompt_hash > ${p} OR (prompt_hash = ${p} AND (response_hash > ${r} OR (response_hash = ${r}
    AND (trace_id > $a_t OR (trace_id = $a_t AND span_id > $a_s))))))`;
}

export class DuckDbTraining {
  private readonly serial: Serial;
  private readonly signals: DuckDbSignals;
  private readonly links: DuckDbTraceLinks;
  private readonly newest: NewestSpans;

  constructor(serial: Serial, signals: DuckDbSignals, links: DuckDbTraceLinks, newest: NewestSpans) {
    this.serial = serial;
    this.signals = signals;
    this.links = links;
    this.newest = newest;
  }

  private read<T extends Row>(sql: string, params: Params): Promise<T[]> {
    return this.serial(async (c) => (await c.runAndReadAll(sql, params)).getRowObjectsJS() as T[]);
  }

  async trainingScope(workspaceId: string, filter: TrainingFilter): Promise<TrainingScope> {
    const params: Params = { ws: wellFormed(workspaceId) };
    const where = ['workspace_id = $ws', ...filterSql(filter, params)].join(' AND ');
    const [n] = await this.read<{ n: bigint }>(`SELECT count(*) AS n FROM training_spans WHERE ${where}`, params);
    const any = async (table: string, cond: string) =>
      (
        await this.read(`SELECT 1 AS one FROM ${table} WHERE workspace_id = $ws AND ${cond} LIMIT 1`, {
          ws: params.ws!,
        })
      ).length > 0;
    return {
      candidates: Number(n?.n ?? 0n),
      votes: await any('feedback', 'TRUE'),
      tools: await any('spans', `kind = 'tool'`),
    };
  }

  async trainingPage(workspaceId: string, scan: TrainingScan): Promise<TrainingPage> {
    const ws = wellFormed(workspaceId);
    const params: Params = { ws, lim: BigInt(Math.max(1, Math.trunc(scan.limit))) };
    const where = ['workspace_id = $ws', ...filterSql(scan.filter, params)];
    if (scan.from !== undefined) {
      where.push('prompt_hash >= $lo::UBIGINT');
      params.lo = hash(scan.from).toString();
    }
    if (scan.below !== undefined) {
      where.push('prompt_hash < $hi::UBIGINT');
      params.hi = hash(scan.below).toString();
    }
    if (scan.after) where.push(afterSql(scan.after, params));
    const found = await this.read<{ ph: bigint; rh: bigint; trace_id: string; span_id: string; b: bigint }>(
      `SELECT prompt_hash AS ph, response_hash AS rh, trace_id, span_id, stored_bytes AS b FROM training_spans
       WHERE ${where.join(' AND ')}
       ORDER BY prompt_hash, response_hash, trace_id, span_id LIMIT $lim`,
      params,
    );
    const limit = Math.max(1, Math.trunc(scan.limit));
    const { take: read, more } = cutPart(
      found.map((r) => ({ ...r, bytes: Number(r.b) })),
      limit,
      scan.maxBytes,
    );
    const keys = distinctKeys(
      read.map((r) => ({
        promptHash: r.ph.toString(),
        responseHash: r.rh.toString(),
        traceId: r.trace_id,
        spanId: r.span_id,
      })),
    );
    const traceIds = [...new Set(keys.map((k) => k.traceId))];
    const spans = new Map(
      (await this.newest(ws, traceIds, { spanIds: [...new Set(keys.map((k) => k.spanId))] })).map((s) => [
        `${s.traceId}\u0000${s.spanId}`,
        s,
      ]),
    );
    const rows = keys.flatMap((key) => {
      const span = spans.get(`${key.traceId}\u0000${key.spanId}`);
      return isCurrent(key, span, scan.filter) ? [{ key, span }] : [];
    });
    return {
      rows,
      read: read.length,
      last: keys.at(-1) ?? null,
      more: more || found.length === limit,
      traces: await this.traces(ws, rows, scan),
    };
  }

  /** Votes, group ids and tool spans of the traces of a page's rows. */
  private traces(ws: string, rows: TrainingPage['rows'], scan: TrainingScan): Promise<TrainingPage['traces']> {
    return pageTraces({ signals: this.signals, links: this.links, newest: this.newest }, ws, rows, scan);
  }

  async coachDrafts(workspaceId: string, sessionIds: readonly string[]): Promise<Map<string, SpanRecord[]>> {
    const out = new Map<string, SpanRecord[]>();
    const asked = [...new Set(sessionIds.map(wellFormed))];
    if (asked.length === 0) return out;
    const ws = wellFormed(workspaceId);
    // try(): attributes kept as sent may hold a lone surrogate DuckDB's JSON refuses.
    const keys = await this.read<{ trace_id: string; span_id: string }>(
      `SELECT trace_id, span_id FROM (
         SELECT trace_id, span_id, start_ns,
           try(json_extract_string(attributes, '$.parameters.coachSessionId')) AS coach_session
         FROM spans WHERE workspace_id = $ws AND source = 'coach' AND action_name = 'coach_local_draft' AND trainable)
       WHERE coach_session IN (SELECT unnest($sessions))
       QUALIFY row_number() OVER (PARTITION BY coach_session ORDER BY start_ns DESC) <= ${DRAFTS_PER_SESSION}`,
      { ws, sessions: listValue(asked) },
    );
    if (keys.length === 0) return out;
    const wanted = new Set(keys.map((k) => `${k.trace_id}\u0000${k.span_id}`));
    const spans = await this.newest(ws, [...new Set(keys.map((k) => k.trace_id))], {
      spanIds: [...new Set(keys.map((k) => k.span_id))],
    });
    const sessions = new Set(asked);
    for (const s of spans) {
      const session = coachSessionOf(s);
      if (!wanted.has(`${s.traceId}\u0000${s.spanId}`) || !sessions.has(session)) continue;
      const list = out.get(session);
      if (list) list.push(s);
      else out.set(session, [s]);
    }
    return out;
  }
}
