// DuckDB backend: one embedded database file, one connection, calls serialized.
import {
  type AnalyticsStore,
  ENRICHMENT_METHODS,
  type EnrichmentStore,
  SIGNAL_METHODS,
  type SignalStore,
  TRACE_LINK_METHODS,
  type TraceLinkStore,
  TRAINING_METHODS,
  type TrainingStore,
  SESSION_METHODS,
  type SessionStore,
  VERIFICATION_METHODS,
  type VerificationStore,
  WEBHOOK_METHODS,
  type WebhookStore,
} from '../core/ports/storage.ts';
import { DuckDbSignals } from './duckdb-signals.ts';
import { DuckDbActivity } from './duckdb-activity.ts';
import { delegating } from './delegate.ts';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { DuckDBInstance, listValue, type DuckDBConnection, type DuckDBValue } from '@duckdb/node-api';
import './duckdb-text.ts';
import type { SpanRecord, Source, SpanKind, Attributes } from '../core/record.ts';
import type {
  ApiKeyRecord,
  PublishedKey,
  SpanKey,
  SpanPage,
  SpanPart,
  SpanVersion,
  Storage,
  TraceSize,
  TraceFilter,
  TracePage,
  Workspace,
} from '../core/ports/storage.ts';
import { DUCKDB_MIGRATIONS, SPAN_COLUMNS, trainingRows } from './duckdb-migrations.ts';
import { DuckDbEnrichment } from './duckdb-enrichment.ts';
import { DuckDbTraceLinks, insertProxyCalls } from './duckdb-trace-links.ts';
import { DuckDbTraining } from './duckdb-training.ts';
import { DuckDbSessions } from './duckdb-sessions.ts';
import { insertStaged, type ColumnRows, stagingOf } from './duckdb-columns.ts';
import { refuseNewerSchema } from './startup.ts';
import { storageUnreachable } from '../core/errors.ts';
import { storageFailure } from './errors.ts';
import {
  attrsJson,
  bySpanKey,
  byStartThenId,
  checkNs,
  count,
  cutPart,
  finite,
  hasSpanFilter,
  latestPerSpan,
  normalizeFilter,
  proxyCallRowsOf,
  proxyResponseRows,
  tokens,
  toPage,
  USAGE_KINDS_SQL,
  wellFormed,
  type SpanFilter,
  type TraceAgg,
} from './codec.ts';

type Params = Record<string, DuckDBValue>;
type Row = Record<string, unknown>;

interface SpanRow {
  workspace_id: string;
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  name: string;
  kind: string;
  source: string;
  start_ns: bigint;
  end_ns: bigint;
  duration_ms: number;
  status: string;
  status_message: string;
  model: string;
  provider: string;
  prompt: string;
  response: string;
  prompt_tokens: bigint;
  completion_tokens: bigint;
  total_tokens: bigint;
  cost_usd: number;
  finish_reason: string;
  action_name: string;
  environment: string;
  request_id: string;
  training_preferred: boolean;
  trainable: boolean;
  attributes: string;
  resource_attributes: string;
  events_json: string;
  ingested_at_ms: bigint;
}

/**
 * The rows of spans matching `where` (and the workspace), for a read of whole rows: `rowid IN (this)` has DuckDB
 * find them first and then fetch only them (but see wholeRows). Filtered in one go, a scan read whole vectors (2,048 rows) of every column:
 * with large spans, a read of a few trace ids or span ids ran out of memory for a small answer.
 */
const rowsOf = (where: string) => `SELECT rowid FROM spans WHERE workspace_id = $ws AND ${where}`;

/**
 * The fallback's bound on one fetch: rows in its rowid range × rowids it checks each against (list_contains is a
 * linear search).
 */
const FETCH_COST = 4_000_000;

/**
 * Sorted rowids cut into runs for fetches by `rowid BETWEEN first AND last AND list_contains(run, rowid)`, each run
 * within FETCH_COST.
 */
export function rowidRuns(rowids: readonly bigint[], cost = FETCH_COST): bigint[][] {
  const sorted = [...rowids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const runs: bigint[][] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i + 1;
    while (j < sorted.length && Number(sorted[j]! - sorted[i]! + 1n) * (j - i + 1) <= cost) j++;
    runs.push(sorted.slice(i, j));
    i = j;
  }
  return runs;
}

/** What a part's byte budget counts (SpanPage.maxBytes): the bytes of a span's text as stored. */
const STORED_BYTES = `(strlen(name) + strlen(status_message) + strlen(model) + strlen(provider) + strlen(prompt) + strlen(response)
  + strlen(attributes) + strlen(resource_attributes) + strlen(events_json))`;

const KEY_COLUMNS = new Set(['workspace_id', 'trace_id', 'span_id']);
// Replays collapse: the stored row is replaced only by one at least as new.
const UPSERT_SPANS = `INSERT INTO spans SELECT * FROM ${stagingOf('spans')}
  ON CONFLICT (workspace_id, trace_id, span_id) DO UPDATE SET
  ${SPAN_COLUMNS.filter((c) => !KEY_COLUMNS.has(c))
    .map((c) => `${c} = excluded.${c}`)
    .join(', ')}
  WHERE excluded.ingested_at_ms >= spans.ingested_at_ms`;
/** Every trainable model call's version into the training export's index (rows of earlier versions stay: see v10). */
const INDEX_TRAINING = `INSERT INTO training_spans ${trainingRows(stagingOf('spans'))}`;

/**
 * DuckDB's FatalException ("FATAL Error: …", e.g. a checkpoint that hit a full disk) invalidates the instance:
 * every later statement fails until the database is closed and opened again.
 */
const isFatal = (err: unknown): err is Error => err instanceof Error && err.message.startsWith('FATAL Error:');
/** Backoff between reopens: a disk still full fails each one (or the next checkpoint), and a reopen replays the WAL. */
const REOPEN_MIN_MS = 1_000;
const REOPEN_MAX_MS = 16_000;
/** An instance that lasted this long was healthy: its invalidation starts the backoff over. */
const REOPEN_RESET_MS = 60_000;

/** How long opening waits for another process holding the file (an offline CLI command, a server stopping). */
const LOCK_WAIT_MS = 30_000;

/**
 * DuckDB lets one process have the file: a CLI command run while no server was up (or one starting) holds it for
 * a moment. Opening waits for it rather than failing a server's start.
 */
async function createWaitingForLock(path: string, options: Record<string, string>): Promise<DuckDBInstance> {
  const until = Date.now() + LOCK_WAIT_MS;
  for (let pause = 100; ; pause = Math.min(pause * 2, 2_000)) {
    try {
      return await DuckDBInstance.create(path, options);
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      if (!/Could not set lock on file/i.test(msg)) throw err;
      if (Date.now() + pause > until) {
        throw new Error(
          `the embedded store ${path} is held by another process (a tracegate CLI command or server) and was not released within ${LOCK_WAIT_MS / 1000} s: ${msg.split('\n')[0]}`,
          { cause: err },
        );
      }
      await new Promise((r) => setTimeout(r, pause));
    }
  }
}

/** The ports implemented by modules of their own, by delegation to the field holding each module. */
const Delegated = delegating<
  EnrichmentStore &
    VerificationStore &
    AnalyticsStore &
    SignalStore &
    WebhookStore &
    TraceLinkStore &
    TrainingStore &
    SessionStore
>({
  enrichment: [...ENRICHMENT_METHODS, ...VERIFICATION_METHODS, 'findingsDaily'], // DuckDbEnrichment
  signals: [...SIGNAL_METHODS, ...WEBHOOK_METHODS, 'usage'], // DuckDbSignals (usage: the spans' plus votes)
  traceLinks: TRACE_LINK_METHODS, // DuckDbTraceLinks
  training: TRAINING_METHODS, // DuckDbTraining
  sessions: SESSION_METHODS, // DuckDbSessions
  analytics: ['activity'], // DuckDbActivity
});

export class DuckDbStorage extends Delegated implements Storage {
  readonly kind = 'duckdb' as const;
  private readonly path: string;
  private instance: DuckDBInstance | null = null;
  private conn: DuckDBConnection | null = null;
  // One connection, so one statement (or transaction) at a time.
  private queue: Promise<unknown> = Promise.resolve();
  readonly enrichment = new DuckDbEnrichment((fn, write) => this.serial(fn, write));
  readonly signals = new DuckDbSignals(
    (fn, write) => this.serial(fn, write),
    (ws, q) => this.enrichment.usage(ws, q),
  );
  readonly traceLinks = new DuckDbTraceLinks((fn, write) => this.serial(fn, write));
  readonly training = new DuckDbTraining(
    (fn, write) => this.serial(fn, write),
    this.signals,
    this.traceLinks,
    (ws, ids, only) => this.newestSpans(ws, ids, only),
  );
  readonly sessions = new DuckDbSessions((fn, write) => this.serial(fn, write));
  readonly analytics = new DuckDbActivity((fn, write) => this.serial(fn, write));
  /** Set while the instance is closed after DuckDB invalidated it: why, and when to try opening it again. */
  private lost: { reason: string; retryAt: number } | null = null;
  private reopenDelayMs = REOPEN_MIN_MS;
  private openedAt = 0;

  private readonly memoryLimit: string;
  /**
   * DuckDB's checkpoint_threshold in MiB (0: DuckDB's own, 16). A checkpoint writes the key indexes whole
   * (duckdb/duckdb#24848): at 16 MiB, under load, that is every few seconds and ever costlier as the file grows.
   */
  private readonly checkpointMb: number;
  /**
   * DuckDB's threads for the batch inserts (0: as for everything else, DuckDB's own, one per core). A batch of a few
   * thousand rows gains nothing from a second thread and pays for waking it; reads, which do gain, keep every thread.
   */
  private readonly writeThreads: number;
  /** The threads DuckDB runs with now, and those reads use (its setting at open). */
  private threads = { now: 0, reads: 0 };
  /** Whole-row reads that ran out of DuckDB's memory and were read again by rowid (see wholeRows): a diagnostic. */
  outOfMemoryRetries = 0;

  /**
   * `path` is the database file (created with its directory), e.g. `${DATA_DIR}/tracegate.duckdb`. `memoryLimit`:
   * DuckDB's memory_limit (tests use a small one to show a read stays within it).
   */
  constructor(path: string, options: { memoryLimit?: string; checkpointMb?: number; writeThreads?: number } = {}) {
    super();
    this.path = path;
    this.memoryLimit = options.memoryLimit ?? '256MB';
    this.checkpointMb = options.checkpointMb ?? 0;
    this.writeThreads = options.writeThreads ?? 0;
  }

  /** One statement at a time; `write`: a batch insert, run with writeThreads. */
  private serial<T>(fn: (c: DuckDBConnection) => Promise<T>, write = false): Promise<T> {
    const run = this.queue.then(async () => {
      const c = this.conn ?? (await this.reopen());
      try {
        const want = write && this.writeThreads ? this.writeThreads : this.threads.reads;
        if (want !== this.threads.now) {
          await c.run(`SET threads = ${want}`);
          this.threads.now = want;
        }
        return await fn(c);
      } catch (err) {
        if (!isFatal(err)) throw err;
        this.drop(err);
        throw storageUnreachable(err.message, { cause: err });
      }
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async open(): Promise<void> {
    this.openedAt = Date.now();
    await mkdir(dirname(this.path), { recursive: true });
    // DuckDB's default (80% of RAM) suits an analytics box, not a collector sharing the machine.
    const instance = await createWaitingForLock(this.path, {
      memory_limit: this.memoryLimit,
      ...(this.checkpointMb ? { checkpoint_threshold: `${this.checkpointMb}MiB` } : {}),
    });
    let conn: DuckDBConnection | null = null;
    try {
      conn = await instance.connect();
      const [[threads]] = (await conn.runAndReadAll("SELECT current_setting('threads')")).getRows() as [
        [number | bigint],
      ];
      this.threads = { now: Number(threads), reads: Number(threads) };
      this.conn = conn;
    } catch (err) {
      try {
        conn?.closeSync();
      } catch {
        /* closing the instance is what matters */
      }
      instance.closeSync();
      throw err;
    }
    this.instance = instance;
  }

  /**
   * Closes an invalidated instance; the next call after the backoff opens it again (recovery replays the WAL, as at
   * a restart). Done here rather than by replacing the worker thread: the old instance must be closed before the
   * new one opens, and DuckDB's file lock does not stop a second instance of the same process from opening the file.
   */
  private drop(err: Error): void {
    const now = Date.now();
    if (now - this.openedAt >= REOPEN_RESET_MS) this.reopenDelayMs = REOPEN_MIN_MS;
    this.lost = { reason: err.message, retryAt: now + this.reopenDelayMs };
    this.reopenDelayMs = Math.min(this.reopenDelayMs * 2, REOPEN_MAX_MS);
    try {
      this.conn?.closeSync();
    } catch {
      /* already unusable */
    }
    try {
      this.instance?.closeSync();
    } catch {
      /* already unusable */
    }
    this.conn = null;
    this.instance = null;
  }

  /** Runs inside serial(): reopens a dropped instance (and its migrations and temp tables) once the backoff is over. */
  private async reopen(): Promise<DuckDBConnection> {
    if (!this.lost) throw new Error('DuckDbStorage is not initialized');
    if (Date.now() < this.lost.retryAt) throw this.unavailable();
    try {
      await this.open();
      // A disk still too full for the checkpoint that failed fails here, rather than the next write after "recovery".
      await this.conn!.run('CHECKPOINT');
      await this.migrate(this.conn!);
    } catch (err) {
      this.drop(err instanceof Error ? err : new Error(String(err)));
      throw this.unavailable();
    }
    this.lost = null;
    return this.conn!;
  }

  /** A storage outage (503), as the FATAL error itself is. */
  private unavailable(): Error {
    const s = Math.max(0, Math.ceil((this.lost!.retryAt - Date.now()) / 1000));
    return storageUnreachable(`DuckDB database unavailable (reopening in ${s} s): ${this.lost!.reason}`);
  }

  private async all<T extends Row>(c: DuckDBConnection, sql: string, params: Params = {}): Promise<T[]> {
    const reader = await c.runAndReadAll(sql, params);
    return reader.getRowObjectsJS() as T[];
  }

  /**
   * Whole span rows matching `where`, unsorted. The semi-join on rowids is the fast form, but its scan still reads whole
   * vectors (2,048 rows) of the text columns, and in the process that wrote them each vector's text is held in memory at
   * once: there a read of one trace among large spans ran out of memory. Read again by rowids (see inRuns). Not inside
   * tx(): the failed statement would have aborted the transaction.
   */
  private async wholeRows(c: DuckDBConnection, where: string, params: Params): Promise<Array<SpanRow & Row>> {
    try {
      return await this.all<SpanRow & Row>(c, `SELECT * FROM spans WHERE rowid IN (${rowsOf(where)})`, params);
    } catch (err) {
      if (storageFailure(err) !== 'out_of_memory') throw err;
    }
    this.outOfMemoryRetries++;
    const ids = (await this.all<{ rowid: bigint }>(c, rowsOf(where), params)).map((r) => r.rowid);
    return this.inRuns<SpanRow & Row>(c, '*', ids);
  }

  /**
   * `columns` of the spans at `rowids` (and matching `where`), a run of nearby rowids at a time, by a filter evaluated in
   * the scan: it reads the text of only the rows it keeps. Sizes (strlen of the text) need the trace's id in `where`
   * as well: without it, that read ran out of memory again.
   */
  private async inRuns<T extends Row>(
    c: DuckDBConnection,
    columns: string,
    rowids: readonly bigint[],
    where = 'TRUE',
    params: Params = {},
  ): Promise<T[]> {
    const out: T[] = [];
    for (const run of rowidRuns(rowids)) {
      const rows = await this.all<T>(
        c,
        `SELECT ${columns} FROM spans
        WHERE ${where} AND rowid BETWEEN $lo::BIGINT AND $hi::BIGINT AND list_contains($rowids::BIGINT[], rowid)`,
        { ...params, lo: run[0]!, hi: run.at(-1)!, rowids: listValue(run) },
      );
      for (const r of rows) out.push(r);
    }
    return out;
  }

  /** Runs fn inside BEGIN/COMMIT, rolling back on error. */
  private async tx<T>(c: DuckDBConnection, fn: () => Promise<T>): Promise<T> {
    await c.run('BEGIN TRANSACTION');
    try {
      const out = await fn();
      await c.run('COMMIT');
      return out;
    } catch (err) {
      await c.run('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  async init(): Promise<void> {
    if (!this.conn && !this.lost) await this.open();
    await this.serial((c) => this.migrate(c));
  }

  /** Idempotent: run by init and by every reopen. */
  private async migrate(c: DuckDBConnection): Promise<void> {
    await c.run(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMP NOT NULL)',
    );
    const applied = new Set(
      (await this.all<{ version: number }>(c, 'SELECT version FROM schema_migrations')).map((r) => r.version),
    );
    refuseNewerSchema(applied, DUCKDB_MIGRATIONS, `the embedded store ${this.path}`);
    for (const m of DUCKDB_MIGRATIONS) {
      if (applied.has(m.version)) continue;
      await this.tx(c, async () => {
        for (const sql of m.statements) await c.run(sql);
        await c.run('INSERT INTO schema_migrations VALUES ($v, now())', { v: m.version });
      });
    }
  }

  async close(): Promise<void> {
    await this.queue;
    this.conn?.closeSync();
    this.instance?.closeSync();
    this.conn = null;
    this.instance = null;
    this.lost = null;
  }

  async ping(): Promise<boolean> {
    try {
      return await this.serial(async (c) => (await this.all(c, 'SELECT 1 AS ok')).length === 1);
    } catch {
      return false;
    }
  }

  async insertSpans(input: SpanRecord[]): Promise<void> {
    if (input.length === 0) return;
    // Dedup first: ON CONFLICT cannot touch the same row twice in one statement.
    const rows = spansToAppend(input);
    const owned = proxyResponseRows(input);
    const calls = proxyCallRowsOf(input);
    await this.serial(async (c) => {
      await insertProxyCalls(c, calls);
      // Before the spans, as on ClickHouse; a failed batch is retried whole and both writes are idempotent.
      if (owned.length) {
        await insertStaged(
          c,
          'proxy_responses',
          (index) => {
            for (const o of owned) {
              index.appendVarchar(o.workspace_id);
              index.appendVarchar(o.response_id);
              index.appendVarchar(o.upstream);
              index.appendVarchar(o.trace_id);
              index.endRow();
            }
          },
          `INSERT INTO proxy_responses SELECT * FROM ${stagingOf('proxy_responses')} ON CONFLICT DO NOTHING`,
        );
      }
      await insertStaged(c, 'spans', (cols) => appendSpans(cols, rows), [UPSERT_SPANS, INDEX_TRAINING]);
    }, true);
  }

  async getTrace(workspaceId: string, traceId: string): Promise<SpanRecord[]> {
    return (await this.getTraces(workspaceId, [traceId])).get(traceId) ?? [];
  }

  async getTracePart(workspaceId: string, traceId: string, page: SpanPage): Promise<SpanPart> {
    const limit = Math.max(1, Math.trunc(page.limit));
    const params: Params = { ws: wellFormed(workspaceId), t: wellFormed(traceId), lim: limit + 1 };
    let after = '';
    if (page.after) {
      Object.assign(params, { after_ns: BigInt(page.after.startNs), after_span: wellFormed(page.after.spanId) });
      after = 'AND (start_ns > $after_ns OR (start_ns = $after_ns AND span_id > $after_span))';
    }
    // The part's span ids first, then their sizes (for a budget), then only its rows: ORDER BY … LIMIT over whole rows was
    // planned as a sort of the whole trace past ~5,000 rows (out of memory on a large trace). The sizes are read by
    // rowid, of these rows only: beside ORDER BY … LIMIT, DuckDB fetched the text by a rowid join (late materialization)
    // that ran out of memory in the process that wrote the spans (see wholeRows).
    return this.serial(async (c) => {
      const keys = await this.all<{ span_id: string; r: bigint }>(
        c,
        `SELECT span_id, rowid AS r FROM spans
        WHERE workspace_id = $ws AND trace_id = $t ${after} ORDER BY start_ns, span_id LIMIT $lim`,
        params,
      );
      const sizes =
        page.maxBytes === undefined
          ? null
          : new Map(
              (
                await this.inRuns<{ r: bigint; b: bigint }>(
                  c,
                  `rowid AS r, ${STORED_BYTES} AS b`,
                  keys.map((k) => k.r),
                  'workspace_id = $ws AND trace_id = $t',
                  { ws: params.ws!, t: params.t! },
                )
              ).map((x) => [x.r, Number(x.b)]),
            );
      const { take, more } = cutPart(
        keys.map((k) => ({ id: k.span_id, bytes: sizes?.get(k.r) ?? 0 })),
        limit,
        page.maxBytes,
      );
      if (take.length === 0) return { spans: [], more };
      const rows = await this.wholeRows(c, 'trace_id = $t AND span_id IN (SELECT unnest($ids))', {
        ws: params.ws!,
        t: params.t!,
        ids: listValue(take.map((k) => k.id)),
      });
      const order = new Map(take.map((k, i) => [k.id, i]));
      return { spans: rows.map(fromRow).sort((a, b) => order.get(a.spanId)! - order.get(b.spanId)!), more };
    });
  }

  async getSpans(workspaceId: string, traceId: string, spanIds: readonly string[]): Promise<SpanRecord[]> {
    if (spanIds.length === 0) return [];
    const rows = await this.serial((c) =>
      this.wholeRows(
        c,
        'trace_id = $t AND span_id IN (SELECT unnest($ids))', // sorted here (see getTraces)
        { ws: wellFormed(workspaceId), t: wellFormed(traceId), ids: listValue(spanIds.map(wellFormed)) },
      ),
    );
    return rows.map(fromRow).sort(bySpanKey);
  }

  async spanVersions(workspaceId: string, keys: readonly SpanKey[]): Promise<SpanVersion[]> {
    if (keys.length === 0) return [];
    // The keys as two lists zipped by unnest, joined on the primary key: one row per stored span.
    const rows = await this.serial((c) =>
      this.all<{ trace_id: string; span_id: string; v: bigint } & Row>(
        c,
        `SELECT s.trace_id, s.span_id, s.ingested_at_ms AS v FROM spans s
       JOIN (SELECT DISTINCT unnest($t) AS t, unnest($s) AS sp) k ON s.trace_id = k.t AND s.span_id = k.sp
       WHERE s.workspace_id = $ws`,
        {
          ws: wellFormed(workspaceId),
          t: listValue(keys.map((k) => wellFormed(k.traceId))),
          s: listValue(keys.map((k) => wellFormed(k.spanId))),
        },
      ),
    );
    return rows.map((r) => ({ traceId: r.trace_id, spanId: r.span_id, ingestedAtMs: Number(r.v) })).sort(bySpanKey);
  }

  /** The stored spans of these traces: `only` those span ids, of that kind. */
  private async newestSpans(
    workspaceId: string,
    traceIds: readonly string[],
    only: { spanIds?: readonly string[]; kind?: string; perTrace?: number },
  ): Promise<SpanRecord[]> {
    if (traceIds.length === 0) return [];
    const params: Params = { ws: wellFormed(workspaceId), t: listValue(traceIds.map(wellFormed)) };
    let where = 'trace_id IN (SELECT unnest($t))';
    if (only.spanIds?.length) {
      where += ' AND span_id IN (SELECT unnest($s))';
      params.s = listValue(only.spanIds.map(wellFormed));
    }
    if (only.kind !== undefined) {
      where += ' AND kind = $kind';
      params.kind = only.kind;
    }
    if (only.perTrace !== undefined) {
      // Ranked on the key columns alone: the text of the spans left out is never read.
      where += ` AND rowid IN (SELECT rowid FROM (SELECT rowid, row_number() OVER (PARTITION BY trace_id
        ORDER BY start_ns, span_id) AS n FROM spans WHERE workspace_id = $ws AND ${where}) WHERE n <= $per)`;
      params.per = Math.max(0, Math.trunc(only.perTrace));
    }
    return (await this.serial((c) => this.wholeRows(c, where, params))).map(fromRow);
  }

  async getTraces(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, SpanRecord[]>> {
    const out = new Map<string, SpanRecord[]>();
    if (traceIds.length === 0) return out;
    // Sorted here: ORDER BY sorts whole rows, and ran out of DuckDB's memory on large spans.
    const rows = await this.serial((c) =>
      this.wholeRows(c, 'trace_id IN (SELECT unnest($ids))', {
        ws: wellFormed(workspaceId),
        ids: listValue(traceIds.map(wellFormed)),
      }),
    );
    for (const row of rows) {
      const rec = fromRow(row);
      const list = out.get(rec.traceId);
      if (list) list.push(rec);
      else out.set(rec.traceId, [rec]);
    }
    for (const list of out.values()) list.sort(byStartThenId);
    return out;
  }

  async traceSizes(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, TraceSize>> {
    if (traceIds.length === 0) return new Map();
    const rows = await this.serial((c) =>
      this.all<{ trace_id: string; n: bigint; b: bigint } & Row>(
        c,
        `SELECT trace_id, count(*) AS n, sum(${STORED_BYTES}) AS b FROM spans
      WHERE workspace_id = $ws AND trace_id IN (SELECT unnest($ids)) GROUP BY trace_id`,
        { ws: wellFormed(workspaceId), ids: listValue(traceIds.map(wellFormed)) },
      ),
    );
    return new Map(rows.map((r) => [r.trace_id, { spans: Number(r.n), bytes: Number(r.b) }]));
  }

  async spanSizes(workspaceId: string, traceId: string, spanIds: readonly string[]): Promise<Map<string, number>> {
    if (spanIds.length === 0) return new Map();
    // By rowid, as the rows of a part (a trace's text read for the sizes of a few of its spans: all of it, at once in the
    // process that wrote it)
    const rows = await this.serial(async (c) => {
      const key = { ws: wellFormed(workspaceId), t: wellFormed(traceId) };
      const ids = await this.all<{ rowid: bigint }>(c, rowsOf('trace_id = $t AND span_id IN (SELECT unnest($ids))'), {
        ...key,
        ids: listValue(spanIds.map(wellFormed)),
      });
      return this.inRuns<{ span_id: string; b: bigint }>(
        c,
        `span_id, ${STORED_BYTES} AS b`,
        ids.map((r) => r.rowid),
        'workspace_id = $ws AND trace_id = $t',
        key,
      );
    });
    return new Map(rows.map((r) => [r.span_id, Number(r.b)]));
  }

  async unverifiedTraces(
    workspaceId: string,
    after: string | null,
    limit: number,
  ): Promise<Array<{ traceId: string } & TraceSize>> {
    const params: Params = { ws: wellFormed(workspaceId), lim: BigInt(Math.max(1, Math.trunc(limit))) };
    if (after !== null) params.after = wellFormed(after);
    // The page's ids from trace_id alone, then the sizes of those: summed in one go, every page read the text of
    // every trace after it.
    const rows = await this.serial((c) =>
      this.all<{ trace_id: string } & Row>(
        c,
        `SELECT DISTINCT trace_id FROM spans
      WHERE workspace_id = $ws ${after !== null ? 'AND trace_id > $after' : ''}
        AND trace_id NOT IN (SELECT trace_id FROM verification WHERE workspace_id = $ws)
      ORDER BY trace_id LIMIT $lim`,
        params,
      ),
    );
    const sizes = await this.traceSizes(
      workspaceId,
      rows.map((r) => r.trace_id),
    );
    return rows.flatMap((r) => {
      const t = sizes.get(r.trace_id);
      return t ? [{ traceId: r.trace_id, ...t }] : [];
    });
  }

  async listTraces(workspaceId: string, filter: TraceFilter): Promise<TracePage> {
    const f = normalizeFilter(filter);
    const params: Params = { ws: wellFormed(workspaceId), lim: f.limit + 1 };
    let match = hasSpanFilter(f)
      ? `AND trace_id IN (SELECT trace_id FROM spans WHERE workspace_id = $ws AND ${spanConditions(f, params)})`
      : '';
    if (f.traceId !== undefined) {
      match += ' AND trace_id = $tid';
      params.tid = f.traceId;
    }
    if (f.feedback !== undefined) {
      const voted = await this.signals.votedTraces(workspaceId, f.feedback);
      if (voted.length === 0) return { items: [], nextCursor: null };
      match += ' AND trace_id IN (SELECT unnest($voted))';
      params.voted = listValue(voted);
    }
    // The trace status is one of its spans' statuses: only traces with such a span need aggregating.
    if (f.status !== undefined)
      match += ' AND trace_id IN (SELECT trace_id FROM spans WHERE workspace_id = $ws AND status = $status)';
    if (f.cursor) Object.assign(params, { cs: f.cursor.s, ct: f.cursor.t });
    if (f.status !== undefined) params.status = f.status;
    // A first pass over a few narrow columns picks the page (each trace's start; for a status filter, its status:
    // 'error' when any span errored, else the root-most span's), and only its traces are rolled up: rolling up
    // a whole workspace took time in proportion to it and could exhaust the memory limit.
    const having: string[] = [];
    if (f.status !== undefined)
      having.push(
        `(CASE WHEN bool_or(status = 'error') THEN 'error' ELSE arg_min(status, (parent_span_id <> '', start_ns, span_id)) END) = $status`,
      );
    if (f.cursor) having.push('(min(start_ns) < $cs::UBIGINT OR (min(start_ns) = $cs::UBIGINT AND trace_id < $ct))');
    match += ` AND trace_id IN (
      SELECT trace_id FROM spans WHERE workspace_id = $ws ${match}
      GROUP BY trace_id
      ${having.length ? `HAVING ${having.join(' AND ')}` : ''}
      ORDER BY min(start_ns) DESC, trace_id DESC
      LIMIT $lim)`;
    // Root-most span: no parent first, then earliest start, then lowest span id. arg_min keeps one value per
    // trace, where an ordered first() buffers every span of the group.
    const root = (col: string) => `arg_min(${col}, (parent_span_id <> '', start_ns, span_id))`;
    const usage = `FILTER (WHERE kind IN ${USAGE_KINDS_SQL})`;
    const rows = await this.serial((c) =>
      this.all<AggRow & Row>(
        c,
        `
      SELECT * FROM (
        SELECT trace_id,
          min(start_ns) AS t_start,
          max(end_ns) AS t_end,
          count(*) AS n_spans,
          count(*) ${usage} AS n_usage,
          coalesce(sum(prompt_tokens) ${usage}, 0) AS sum_prompt,
          coalesce(sum(completion_tokens) ${usage}, 0) AS sum_completion,
          coalesce(sum(total_tokens) ${usage}, 0) AS sum_total,
          coalesce(sum(cost_usd) ${usage}, 0) AS sum_cost,
          max(prompt_tokens) AS max_prompt,
          max(completion_tokens) AS max_completion,
          max(total_tokens) AS max_total,
          max(cost_usd) AS max_cost,
          count(*) FILTER (WHERE status = 'error') AS n_errors,
          ${root('name')} AS root_name,
          arg_min(model, (kind <> 'llm', parent_span_id <> '', start_ns, span_id)) AS root_model,
          ${root('source')} AS root_source,
          ${root('action_name')} AS root_action,
          ${root('environment')} AS root_env,
          ${root('status')} AS root_status
        FROM spans
        WHERE workspace_id = $ws ${match}
        GROUP BY trace_id
      )
      ORDER BY t_start DESC, trace_id DESC
      LIMIT $lim`,
        params,
      ),
    );
    return toPage(rows.map(fromAggRow), f.limit);
  }

  /** DuckDB's own account of its memory (and temp files) by use, in bytes: what the memory limit covers. */
  async memoryByTag(): Promise<Record<string, { memory: number; temp: number }>> {
    const rows = await this.serial((c) =>
      this.all<{ tag: string; m: bigint; t: bigint }>(
        c,
        'SELECT tag, memory_usage_bytes AS m, temporary_storage_bytes AS t FROM duckdb_memory()',
      ),
    );
    return Object.fromEntries(rows.map((r) => [r.tag, { memory: Number(r.m), temp: Number(r.t) }]));
  }

  async countSpans(workspaceId: string): Promise<number> {
    // The primary key makes every row a distinct span.
    const [row] = await this.serial((c) =>
      this.all<{ n: bigint }>(c, 'SELECT count(*) AS n FROM spans WHERE workspace_id = $ws', {
        ws: wellFormed(workspaceId),
      }),
    );
    return Number(row?.n ?? 0n);
  }

  async hasProxyResponse(workspaceId: string, responseId: string, upstream: string): Promise<boolean> {
    const rows = await this.serial((c) =>
      this.all(
        c,
        'SELECT 1 AS one FROM proxy_responses WHERE workspace_id = $ws AND response_id = $id AND upstream = $up LIMIT 1',
        { ws: wellFormed(workspaceId), id: wellFormed(responseId), up: wellFormed(upstream) },
      ),
    );
    return rows.length > 0;
  }

  // ---- workspaces and API keys ----

  async createWorkspace(ws: Workspace): Promise<void> {
    // The id follows from the name (ensureWorkspace): a second create of the same workspace keeps the first.
    await this.serial((c) =>
      c.run('INSERT INTO workspaces VALUES ($id, $name, $at) ON CONFLICT DO NOTHING', {
        id: wellFormed(ws.id),
        name: wellFormed(ws.name),
        at: BigInt(count(ws.createdAtMs)),
      }),
    );
  }

  async getWorkspaceByName(name: string): Promise<Workspace | null> {
    return this.oneWorkspace('name = $v', wellFormed(name));
  }

  async getWorkspace(id: string): Promise<Workspace | null> {
    return this.oneWorkspace('id = $v', wellFormed(id));
  }

  private async oneWorkspace(where: string, v: string): Promise<Workspace | null> {
    const [row] = await this.serial((c) =>
      this.all<{ id: string; name: string; created_at_ms: bigint }>(
        c,
        `SELECT id, name, created_at_ms FROM workspaces WHERE ${where} ORDER BY created_at_ms, id LIMIT 1`,
        { v },
      ),
    );
    return row ? { id: row.id, name: row.name, createdAtMs: Number(row.created_at_ms) } : null;
  }

  async putApiKey(key: ApiKeyRecord): Promise<void> {
    await this.serial((c) =>
      c.run('INSERT OR REPLACE INTO api_keys VALUES ($id, $ws, $hash, $created, $revoked)', {
        id: wellFormed(key.keyId),
        ws: wellFormed(key.workspaceId),
        hash: wellFormed(key.hash),
        created: BigInt(count(key.createdAtMs)),
        revoked: BigInt(count(key.revokedAtMs)),
      }),
    );
  }

  private async readKeys(where: string, params: Params): Promise<ApiKeyRecord[]> {
    const rows = await this.serial((c) =>
      this.all<{ key_id: string; workspace_id: string; hash: string; created_at_ms: bigint; revoked_at_ms: bigint }>(
        c,
        `SELECT * FROM api_keys WHERE ${where} ORDER BY created_at_ms, key_id`,
        params,
      ),
    );
    return rows.map((r) => ({
      keyId: r.key_id,
      workspaceId: r.workspace_id,
      hash: r.hash,
      createdAtMs: Number(r.created_at_ms),
      revokedAtMs: Number(r.revoked_at_ms),
    }));
  }

  async getApiKey(keyId: string): Promise<ApiKeyRecord | null> {
    const [k] = await this.readKeys('key_id = $id', { id: wellFormed(keyId) });
    return k ?? null;
  }

  async listApiKeys(workspaceId?: string): Promise<ApiKeyRecord[]> {
    return workspaceId === undefined
      ? this.readKeys('true', {})
      : this.readKeys('workspace_id = $ws', { ws: wellFormed(workspaceId) });
  }

  async revokeApiKey(keyId: string, atMs: number): Promise<boolean> {
    return this.serial(async (c) => {
      const id = wellFormed(keyId);
      // Already revoked keys keep their first revocation time.
      await c.run('UPDATE api_keys SET revoked_at_ms = $at WHERE key_id = $id AND revoked_at_ms = 0', {
        id,
        at: BigInt(count(atMs)),
      });
      return (await this.all(c, 'SELECT 1 FROM api_keys WHERE key_id = $id', { id })).length > 0;
    });
  }

  // ---- workspace settings: every version is a row; the highest one is current ----

  async getSettings(workspaceId: string): Promise<{ doc: string; version: number } | null> {
    const [row] = await this.serial((c) =>
      this.all<{ doc: string; version: bigint }>(
        c,
        'SELECT doc, version FROM settings WHERE workspace_id = $ws ORDER BY version DESC LIMIT 1',
        { ws: wellFormed(workspaceId) },
      ),
    );
    return row ? { doc: row.doc, version: Number(row.version) } : null;
  }

  async putSettings(workspaceId: string, doc: string, version: number, atMs: number): Promise<boolean> {
    // A version already written stays: this write then did not count (one process owns the file, so this is
    // two changes racing in it, which SettingsStore serializes anyway).
    const ws = wellFormed(workspaceId),
      v = BigInt(count(version)),
      text = wellFormed(doc),
      at = BigInt(count(atMs));
    const [row] = await this.serial(async (c) => {
      await c.run('INSERT INTO settings VALUES ($ws, $v, $doc, $at) ON CONFLICT DO NOTHING', { ws, v, doc: text, at });
      return this.all<{ doc: string; updated_at_ms: bigint }>(
        c,
        'SELECT doc, updated_at_ms FROM settings WHERE workspace_id = $ws AND version = $v',
        { ws, v },
      );
    });
    return row?.doc === text && row.updated_at_ms === at;
  }

  // ---- published verification keys ----

  async publishKeys(keys: PublishedKey[]): Promise<void> {
    await this.serial(async (c) => {
      for (const k of keys) {
        await c.run('INSERT INTO verification_keys VALUES ($id, $pem, $at) ON CONFLICT DO NOTHING', {
          id: wellFormed(k.keyId),
          pem: wellFormed(k.publicKeyPem),
          at: BigInt(count(k.publishedAtMs)),
        });
      }
    });
  }

  async publishedKeys(): Promise<PublishedKey[]> {
    const rows = await this.serial((c) =>
      this.all<{ key_id: string; public_key_pem: string; published_at_ms: bigint }>(
        c,
        'SELECT key_id, public_key_pem, published_at_ms FROM verification_keys ORDER BY key_id',
      ),
    );
    return rows.map((r) => ({
      keyId: r.key_id,
      publicKeyPem: r.public_key_pem,
      publishedAtMs: Number(r.published_at_ms),
    }));
  }
}

type Appender = Pick<
  ColumnRows,
  'appendVarchar' | 'appendBigInt' | 'appendUBigInt' | 'appendDouble' | 'appendBoolean' | 'endRow'
>;

export interface SpanToAppend {
  r: SpanRecord;
  start: bigint;
  end: bigint;
}

/**
 * The newest version of each span, its times checked: a bad value throws here, before anything is appended, so it
 * cannot leave a half-written row in the appender.
 */
export function spansToAppend(input: SpanRecord[]): SpanToAppend[] {
  return latestPerSpan(input).map((r) => ({
    r,
    start: BigInt(checkNs(r.startTimeNs, 'startTimeNs')),
    end: BigInt(checkNs(r.endTimeNs, 'endTimeNs')),
  }));
}

/** The rows in SPAN_COLUMNS order (also how bench/storage-floor.ts feeds DuckDB). */
export function appendSpans(a: Appender, rows: readonly SpanToAppend[]): void {
  for (const { r, start, end } of rows) appendSpan(a, r, start, end);
}

/** One row in SPAN_COLUMNS order. */
function appendSpan(a: Appender, r: SpanRecord, startNs: bigint, endNs: bigint): void {
  const w = wellFormed;
  a.appendVarchar(w(r.workspaceId));
  a.appendVarchar(w(r.traceId));
  a.appendVarchar(w(r.spanId));
  a.appendVarchar(w(r.parentSpanId));
  a.appendVarchar(w(r.name));
  a.appendVarchar(w(r.kind));
  a.appendVarchar(w(r.source));
  a.appendUBigInt(startNs);
  a.appendUBigInt(endNs);
  a.appendDouble(finite(r.durationMs));
  a.appendVarchar(w(r.status));
  a.appendVarchar(w(r.statusMessage));
  a.appendVarchar(w(r.model));
  a.appendVarchar(w(r.provider));
  a.appendVarchar(w(r.prompt));
  a.appendVarchar(w(r.response));
  a.appendBigInt(BigInt(tokens(r.promptTokens)));
  a.appendBigInt(BigInt(tokens(r.completionTokens)));
  a.appendBigInt(BigInt(tokens(r.totalTokens)));
  a.appendDouble(finite(r.costUsd));
  a.appendVarchar(w(r.finishReason));
  a.appendVarchar(w(r.actionName));
  a.appendVarchar(w(r.environment));
  a.appendVarchar(w(r.requestId));
  a.appendBoolean(r.trainingPreferred);
  a.appendBoolean(r.trainable);
  a.appendVarchar(attrsJson(r.attributes));
  a.appendVarchar(attrsJson(r.resourceAttributes));
  a.appendVarchar(JSON.stringify(r.events));
  a.appendBigInt(BigInt(count(r.ingestedAtMs)));
  a.endRow();
}

function fromRow(r: SpanRow): SpanRecord {
  return {
    workspaceId: r.workspace_id,
    traceId: r.trace_id,
    spanId: r.span_id,
    parentSpanId: r.parent_span_id,
    name: r.name,
    kind: r.kind as SpanKind,
    source: r.source as Source,
    startTimeNs: r.start_ns.toString(),
    endTimeNs: r.end_ns.toString(),
    durationMs: r.duration_ms,
    status: r.status,
    statusMessage: r.status_message,
    model: r.model,
    provider: r.provider,
    prompt: r.prompt,
    response: r.response,
    promptTokens: Number(r.prompt_tokens),
    completionTokens: Number(r.completion_tokens),
    totalTokens: Number(r.total_tokens),
    costUsd: r.cost_usd,
    finishReason: r.finish_reason,
    actionName: r.action_name,
    environment: r.environment,
    requestId: r.request_id,
    trainingPreferred: r.training_preferred,
    trainable: r.trainable,
    attributes: JSON.parse(r.attributes) as Attributes,
    resourceAttributes: JSON.parse(r.resource_attributes) as Attributes,
    events: JSON.parse(r.events_json) as SpanRecord['events'],
    ingestedAtMs: Number(r.ingested_at_ms),
  };
}

/** Span-level filters of listTraces; a trace matches when any one span satisfies all of them. */
function spanConditions(f: SpanFilter, params: Params): string {
  const c: string[] = [];
  const add = (sql: string, name: string, v: string) => {
    c.push(sql);
    params[name] = v;
  };
  if (f.fromNs !== undefined) add('start_ns >= $from::UBIGINT', 'from', f.fromNs);
  if (f.toNs !== undefined) add('start_ns < $to::UBIGINT', 'to', f.toNs);
  if (f.model !== undefined) add('model = $model', 'model', f.model);
  if (f.actionName !== undefined) add('action_name = $action', 'action', f.actionName);
  if (f.environment !== undefined) add('environment = $env', 'env', f.environment);
  if (f.source !== undefined) add('source = $source', 'source', f.source);
  return c.join(' AND ');
}

interface AggRow {
  trace_id: string;
  t_start: bigint;
  t_end: bigint;
  n_spans: bigint;
  n_usage: bigint;
  sum_prompt: bigint;
  sum_completion: bigint;
  sum_total: bigint;
  sum_cost: number;
  max_prompt: bigint;
  max_completion: bigint;
  max_total: bigint;
  max_cost: number;
  n_errors: bigint;
  root_name: string;
  root_model: string;
  root_source: string;
  root_action: string;
  root_env: string;
  root_status: string;
}

function fromAggRow(r: AggRow): TraceAgg {
  const calls = Number(r.n_usage) > 0; // the rule of usageRollup in collector/routes/trace-view.ts
  return {
    traceId: r.trace_id,
    startNs: r.t_start.toString(),
    endNs: r.t_end.toString(),
    spanCount: Number(r.n_spans),
    promptTokens: Number(calls ? r.sum_prompt : r.max_prompt),
    completionTokens: Number(calls ? r.sum_completion : r.max_completion),
    totalTokens: Number(calls ? r.sum_total : r.max_total),
    costUsd: calls ? r.sum_cost : r.max_cost,
    errorCount: Number(r.n_errors),
    name: r.root_name,
    model: r.root_model,
    source: r.root_source,
    actionName: r.root_action,
    environment: r.root_env,
    status: r.root_status,
  };
}
