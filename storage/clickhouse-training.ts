// ClickHouse side of TrainingStore (schema: clickhouse-migrations.ts v16): the training export's scan over
// training_calls, in its key order, a page at a time; which of its rows are their span's stored version (a narrow
// look at spans); their text from the index's own range; and the votes, groups and tool spans of the page's traces.
import type { ClickHouseClient } from '@clickhouse/client';
import type { TrainingFilter, TrainingKey, TrainingPage, TrainingScan, TrainingScope } from '../core/ports/storage.ts';
import type { SpanRecord } from '../core/record.ts';
import { str, strList, u64 } from './clickhouse-sql.ts';
import { LOOKUP_SETTINGS, lookupChunks, traceDaysOf } from './clickhouse-rollup.ts';
import { fromReadRow, SPAN_COLUMNS, type SpanReadRow } from './clickhouse-span-read.ts';
import type { ClickHouseSignals } from './clickhouse-signals.ts';
import type { ClickHouseTraceLinks } from './clickhouse-trace-links.ts';
import { clampNs, cutPart, utcDate, wellFormed } from './codec.ts';
import { coachSessionOf, distinctKeys, isCurrent, type NewestSpans, pageTraces } from './training.ts';

/** Drafts read per coach session (its newest ones). */
const DRAFTS_PER_SESSION = 8;

/** A hash (decimal digits, already checked) as a UInt64 literal: plain digits, which 18.16 reads as UInt64. */
function hashLiteral(decimal: string): string {
  if (!/^\d{1,20}$/.test(decimal) || BigInt(decimal) >= 1n << 64n)
    throw new RangeError(`not a hash: ${JSON.stringify(decimal)}`);
  return decimal;
}

/** The filter on training_calls' own columns (a row of an earlier version may match where the span no longer does). */
function filterSql(f: TrainingFilter): string[] {
  const c: string[] = [];
  if (f.fromNs !== undefined) {
    const from = clampNs(f.fromNs).toString();
    c.push(`start_date >= toDate(${str(utcDate(from))})`, `start_ns >= ${u64(from)}`);
  }
  if (f.toNs !== undefined) {
    const to = clampNs(f.toNs).toString();
    c.push(`start_ns < ${u64(to)}`, `start_date <= toDate(${str(utcDate(to))})`);
  }
  if (f.model !== undefined) c.push(`model = ${str(wellFormed(f.model))}`);
  if (f.actionName !== undefined) c.push(`action_name = ${str(wellFormed(f.actionName))}`);
  if (f.environment !== undefined) c.push(`environment = ${str(wellFormed(f.environment))}`);
  if (f.source !== undefined) c.push(`source = ${str(wellFormed(f.source))}`);
  if (f.curated) c.push('training_preferred = 1');
  return c;
}

/** Rows strictly after `k` in the key order. */
function afterSql(k: TrainingKey): string {
  const p = hashLiteral(k.promptHash);
  const r = hashLiteral(k.responseHash);
  const t = str(wellFormed(k.traceId));
  const s = str(wellFormed(k.spanId));
  return `(prompt_hash > ${p} OR (prompt_hash = ${p} AND (response_hash > ${r} OR (response_hash = ${r}
    AND (trace_id > ${t} OR (trace_id = ${t} AND span_id > ${s}))))))`;
}

/** An index row's key, version and text size. */
interface IndexKey {
  key: TrainingKey;
  at: number;
  bytes: number;
}

/** A span's newest stored version; `tie` when two stored rows have that ingested_at_ms. */
interface Version {
  at: number;
  ok: boolean;
  tie: boolean;
}

type IndexReadRow = SpanReadRow & { ph: string; rh: string };

const spanKey = (traceId: string, spanId: string) => `${traceId}\u0000${spanId}`;
const spanOf = (k: TrainingKey) => spanKey(k.traceId, k.spanId);
const keyOf = (k: TrainingKey) => `${k.promptHash}\u0000${k.responseHash}\u0000${spanOf(k)}`;

export class ClickHouseTraining {
  private readonly client: ClickHouseClient;
  private readonly db: string;
  private readonly signals: ClickHouseSignals;
  private readonly links: ClickHouseTraceLinks;
  private readonly newest: NewestSpans;

  /** `db` must already be a checked identifier. */
  constructor(
    client: ClickHouseClient,
    db: string,
    signals: ClickHouseSignals,
    links: ClickHouseTraceLinks,
    newest: NewestSpans,
  ) {
    this.client = client;
    this.db = db;
    this.signals = signals;
    this.links = links;
    this.newest = newest;
  }

  private async rows<T>(query: string): Promise<T[]> {
    const rs = await this.client.query({ query, format: 'JSONEachRow', clickhouse_settings: LOOKUP_SETTINGS });
    return rs.json<T>();
  }

  async trainingScope(workspaceId: string, filter: TrainingFilter): Promise<TrainingScope> {
    const ws = str(wellFormed(workspaceId));
    const where = [`workspace_id = ${ws}`, ...filterSql(filter)].join(' AND ');
    const [n] = await this.rows<{ n: string }>(`SELECT count() AS n FROM ${this.db}.training_calls WHERE ${where}`);
    // A column, not a constant: 18.16 loses a WHERE column on a Distributed table when only a constant is selected.
    const any = async (table: string, column: string, cond: string) =>
      (await this.rows(`SELECT ${column} FROM ${this.db}.${table} WHERE workspace_id = ${ws} AND ${cond} LIMIT 1`))
        .length > 0;
    return {
      candidates: Number(n?.n ?? 0),
      votes: await any('feedback', 'vote_key', '1 = 1'),
      tools: await any('spans', 'span_id', `kind = 'tool'`),
    };
  }

  async trainingPage(workspaceId: string, scan: TrainingScan): Promise<TrainingPage> {
    const ws = wellFormed(workspaceId);
    const limit = Math.max(1, Math.trunc(scan.limit));
    const found = await this.indexKeys(ws, scan, limit);
    const { take: read, more } = cutPart(found, limit, scan.maxBytes);
    // A key's versions come newest first: its first row is the one that can be the span's stored version.
    const first = new Map<string, IndexKey>();
    for (const r of read) if (!first.has(keyOf(r.key))) first.set(keyOf(r.key), r);
    const keys = distinctKeys(read.map((r) => r.key));
    const rows = await this.current(ws, keys, first, scan.filter);
    return {
      rows,
      read: read.length,
      last: keys.at(-1) ?? null,
      more: more || found.length === limit,
      traces: await this.traces(ws, rows, scan),
    };
  }

  /** A page of training_calls' keys in key order, each key's versions newest first (no text: see `texts`). */
  private async indexKeys(ws: string, scan: TrainingScan, limit: number): Promise<IndexKey[]> {
    const where = [`workspace_id = ${str(ws)}`, ...filterSql(scan.filter)];
    if (scan.from !== undefined) where.push(`prompt_hash >= ${hashLiteral(scan.from)}`);
    if (scan.below !== undefined) where.push(`prompt_hash < ${hashLiteral(scan.below)}`);
    if (scan.after) where.push(afterSql(scan.after));
    const found = await this.rows<{ ph: string; rh: string; trace_id: string; span_id: string; v: string; b: string }>(
      `SELECT toString(prompt_hash) AS ph, toString(response_hash) AS rh, trace_id, span_id,
         toString(ingested_at_ms) AS v, toString(stored_bytes) AS b
       FROM ${this.db}.training_calls WHERE ${where.join(' AND ')}
       ORDER BY prompt_hash, response_hash, trace_id, span_id, ingested_at_ms DESC
       LIMIT ${limit}`,
    );
    return found.map((r) => ({
      key: { promptHash: r.ph, responseHash: r.rh, traceId: r.trace_id, spanId: r.span_id },
      at: Number(r.v),
      bytes: Number(r.b),
    }));
  }

  /**
   * The keys whose row is their span's stored version, as newestSpans picks it: the newest ingested_at_ms, of a
   * trainable model call (a newer version of another kind is not indexed, and leaves the index rows behind). Where
   * that is unclear (two stored versions of one ingested_at_ms, or two texts of one span in the page) the span
   * itself is read, as before the index carried the text.
   */
  private async current(
    ws: string,
    keys: readonly TrainingKey[],
    first: ReadonlyMap<string, IndexKey>,
    filter: TrainingFilter,
  ): Promise<TrainingPage['rows']> {
    const versions = await this.versions(ws, keys);
    const now = keys.filter((k) => {
      const v = versions.get(spanOf(k));
      return v !== undefined && !v.tie && v.ok && v.at === first.get(keyOf(k))?.at;
    });
    const perSpan = new Map<string, number>();
    for (const k of now) perSpan.set(spanOf(k), (perSpan.get(spanOf(k)) ?? 0) + 1);
    const unsure = new Set(
      keys.filter((k) => versions.get(spanOf(k))?.tie || (perSpan.get(spanOf(k)) ?? 0) > 1).map(spanOf),
    );
    const texts = await this.texts(
      ws,
      now.filter((k) => !unsure.has(spanOf(k))),
      first,
    );
    const stored = await this.storedOf(
      ws,
      keys.filter((k) => unsure.has(spanOf(k))),
    );
    return keys.flatMap((key) => {
      const span = unsure.has(spanOf(key)) ? stored.get(spanOf(key)) : texts.get(keyOf(key));
      return isCurrent(key, span, filter) ? [{ key, span }] : [];
    });
  }

  /**
   * Each span's newest stored version (its ingested_at_ms), and whether it is a trainable model call: the narrow
   * columns only, on the days trace_days names, as the span reads (newestSpans) look them up. A page's traces lie in
   * every granule of spans, so this reads all of its rows' ids: no FINAL, which costs ten times the plain read there;
   * rows of one key not yet merged are told apart here instead (a tie at the newest is read again as newestSpans does).
   */
  private async versions(ws: string, keys: readonly TrainingKey[]): Promise<Map<string, Version>> {
    const out = new Map<string, Version>();
    if (keys.length === 0) return out;
    const spanIds = strList([...new Set(keys.map((k) => k.spanId))]);
    for (const chunk of lookupChunks(keys.map((k) => k.traceId))) {
      const days = await traceDaysOf(this.client, this.db, str(ws), chunk);
      if (days.length === 0) continue;
      const found = await this.rows<{ trace_id: string; span_id: string; v: string; ok: number }>(
        `SELECT trace_id, span_id, toString(ingested_at_ms) AS v, toUInt8(trainable = 1 AND kind = 'llm') AS ok
         FROM ${this.db}.spans
         WHERE workspace_id = ${str(ws)} AND start_date IN ${strList([...new Set(days.map((d) => d.d))])}
           AND trace_id IN ${strList([...new Set(days.map((d) => d.trace_id))])} AND span_id IN ${spanIds}`,
      );
      for (const r of found) {
        const at = Number(r.v);
        const had = out.get(spanKey(r.trace_id, r.span_id));
        if (had === undefined || at > had.at)
          out.set(spanKey(r.trace_id, r.span_id), { at, ok: r.ok === 1, tie: false });
        else if (at === had.at) had.tie = true;
      }
    }
    return out;
  }

  /** The text of these keys' rows (the version `first` names), from the page's range of training_calls only. */
  private async texts(
    ws: string,
    keys: readonly TrainingKey[],
    first: ReadonlyMap<string, IndexKey>,
  ): Promise<Map<string, SpanRecord>> {
    const out = new Map<string, SpanRecord>();
    if (keys.length === 0) return out;
    const wanted = new Set(keys.map(keyOf));
    const [lo, hi] = [keys[0]!.promptHash, keys.at(-1)!.promptHash].map(hashLiteral);
    for (const chunk of lookupChunks(keys.map((k) => k.traceId))) {
      const found = await this.rows<IndexReadRow>(
        `SELECT toString(prompt_hash) AS ph, toString(response_hash) AS rh, ${SPAN_COLUMNS}
         FROM ${this.db}.training_calls
         WHERE workspace_id = ${str(ws)} AND prompt_hash >= ${lo} AND prompt_hash <= ${hi}
           AND trace_id IN ${strList(chunk)}`,
      );
      for (const r of found) {
        const k = keyOf({ promptHash: r.ph, responseHash: r.rh, traceId: r.trace_id, spanId: r.span_id });
        if (wanted.has(k) && first.get(k)?.at === Number(r.ingested_at_ms)) out.set(k, fromReadRow(r));
      }
    }
    return out;
  }

  /** The stored version of these keys' spans, read from spans (the rare case `current` cannot tell). */
  private async storedOf(ws: string, keys: readonly TrainingKey[]): Promise<Map<string, SpanRecord>> {
    if (keys.length === 0) return new Map();
    const spans = await this.newest(ws, [...new Set(keys.map((k) => k.traceId))], {
      spanIds: [...new Set(keys.map((k) => k.spanId))],
    });
    return new Map(spans.map((s) => [spanKey(s.traceId, s.spanId), s]));
  }

  /** Votes, group ids and tool spans of the traces of a page's rows. */
  private traces(ws: string, rows: TrainingPage['rows'], scan: TrainingScan): Promise<TrainingPage['traces']> {
    return pageTraces({ signals: this.signals, links: this.links, newest: this.newest }, ws, rows, scan);
  }

  async coachDrafts(workspaceId: string, sessionIds: readonly string[]): Promise<Map<string, SpanRecord[]>> {
    const ws = str(wellFormed(workspaceId));
    const out = new Map<string, SpanRecord[]>();
    for (const chunk of lookupChunks(sessionIds.map(wellFormed))) {
      // The drafts' keys first (their session from the stored parameters), then their stored versions.
      const keys = await this.rows<{ trace_id: string; span_id: string }>(
        `SELECT trace_id, span_id FROM (
           SELECT trace_id, span_id, start_ns,
             visitParamExtractString(attr_values[indexOf(attr_keys, 'parameters')], 'coachSessionId') AS coach_session
           FROM ${this.db}.spans
           WHERE workspace_id = ${ws} AND source = 'coach' AND action_name = 'coach_local_draft' AND trainable = 1)
         WHERE coach_session IN ${strList(chunk)}
         ORDER BY start_ns DESC LIMIT ${DRAFTS_PER_SESSION} BY coach_session`,
      );
      if (keys.length === 0) continue;
      const wanted = new Set(keys.map((k) => `${k.trace_id}\u0000${k.span_id}`));
      const spans = await this.newest(wellFormed(workspaceId), [...new Set(keys.map((k) => k.trace_id))], {
        spanIds: [...new Set(keys.map((k) => k.span_id))],
      });
      const asked = new Set(chunk);
      for (const s of spans) {
        const session = coachSessionOf(s);
        if (!wanted.has(`${s.traceId}\u0000${s.spanId}`) || !asked.has(session)) continue;
        if (!(s.trainable && s.source === 'coach' && s.actionName === 'coach_local_draft')) continue;
        const list = out.get(session);
        if (list) list.push(s);
        else out.set(session, [s]);
      }
    }
    return out;
  }
}
