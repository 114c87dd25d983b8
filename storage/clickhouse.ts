// ClickHouse backend. Works with 18.16 and current releases: plain HTTP, no query parameters
// (inlined literals via clickhouse-sql.ts), no compression; rows in as TabSeparated (clickhouse-tsv.ts), out as JSONEachRow.
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
import { ClickHouseSignals } from './clickhouse-signals.ts';
import { delegating } from './delegate.ts';
import { ClickHouseSessions } from './clickhouse-sessions.ts';
import { ClickHouseActivity } from './clickhouse-activity.ts';
import { randomUUID } from 'node:crypto';
import {
  ClickHouseLogLevel,
  createClient,
  type ClickHouseClient,
  type ClickHouseClientConfigOptions,
} from '@clickhouse/client';
import { isEnrichment, type SpanRecord } from '../core/record.ts';
import type { EnrichmentRecord } from '../core/enrichment-records.ts';
import type {
  ApiKeyRecord,
  PublishedKey,
  RecordBatch,
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
import {
  CLICKHOUSE_MIGRATIONS,
  SHARDING_KEYS,
  supersededObjects,
  type ClickHouseStatement,
} from './clickhouse-migrations.ts';
import { refuseNewerSchema, StorageConfigError } from './startup.ts';
import {
  byWorkspace,
  lookupChunks,
  LOOKUP_SETTINGS,
  planSpanRollup,
  spanVersionsOf,
  storedSpans,
  traceDaysOf,
  type UsageCorrection,
  type UsageFacts,
} from './clickhouse-rollup.ts';
import { auditRow, checkpointRow, ClickHouseEnrichment, verificationRow } from './clickhouse-enrichment.ts';
import { ClickHouseTraceLinks } from './clickhouse-trace-links.ts';
import { ClickHouseTraining } from './clickhouse-training.ts';
import { fromReadRow, SPAN_COLUMNS, type SpanReadRow, STORED_BYTES } from './clickhouse-span-read.ts';
import { normAudit, normCheckpoint, normVerification } from './enrichment.ts';
import { insertBody, insertTsv, tsvLine, TsvWriter } from './clickhouse-tsv.ts';
import { ident, str, strList, u64 } from './clickhouse-sql.ts';
import {
  bySpanKey,
  checkNs,
  count,
  cutPart,
  encodeAttrs,
  finite,
  hasSpanFilter,
  latestPerSpan,
  normalizeFilter,
  proxyCallKey,
  proxyCallRows,
  proxyResponseRow,
  spanVersionKey,
  tokens,
  toPage,
  USAGE_KINDS_SQL,
  utcDate,
  wellFormed,
  type ProxyCallRow,
  type ProxyResponseRow,
  type SpanFilter,
  type TraceAgg,
} from './codec.ts';

export interface ClickHouseOptions {
  url: string;
  database: string;
  username?: string;
  password?: string;
  requestTimeoutMs?: number;
  /** Look up stored versions so the rollups count a re-delivery once (default true; see clickhouse-rollup.ts). */
  exactRollups?: boolean;
  /** Instead of HTTP to `url`: the tests run the contract suite on current ClickHouse in-process (chDB) through this. */
  connection?: ClickHouseClientConfigOptions['connection'];
  /** Sharded: the data lives in `<database>_local` on every node, read and written through Distributed tables. */
  cluster?: ClickHouseCluster;
}

export interface ClickHouseCluster {
  /** The cluster's name in the servers' remote_servers configuration. */
  name: string;
  /** HTTP URL of every node of the cluster (one per shard): each gets the local tables and the Distributed ones. */
  nodeUrls: string[];
}

// Doubles as their IEEE-754 bit pattern (see clickhouse-migrations.ts).
const f64 = new Float64Array(1);
const u64view = new BigUint64Array(f64.buffer);
function floatBits(x: number): string {
  f64[0] = finite(x);
  return u64view[0]!.toString();
}

/** Span row as sent to ClickHouse (clickhouse-tsv.ts): UInt64 as decimal strings. */
interface SpanInsertRow {
  workspace_id: string;
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  name: string;
  kind: string;
  source: string;
  start_ns: string;
  end_ns: string;
  start_date: string;
  duration_ms_bits: string;
  status: string;
  status_message: string;
  model: string;
  provider: string;
  prompt: string;
  response: string;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost_usd_bits: string;
  finish_reason: string;
  action_name: string;
  environment: string;
  request_id: string;
  training_preferred: number;
  trainable: number;
  rollup?: number;
  attr_keys: string[];
  attr_values: string[];
  attr_types: string[];
  res_keys: string[];
  res_values: string[];
  res_types: string[];
  events_json: string;
  ingested_at_ms: number;
}

/** The newest version of each span as its spans-table row, rollup flag not set (also bench/storage-floor.ts's rows). */
export function spanInsertRows(input: SpanRecord[]): SpanInsertRow[] {
  return latestPerSpan(input).map(toInsertRow);
}

function toInsertRow(r: SpanRecord): SpanInsertRow {
  const start = checkNs(r.startTimeNs, 'startTimeNs');
  const attrs = encodeAttrs(r.attributes);
  const res = encodeAttrs(r.resourceAttributes);
  const w = wellFormed;
  return {
    workspace_id: w(r.workspaceId),
    trace_id: w(r.traceId),
    span_id: w(r.spanId),
    parent_span_id: w(r.parentSpanId),
    name: w(r.name),
    kind: w(r.kind),
    source: w(r.source),
    start_ns: start,
    end_ns: checkNs(r.endTimeNs, 'endTimeNs'),
    start_date: utcDate(start),
    duration_ms_bits: floatBits(r.durationMs),
    status: w(r.status),
    status_message: w(r.statusMessage),
    model: w(r.model),
    provider: w(r.provider),
    prompt: w(r.prompt),
    response: w(r.response),
    prompt_tokens: tokens(r.promptTokens),
    completion_tokens: tokens(r.completionTokens),
    total_tokens: tokens(r.totalTokens),
    cost_usd_bits: floatBits(r.costUsd),
    finish_reason: w(r.finishReason),
    action_name: w(r.actionName),
    environment: w(r.environment),
    request_id: w(r.requestId),
    training_preferred: r.trainingPreferred ? 1 : 0,
    trainable: r.trainable ? 1 : 0,
    attr_keys: attrs.keys,
    attr_values: attrs.values,
    attr_types: attrs.types,
    res_keys: res.keys,
    res_values: res.values,
    res_types: res.types,
    // JSON.stringify escapes lone surrogates, so this text is always valid UTF-8
    events_json: JSON.stringify(r.events),
    ingested_at_ms: count(r.ingestedAtMs),
  };
}

/** A span in a record batch: where its line is in the body, and what finish() needs. */
interface SpanEntry {
  at: number;
  bytes: number;
  ws: string;
  facts: UsageFacts | null;
  version: number;
  index: { workspace_id: string; trace_id: string; start_date: string };
}

function usageFacts(r: SpanInsertRow): UsageFacts {
  return {
    traceId: r.trace_id,
    spanId: r.span_id,
    startNs: r.start_ns,
    kind: r.kind,
    model: r.model,
    actionName: r.action_name,
    environment: r.environment,
    source: r.source,
    status: r.status,
    promptTokens: r.prompt_tokens,
    completionTokens: r.completion_tokens,
    totalTokens: r.total_tokens,
    costBits: r.cost_usd_bits,
    durationBits: r.duration_ms_bits,
    ingestedAtMs: r.ingested_at_ms,
  };
}

/** Apply the migrations not yet recorded in `db`.schema_migrations. */
async function migrate(client: ClickHouseClient, db: string): Promise<void> {
  await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${db}` });
  await client.command({
    query: `CREATE TABLE IF NOT EXISTS ${db}.schema_migrations (version UInt32, applied_at DateTime)
    ENGINE = ReplacingMergeTree() ORDER BY version`,
  });
  const rs = await client.query({
    query: `SELECT DISTINCT version FROM ${db}.schema_migrations`,
    format: 'JSONEachRow',
  });
  const applied = new Set((await rs.json<{ version: number }>()).map((r) => Number(r.version)));
  refuseNewerSchema(applied, CLICKHOUSE_MIGRATIONS, `ClickHouse database ${db}`);
  for (const m of CLICKHOUSE_MIGRATIONS) {
    if (applied.has(m.version)) continue;
    for (const st of m.statements(db)) await runStatement(client, st);
    await client.command({
      query: `INSERT INTO ${db}.schema_migrations (version, applied_at) VALUES (${m.version}, now())`,
    });
  }
  for (const st of supersededObjects(db)) await runStatement(client, st);
}

interface ColumnRow {
  name: string;
  type: string;
  default_kind: string;
  default_expression: string;
}

/**
 * `db`.<table> as a Distributed table over `local`.<table> for every table the migrations made. A column a
 * migration added is added to it (ALTER, so concurrent writers never see it missing); a changed engine (cluster
 * or sharding key) or a changed or dropped column re-creates it. MATERIALIZED columns become ALIAS columns: 18.16
 * refuses an insert into a Distributed table that has them, and the shards compute them on insert anyway.
 */
async function distribute(client: ClickHouseClient, db: string, local: string, cluster: string): Promise<void> {
  const query = async <T>(q: string) => (await client.query({ query: q, format: 'JSONEachRow' })).json<T>();
  const definition = (c: ColumnRow) =>
    `${c.name} ${c.type}${c.default_kind ? ` ${c.default_kind === 'MATERIALIZED' ? 'ALIAS' : c.default_kind} ${c.default_expression}` : ''}`;
  // engine_full as the server prints it, compared without quoting and spacing (releases format it differently)
  const bare = (engine: string) => engine.replace(/[\s'"`]/g, '');
  await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${db}` });
  const tables = await query<{ name: string }>(
    `SELECT name FROM system.tables WHERE database = ${str(local)} AND engine LIKE '%MergeTree' AND name != 'schema_migrations' ORDER BY name`,
  );
  for (const { name } of tables) {
    const key = SHARDING_KEYS[name];
    if (!key)
      throw new Error(`no sharding key for ClickHouse table ${name} (SHARDING_KEYS in clickhouse-migrations.ts)`);
    const engine = `Distributed(${str(cluster)}, ${str(local)}, ${str(name)}, ${key})`;
    const columns = (t: string, d: string) =>
      query<ColumnRow>(
        `SELECT name, type, default_kind, default_expression FROM system.columns WHERE database = ${str(d)} AND table = ${str(t)}`,
      );
    const want = (await columns(name, local)).map(definition);
    const [existing] = await query<{ engine: string; engine_full: string }>(
      `SELECT engine, engine_full FROM system.tables WHERE database = ${str(db)} AND name = ${str(name)}`,
    );
    if (existing && existing.engine !== 'Distributed') {
      throw new StorageConfigError(
        `ClickHouse table ${db}.${name} is a ${existing.engine} table: in cluster mode ${db} holds Distributed tables and the data lives in ${local}; choose another TRACEGATE_CLICKHOUSE_DATABASE or move the data`,
      );
    }
    if (existing) {
      const have = (await columns(name, db)).map(definition);
      const missing = want.filter((c) => !have.includes(c));
      const stale = have.filter((c) => !want.includes(c));
      if (bare(existing.engine_full) === bare(engine) && stale.length === 0) {
        for (const c of missing) await runStatement(client, { addColumn: `ALTER TABLE ${db}.${name} ADD COLUMN ${c}` });
        continue;
      }
      await client.command({ query: `DROP TABLE IF EXISTS ${db}.${name}` });
    }
    await client.command({ query: `CREATE TABLE IF NOT EXISTS ${db}.${name} (${want.join(', ')}) ENGINE = ${engine}` });
  }
  // One of ours that a migration dropped (trace_index, v10): its Distributed table would only take inserts that fail.
  const kept = new Set(tables.map((t) => t.name));
  for (const { name } of await query<{ name: string }>(
    `SELECT name FROM system.tables WHERE database = ${str(db)} AND engine = 'Distributed'`,
  )) {
    if (!kept.has(name) && Object.hasOwn(SHARDING_KEYS, name))
      await client.command({ query: `DROP TABLE IF EXISTS ${db}.${name}` });
  }
}

/**
 * Run one migration statement; an ADD COLUMN whose column exists, a DROP COLUMN whose column is gone, or a read of
 * a table the migration drops (fromDroppedTable) that is gone, is done already.
 */
export async function runStatement(client: ClickHouseClient, st: ClickHouseStatement): Promise<void> {
  if (typeof st === 'string') {
    await client.command({ query: st });
    return;
  }
  // Each kind below is done already when it fails this way (another collector migrated first).
  // Code 60 (18.16: "Table … doesn't exist"; current servers: "Unknown table expression identifier").
  if ('fromDroppedTable' in st)
    return runUnless(
      client,
      st.fromDroppedTable,
      (code, message) => code === '60' || /doesn't exist|Unknown table|UNKNOWN_TABLE/i.test(message),
    );
  // 18.16: code 44 "Cannot find column … to drop"; current servers: 10/16 "There is no column …".
  if ('dropColumn' in st)
    return runUnless(client, st.dropColumn, (_, message) =>
      /Cannot find column|There is no column|NO_SUCH_COLUMN|NOT_FOUND_COLUMN/i.test(message),
    );
  // 18.16 says code 44 in the message only; current servers answer 15 (DUPLICATE_COLUMN) as a parsed code. 44 is
  // also ILLEGAL_COLUMN, so the message must say so too.
  return runUnless(
    client,
    st.addColumn,
    (code, message) => (code === '44' || code === '15') && /already exists/i.test(message),
  );
}

/** Run `query`; an error that `done` recognises (by code, parsed or in 18.16's message, and message) is swallowed. */
async function runUnless(
  client: ClickHouseClient,
  query: string,
  done: (code: string | undefined, message: string) => boolean,
): Promise<void> {
  try {
    await client.command({ query });
  } catch (e) {
    const message = (e as Error).message ?? '';
    const code = (e as { code?: string }).code ?? /^Code: (\d+)/.exec(message)?.[1];
    if (!done(code, message)) throw e;
  }
}

// Versions for workspaces/api_keys rows: strictly increasing within the process, so a revoke
// written in the same millisecond as the key still wins.
let lastVersion = 0;
function nextVersion(atLeast = 0): number {
  lastVersion = Math.max(Date.now() * 1000, lastVersion + 1, atLeast);
  return lastVersion;
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
  enrichment: [...ENRICHMENT_METHODS, ...VERIFICATION_METHODS, 'findingsDaily'], // ClickHouseEnrichment
  signals: [...SIGNAL_METHODS, ...WEBHOOK_METHODS, 'usage'], // ClickHouseSignals (usage: the rollups plus votes)
  traceLinks: TRACE_LINK_METHODS, // ClickHouseTraceLinks
  training: TRAINING_METHODS, // ClickHouseTraining
  sessions: SESSION_METHODS, // ClickHouseSessions
  analytics: ['activity'], // ClickHouseActivity
});

export class ClickHouseStorage extends Delegated implements Storage {
  readonly kind = 'clickhouse' as const;
  private readonly client: ClickHouseClient;
  private readonly db: string;
  readonly enrichment: ClickHouseEnrichment;
  readonly signals: ClickHouseSignals;
  readonly traceLinks: ClickHouseTraceLinks;
  readonly training: ClickHouseTraining;
  readonly sessions: ClickHouseSessions;
  readonly analytics: ClickHouseActivity;
  private readonly exactRollups: boolean;

  private readonly opts: ClickHouseOptions;

  constructor(opts: ClickHouseOptions) {
    super();
    this.opts = opts;
    this.db = ident(opts.database);
    this.client = this.connect(opts.url, opts.connection);
    this.exactRollups = opts.exactRollups ?? true;
    this.enrichment = new ClickHouseEnrichment(this.client, this.db, this.exactRollups);
    this.signals = new ClickHouseSignals(this.client, this.db, (ws, q) => this.enrichment.usage(ws, q));
    this.traceLinks = new ClickHouseTraceLinks(this.client, this.db);
    this.training = new ClickHouseTraining(this.client, this.db, this.signals, this.traceLinks, (ws, ids, only) =>
      this.newestSpans(ws, ids, only),
    );
    this.sessions = new ClickHouseSessions(this.client, this.db);
    this.analytics = new ClickHouseActivity(this.client, this.db);
  }

  private connect(url: string, connection?: ClickHouseOptions['connection']): ClickHouseClient {
    return createClient({
      url,
      username: this.opts.username ?? 'default',
      password: this.opts.password ?? '',
      // No database here: it may not exist before init(); every name is qualified instead.
      // Compression off: 18.16 predates some of the client's defaults, and batches are local.
      compression: { request: false, response: false },
      request_timeout: this.opts.requestTimeoutMs ?? 30_000,
      // Failures are thrown to the caller, which logs them once; the client would print them too.
      log: { level: ClickHouseLogLevel.OFF },
      // Sharded: an insert returns once every shard has its rows (durable there, readable at once), and a
      // subquery over a Distributed table runs on each shard against its local table: the subqueries only join
      // tables sharded on the same key (spans and trace_days), so each shard's answer is complete for its traces.
      ...(this.opts.cluster
        ? { clickhouse_settings: { insert_distributed_sync: 1, distributed_product_mode: 'local' } }
        : {}),
      ...(connection ? { connection } : {}),
    });
  }

  private t(table: string): string {
    return `${this.db}.${table}`;
  }

  private insertRows(table: string, rows: ReadonlyArray<object>): Promise<void> {
    return insertTsv(this.client, this.t(table), rows);
  }

  private async rows<T>(query: string, settings?: typeof LOOKUP_SETTINGS): Promise<T[]> {
    const rs = await this.client.query({
      query,
      format: 'JSONEachRow',
      ...(settings ? { clickhouse_settings: settings } : {}),
    });
    return rs.json<T>();
  }

  async init(): Promise<void> {
    const cluster = this.opts.cluster;
    if (!cluster) {
      await migrate(this.client, this.db);
      return;
    }
    // Every node: the migrated tables in <db>_local, and <db> of Distributed tables over them, so a collector may
    // talk to any node. The data of one trace stays on one shard (see SHARDING_KEYS).
    const name = cluster.name;
    const [shape] = await this.rows<{ shards: string; replicas: string }>(
      `SELECT uniqExact(shard_num) AS shards, max(replica_num) AS replicas FROM system.clusters WHERE cluster = ${str(name)}`,
    );
    const shards = Number(shape?.shards ?? 0);
    if (shards === 0)
      throw new StorageConfigError(
        `ClickHouse cluster "${name}" is not in the server's remote_servers (system.clusters)`,
      );
    if (Number(shape!.replicas) > 1) {
      throw new StorageConfigError(
        `ClickHouse cluster "${name}" has replicas: tracegate's tables are not Replicated ones (18.16 needs ZooKeeper for those); give each shard one node`,
      );
    }
    const local = ident(`${this.db}_local`);
    const nodes = cluster.nodeUrls.map((url) => this.connect(url));
    try {
      for (const node of nodes) await migrate(node, local);
      // Every shard at the newest schema before any Distributed table changes: an insert through one that has a new
      // column fails on a shard without it. The query also fails when a shard has no tables at all.
      const latest = CLICKHOUSE_MIGRATIONS.at(-1)!.version;
      let current: number;
      try {
        // One row per shard that has the version (distributed_group_by_no_merge keeps the shards' rows apart).
        const rs = await this.client.query({
          query: `SELECT count() AS n FROM cluster(${str(name)}, ${str(local)}, 'schema_migrations') WHERE version = ${latest} GROUP BY version`,
          format: 'JSONEachRow',
          clickhouse_settings: { distributed_group_by_no_merge: '1' },
        });
        current = (await rs.json()).length;
      } catch (err) {
        throw new StorageConfigError(
          `ClickHouse cluster "${name}": a shard has no ${local} tables; list every node in TRACEGATE_CLICKHOUSE_NODES (${(err as Error).message.split('\n')[0]})`,
          { cause: err },
        );
      }
      if (current < shards) {
        throw new StorageConfigError(
          `ClickHouse cluster "${name}": ${shards - current} of ${shards} shards lack schema version ${latest} in ${local}; list every node in TRACEGATE_CLICKHOUSE_NODES`,
        );
      }
      for (const node of nodes) await distribute(node, this.db, local, name);
    } finally {
      await Promise.all(nodes.map((n) => n.close()));
    }
  }

  async close(): Promise<void> {
    await this.client.close();
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.client.ping()).success;
    } catch {
      return false;
    }
  }

  async insertSpans(input: SpanRecord[]): Promise<void> {
    if (input.length === 0) return;
    const batch = this.recordBatch();
    for (const span of input) batch.add(span);
    await batch.finish();
  }

  /**
   * Records encoded as they are added (the storage thread's spool segments, storage/spool-files.ts): each span's
   * row, and each audit, verification and checkpoint record's (no rollup, no version), is written into its table's
   * body at once, outside V8's heap. Holding a second of records as objects until the inserts returned had the
   * storage thread's young-generation collections copy them and promote them.
   * Kept per span until finish(): where its line is (its rollup flag is set there), its rollup facts and its
   * trace-index entry. A version that a newer one in the same batch supersedes is left out of the body (the table
   * keeps the newest, the later one on a tie). Findings, policies and alerts (rare) are kept for insertEnrichment.
   */
  recordBatch(): RecordBatch {
    const spans = new Map<string, SpanEntry>();
    const body = new TsvWriter();
    const dropped: Array<[number, number]> = [];
    let columns: string[] | null = null;
    const owned = new Map<string, ProxyResponseRow>();
    const calls = new Map<string, ProxyCallRow>();
    const chained = {
      audit_log: new TsvWriter(),
      verification: new TsvWriter(),
      verification_checkpoints: new TsvWriter(),
    };
    const other: EnrichmentRecord[] = [];
    let finished = false;
    const add = (r: SpanRecord | EnrichmentRecord): void => {
      if (finished) throw new Error('record batch already finished');
      if (isEnrichment(r)) {
        // A replay repeats a chained record exactly; reads collapse copies (FINAL), as they do across batches.
        if (r.recordType === 'audit') chained.audit_log.row(auditRow(normAudit(r)));
        else if (r.recordType === 'verification') chained.verification.row(verificationRow(normVerification(r)));
        else if (r.recordType === 'checkpoint') chained.verification_checkpoints.row(checkpointRow(normCheckpoint(r)));
        else other.push(r);
        return;
      }
      // Every version counts for the provider response it names, as proxyResponseRows does (the row, not the span).
      const proxied = proxyResponseRow(r);
      const key = spanVersionKey(r);
      const prev = spans.get(key);
      const own = () => {
        if (proxied) owned.set(proxied.key, proxied.row);
        for (const c of proxyCallRows(r)) calls.set(proxyCallKey(c), c);
      };
      if (prev && !(r.ingestedAtMs >= prev.version)) return own(); // as latestPerSpan: the later one wins a tie
      const row = toInsertRow(r);
      // Always explicit: a column left out would get its DEFAULT (and 18.16's JSONEachRow gave it 0 instead).
      // The rollup flag first, one digit: finish() sets it in place.
      const at = body.line(`1\t${tsvLine((columns ??= Object.keys(row)), row as unknown as Record<string, unknown>)}`);
      if (prev) dropped.push([prev.at, prev.bytes]);
      spans.set(key, {
        at,
        bytes: body.lastBytes,
        ws: row.workspace_id,
        facts: this.exactRollups ? usageFacts(row) : null,
        version: r.ingestedAtMs,
        index: { workspace_id: row.workspace_id, trace_id: row.trace_id, start_date: row.start_date },
      });
      own(); // last: a span that fails to encode leaves the batch as it was
    };
    const finish = async (): Promise<void> => {
      if (finished) throw new Error('record batch already finished');
      finished = true;
      if (spans.size > 0) {
        const entries = [...spans.values()];
        const corrections: UsageCorrection[] = [];
        if (this.exactRollups)
          for (const [ws, at] of byWorkspace(entries, (e) => e.ws)) {
            const facts = at.map((i) => entries[i]!.facts!);
            const plan = planSpanRollup(ws, facts, await storedSpans(this.client, this.db, ws, facts));
            at.forEach((i, n) => {
              if (plan.flags[n] !== 1) body.patch(entries[i]!.at, String(plan.flags[n]));
            });
            corrections.push(...plan.corrections);
          }
        const index = new Map(entries.map((e) => [JSON.stringify(e.index), e.index]));
        // Index first: a span is then never stored without being findable. A failed call is
        // retried whole by the writer, and replays collapse in both tables.
        await this.insertRows('trace_days', [...index.values()]);
        if (owned.size) await this.insertRows('proxy_responses', [...owned.values()]);
        if (calls.size) await this.insertRows('proxy_calls', [...calls.values()]);
        await insertBody(this.client, this.t('spans'), ['rollup', ...columns!], body.body(dropped));
        // After the spans: a crash in between leaves the old version counted (never a double correction).
        await this.insertRows('usage_corrections', corrections);
      }
      await Promise.all([
        this.enrichment.insertEnrichment(other),
        ...Object.entries(chained).map(([table, w]) =>
          w.columns ? insertBody(this.client, this.t(table), w.columns, w.body()) : null,
        ),
      ]);
    };
    return { add, finish };
  }

  async getTrace(workspaceId: string, traceId: string): Promise<SpanRecord[]> {
    return (await this.getTraces(workspaceId, [traceId])).get(traceId) ?? [];
  }

  async getTracePart(workspaceId: string, traceId: string, page: SpanPage): Promise<SpanPart> {
    // Its span ids first, from the trace's key columns and sizes (each span's newest version), then only those rows,
    // so that ClickHouse does not sort every span's content to hand out a part of a large trace. The sizes read the
    // text columns, several times the cost of the keys alone: only when a budget asks for them.
    const where = await this.oneTrace(workspaceId, traceId);
    if (!where) return { spans: [], more: false };
    const limit = Math.max(1, Math.trunc(page.limit));
    const after = page.after
      ? `HAVING s > ${u64(page.after.startNs)} OR (s = ${u64(page.after.startNs)} AND span_id > ${str(wellFormed(page.after.spanId))})`
      : '';
    const newest = (col: string) => `argMax(${col}, toUInt64(ingested_at_ms))`;
    const keys = await this.rows<{ span_id: string; b: string }>(
      `
      SELECT span_id, toUInt64(${newest('start_ns')}) AS s, toString(${page.maxBytes === undefined ? '0' : newest(STORED_BYTES)}) AS b FROM ${this.t('spans')}
      WHERE ${where}
      GROUP BY span_id ${after}
      ORDER BY s, span_id LIMIT ${limit + 1}`,
      LOOKUP_SETTINGS,
    );
    const { take, more } = cutPart(
      keys.map((k) => ({ id: k.span_id, bytes: Number(k.b) })),
      limit,
      page.maxBytes,
    );
    const spans = await this.spansOf(
      where,
      take.map((k) => k.id),
    );
    const order = new Map(take.map((k, i) => [k.id, i]));
    return { spans: spans.sort((x, y) => order.get(x.spanId)! - order.get(y.spanId)!), more };
  }

  async getSpans(workspaceId: string, traceId: string, spanIds: readonly string[]): Promise<SpanRecord[]> {
    const where = await this.oneTrace(workspaceId, traceId);
    const spans = where ? await this.spansOf(where, spanIds) : [];
    return spans.sort((a, b) => (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0));
  }

  async spanVersions(workspaceId: string, keys: readonly SpanKey[]): Promise<SpanVersion[]> {
    const found = await spanVersionsOf(
      this.client,
      this.db,
      wellFormed(workspaceId),
      keys.map((k) => ({ traceId: wellFormed(k.traceId), spanId: wellFormed(k.spanId) })),
    );
    return found.sort(bySpanKey);
  }

  /** The condition selecting one trace's span rows on the days it has spans (trace_days), or null for no such trace. */
  private async oneTrace(workspaceId: string, traceId: string): Promise<string | null> {
    const ws = str(wellFormed(workspaceId));
    const trace = str(wellFormed(traceId));
    const dates = await this.traceDays(ws, [wellFormed(traceId)]);
    return dates.length ? `workspace_id = ${ws} AND start_date IN ${strList(dates)} AND trace_id = ${trace}` : null;
  }

  /** The newest version of each named span of the trace `where` selects. */
  private async spansOf(where: string, spanIds: readonly string[]): Promise<SpanRecord[]> {
    const out: SpanRecord[] = [];
    for (const chunk of lookupChunks(spanIds.map(wellFormed))) {
      const rows = await this.rows<SpanReadRow>(
        `SELECT ${SPAN_COLUMNS} FROM ${this.t('spans')} FINAL WHERE ${where} AND span_id IN ${strList(chunk)}
         ORDER BY toUInt64(ingested_at_ms) DESC LIMIT 1 BY span_id`,
        LOOKUP_SETTINGS,
      );
      for (const row of rows) out.push(fromReadRow(row));
    }
    return out;
  }

  async getTraces(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, SpanRecord[]>> {
    const out = new Map<string, SpanRecord[]>();
    const ws = str(wellFormed(workspaceId));
    for (const chunk of lookupChunks(traceIds.map(wellFormed))) {
      const ids = strList(chunk);
      const dates = await this.traceDays(ws, chunk);
      if (dates.length === 0) continue;
      const rows = await this.rows<SpanReadRow>(
        // FINAL collapses replays within a sort key; LIMIT 1 BY also collapses a replay whose start
        // moved to another day (native retries are stamped at receipt), keeping the newest.
        `SELECT * FROM (
           SELECT ${SPAN_COLUMNS}, start_ns AS start_sort FROM ${this.t('spans')} FINAL
           WHERE workspace_id = ${ws} AND start_date IN ${strList(dates)} AND trace_id IN ${ids}
           ORDER BY toUInt64(ingested_at_ms) DESC LIMIT 1 BY trace_id, span_id)
         ORDER BY trace_id, toUInt64(start_sort), span_id`,
        LOOKUP_SETTINGS,
      );
      for (const row of rows) {
        const rec = fromReadRow(row);
        const list = out.get(rec.traceId);
        if (list) list.push(rec);
        else out.set(rec.traceId, [rec]);
      }
    }
    return out;
  }

  /** The newest version of the spans of these traces: `only` those span ids, of that kind (a newest version of another kind is left out). */
  private async newestSpans(
    workspaceId: string,
    traceIds: readonly string[],
    only: { spanIds?: readonly string[]; kind?: string; perTrace?: number },
  ): Promise<SpanRecord[]> {
    const out: SpanRecord[] = [];
    const ws = str(wellFormed(workspaceId));
    const spans = only.spanIds?.length ? `AND span_id IN ${strList(only.spanIds.map(wellFormed))}` : '';
    const kind = only.kind === undefined ? '' : `WHERE kind = ${str(only.kind)}`;
    const perTrace =
      only.perTrace === undefined
        ? ''
        : `ORDER BY start_ns, span_id LIMIT ${Math.max(0, Math.trunc(only.perTrace))} BY trace_id`;
    for (const chunk of lookupChunks(traceIds.map(wellFormed))) {
      const dates = await this.traceDays(ws, chunk);
      if (dates.length === 0) continue;
      const rows = await this.rows<SpanReadRow>(
        `SELECT * FROM (
           SELECT ${SPAN_COLUMNS} FROM ${this.t('spans')} FINAL
           WHERE workspace_id = ${ws} AND start_date IN ${strList(dates)} AND trace_id IN ${strList(chunk)} ${spans}
           ORDER BY toUInt64(ingested_at_ms) DESC LIMIT 1 BY trace_id, span_id) ${kind} ${perTrace}`,
        LOOKUP_SETTINGS,
      );
      for (const row of rows) out.push(fromReadRow(row));
    }
    return out;
  }

  /** The days the spans of these traces start on (trace_days), so a lookup by trace id reads those partitions only. */
  private async traceDays(ws: string, traceIds: readonly string[]): Promise<string[]> {
    return [...new Set((await traceDaysOf(this.client, this.db, ws, traceIds)).map((r) => r.d))];
  }

  async traceSizes(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, TraceSize>> {
    const out = new Map<string, TraceSize>();
    const ws = str(wellFormed(workspaceId));
    for (const chunk of lookupChunks(traceIds.map(wellFormed))) {
      const ids = strList(chunk);
      const dates = await this.traceDays(ws, chunk);
      if (dates.length === 0) continue;
      // Per span first: a replay whose start moved to another day is another row until merged, and only the newest
      // version's text counts. The sizes read the text columns once more than the read itself will: a bounded read
      // is worth it (a read bounded by its span count alone took a large share of the heap).
      const rows = await this.rows<{ trace_id: string; n: string; total: string }>(
        `SELECT trace_id, toString(count()) AS n, toString(sum(b)) AS total FROM (
           SELECT trace_id, span_id, argMax(${STORED_BYTES}, toUInt64(ingested_at_ms)) AS b FROM ${this.t('spans')}
           WHERE workspace_id = ${ws} AND start_date IN ${strList(dates)} AND trace_id IN ${ids}
           GROUP BY trace_id, span_id)
         GROUP BY trace_id`,
        LOOKUP_SETTINGS,
      );
      for (const r of rows) out.set(r.trace_id, { spans: Number(r.n), bytes: Number(r.total) });
    }
    return out;
  }

  async spanSizes(workspaceId: string, traceId: string, spanIds: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const where = spanIds.length ? await this.oneTrace(workspaceId, traceId) : null;
    if (!where) return out;
    for (const chunk of lookupChunks(spanIds.map(wellFormed))) {
      const rows = await this.rows<{ span_id: string; b: string }>(
        `SELECT span_id, toString(argMax(${STORED_BYTES}, toUInt64(ingested_at_ms))) AS b FROM ${this.t('spans')}
         WHERE ${where} AND span_id IN ${strList(chunk)} GROUP BY span_id`,
        LOOKUP_SETTINGS,
      );
      for (const r of rows) out.set(r.span_id, Number(r.b));
    }
    return out;
  }

  async unverifiedTraces(
    workspaceId: string,
    after: string | null,
    limit: number,
  ): Promise<Array<{ traceId: string } & TraceSize>> {
    const ws = str(wellFormed(workspaceId));
    const from = after !== null ? `AND trace_id > ${str(wellFormed(after))}` : '';
    // An aggregation over both tables rather than NOT IN (subquery): on a cluster the two are sharded by different
    // keys, and a distributed GROUP BY merges each trace's rows from every shard.
    const rows = await this.rows<{ trace_id: string }>(`
      SELECT trace_id FROM (
        SELECT trace_id, 1 AS stored FROM ${this.t('trace_days')} WHERE workspace_id = ${ws} ${from}
        UNION ALL
        SELECT trace_id, 0 AS stored FROM ${this.t('verification')} WHERE workspace_id = ${ws} ${from})
      GROUP BY trace_id HAVING min(stored) = 1
      ORDER BY trace_id LIMIT ${Math.max(1, Math.trunc(limit))}`);
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
    const ws = str(wellFormed(workspaceId));
    const voted = f.feedback ? await this.signals.votedTraces(workspaceId, f.feedback) : null;
    const page = await this.tracePage(ws, f, voted);
    if (page.length === 0) return { items: [], nextCursor: null };
    // Only the page's traces are rolled up, on the days they span.
    const days = page.flatMap((r) => [r.d0, r.d1]).sort();
    const match = `AND start_date >= toDate(${str(days[0]!)}) AND start_date <= toDate(${str(days[days.length - 1]!)})
      AND trace_id IN ${strList(page.map((r) => r.trace_id))}`;
    // Root-most span: no parent first, then earliest start, then lowest span id.
    const root = `tuple(parent_span_id != '', start_ns, span_id)`;
    const usage = `kind IN ${USAGE_KINDS_SQL}`;
    const rows = await this.rows<AggRow>(
      `
      SELECT * FROM (
        SELECT trace_id,
          min(start_ns) AS t_start,
          toString(min(start_ns)) AS t_start_s,
          toString(max(end_ns)) AS t_end_s,
          count() AS n_spans,
          countIf(${usage}) AS n_usage,
          sumIf(prompt_tokens, ${usage}) AS sum_prompt,
          sumIf(completion_tokens, ${usage}) AS sum_completion,
          sumIf(total_tokens, ${usage}) AS sum_total,
          sumIf(cost_usd, ${usage}) AS sum_cost,
          max(prompt_tokens) AS max_prompt,
          max(completion_tokens) AS max_completion,
          max(total_tokens) AS max_total,
          max(cost_usd) AS max_cost,
          countIf(status = 'error') AS n_errors,
          argMin(name, ${root}) AS root_name,
          argMin(model, tuple(kind != 'llm', parent_span_id != '', start_ns, span_id)) AS root_model,
          argMin(source, ${root}) AS root_source,
          argMin(action_name, ${root}) AS root_action,
          argMin(environment, ${root}) AS root_env,
          argMin(status, ${root}) AS root_status
        FROM (
          SELECT trace_id, span_id, parent_span_id, start_ns, end_ns, prompt_tokens, completion_tokens, total_tokens,
            cost_usd, status, name, kind, model, source, action_name, environment
          FROM ${this.t('spans')} FINAL
          WHERE workspace_id = ${ws} ${match}
          ORDER BY ingested_at_ms DESC LIMIT 1 BY trace_id, span_id)
        GROUP BY trace_id
      )
      ORDER BY t_start DESC, trace_id DESC`,
      LOOKUP_SETTINGS,
    );
    return toPage(rows.map(fromAggRow), f.limit);
  }

  /**
   * The page's trace ids (and the days their spans start on), from a pass over a few narrow columns of each
   * span's newest version: its start, and for a status filter whether it errored, has that status and is a root
   * (the trace status is 'error' when any span errored, else the root-most span's). Rolling up the whole workspace
   * instead took several times as long. Span filters: the subquery (any stored version) narrows the scan,
   * `m` keeps a trace only when one span's newest version satisfies them all.
   */
  private tracePage(
    ws: string,
    f: SpanFilter,
    voted: { direct: string; resolved: string[] } | null,
  ): Promise<Array<{ trace_id: string; d0: string; d1: string }>> {
    const filtered = hasSpanFilter(f);
    const newest = (col: string, as: string) => `, argMax(${col}, ingested_at_ms) AS ${as}`;
    const having = [filtered ? 'max(m) = 1' : '1'];
    if (f.status === 'error') having.push('max(s_err) = 1');
    else if (f.status !== undefined)
      having.push('max(s_err) = 0 AND argMin(s_is, tuple(s_root = 0, s_start, span_id)) = 1');
    if (f.cursor)
      having.push(
        `(min(s_start) < ${u64(f.cursor.s)} OR (min(s_start) = ${u64(f.cursor.s)} AND trace_id < ${str(f.cursor.t)}))`,
      );
    const narrow: string[] = [];
    if (filtered)
      narrow.push(
        `trace_id IN (SELECT trace_id FROM ${this.t('spans')} WHERE workspace_id = ${ws} AND ${spanConditions(f)})`,
      );
    if (f.traceId !== undefined) narrow.push(`trace_id = ${str(f.traceId)}`);
    // Votes are sharded by vote, spans by trace: GLOBAL, so that the subquery runs once over every shard's votes.
    if (voted)
      narrow.push(
        `(trace_id GLOBAL IN (${voted.direct})${voted.resolved.length ? ` OR trace_id IN ${strList(voted.resolved)}` : ''})`,
      );
    // The trace status is one of its spans' statuses: only traces with such a span (in any version) can match.
    // Most spans are 'completed': for it, that subquery would narrow nothing and cost more than it saves.
    if (f.status !== undefined && f.status !== 'completed')
      narrow.push(
        `trace_id IN (SELECT trace_id FROM ${this.t('spans')} WHERE workspace_id = ${ws} AND status = ${str(f.status)})`,
      );
    return this.rows(
      `
      SELECT trace_id, toString(min(d_lo)) AS d0, toString(max(d_hi)) AS d1
      FROM (
        SELECT trace_id, span_id, min(start_date) AS d_lo, max(start_date) AS d_hi
          ${newest('start_ns', 's_start')}
          ${filtered ? newest(spanConditions(f), 'm') : ''}
          ${f.status !== undefined ? newest(`status = 'error'`, 's_err') + newest(`status = ${str(f.status)}`, 's_is') + newest(`parent_span_id = ''`, 's_root') : ''}
        FROM ${this.t('spans')}
        WHERE workspace_id = ${ws} ${narrow.map((c) => `AND ${c}`).join(' ')}
        GROUP BY trace_id, span_id)
      GROUP BY trace_id
      HAVING ${having.join(' AND ')}
      ORDER BY min(s_start) DESC, trace_id DESC
      LIMIT ${f.limit + 1}`,
      LOOKUP_SETTINGS,
    );
  }

  async countSpans(workspaceId: string): Promise<number> {
    const [row] = await this.rows<{ n: string }>(
      `SELECT uniqExact(trace_id, span_id) AS n FROM ${this.t('spans')} WHERE workspace_id = ${str(wellFormed(workspaceId))}`,
    );
    return Number(row?.n ?? 0);
  }

  async hasProxyResponse(workspaceId: string, responseId: string, upstream: string): Promise<boolean> {
    const rows = await this.rows<{ one: number }>(
      `SELECT 1 AS one FROM ${this.t('proxy_responses')} WHERE workspace_id = ${str(wellFormed(workspaceId))}
       AND response_id = ${str(wellFormed(responseId))} AND upstream = ${str(wellFormed(upstream))} LIMIT 1`,
    );
    return rows.length > 0;
  }

  // ---- workspaces and API keys ----

  async createWorkspace(ws: Workspace): Promise<void> {
    await this.insertRows('workspaces', [
      {
        id: wellFormed(ws.id),
        name: wellFormed(ws.name),
        created_at_ms: count(ws.createdAtMs),
        version: nextVersion(),
      },
    ]);
  }

  async getWorkspaceByName(name: string): Promise<Workspace | null> {
    return this.oneWorkspace(`name = ${str(wellFormed(name))}`);
  }

  async getWorkspace(id: string): Promise<Workspace | null> {
    return this.oneWorkspace(`id = ${str(wellFormed(id))}`);
  }

  private async oneWorkspace(where: string): Promise<Workspace | null> {
    const [row] = await this.rows<{ id: string; name: string; created_at_ms: string }>(
      `SELECT id, name, created_at_ms FROM ${this.t('workspaces')} FINAL WHERE ${where} ORDER BY created_at_ms, id LIMIT 1`,
    );
    return row ? { id: row.id, name: row.name, createdAtMs: Number(row.created_at_ms) } : null;
  }

  async putApiKey(key: ApiKeyRecord): Promise<void> {
    await this.writeKey(key, nextVersion());
  }

  private async writeKey(key: ApiKeyRecord, version: number): Promise<void> {
    await this.insertRows('api_keys', [
      {
        key_id: wellFormed(key.keyId),
        workspace_id: wellFormed(key.workspaceId),
        hash: wellFormed(key.hash),
        created_at_ms: count(key.createdAtMs),
        revoked_at_ms: count(key.revokedAtMs),
        version,
      },
    ]);
  }

  private async readKeys(where: string): Promise<Array<ApiKeyRecord & { version: number }>> {
    const rows = await this.rows<{
      key_id: string;
      workspace_id: string;
      hash: string;
      created_at_ms: string;
      revoked_at_ms: string;
      version: string;
    }>(
      `SELECT key_id, workspace_id, hash, created_at_ms, revoked_at_ms, version FROM ${this.t('api_keys')} FINAL
       WHERE ${where} ORDER BY created_at_ms, key_id`,
    );
    return rows.map((r) => ({
      keyId: r.key_id,
      workspaceId: r.workspace_id,
      hash: r.hash,
      createdAtMs: Number(r.created_at_ms),
      revokedAtMs: Number(r.revoked_at_ms),
      version: Number(r.version),
    }));
  }

  async getApiKey(keyId: string): Promise<ApiKeyRecord | null> {
    const [k] = await this.readKeys(`key_id = ${str(wellFormed(keyId))}`);
    return k ? stripVersion(k) : null;
  }

  async listApiKeys(workspaceId?: string): Promise<ApiKeyRecord[]> {
    const where = workspaceId === undefined ? '1 = 1' : `workspace_id = ${str(wellFormed(workspaceId))}`;
    return (await this.readKeys(where)).map(stripVersion);
  }

  async revokeApiKey(keyId: string, atMs: number): Promise<boolean> {
    const [k] = await this.readKeys(`key_id = ${str(wellFormed(keyId))}`);
    if (!k) return false;
    if (k.revokedAtMs !== 0) return true; // already revoked: keep the first revocation time
    await this.writeKey({ ...k, revokedAtMs: count(atMs) }, nextVersion(k.version + 1));
    return true;
  }

  // ---- workspace settings: every version is a row; the highest one is current ----

  async getSettings(workspaceId: string): Promise<{ doc: string; version: number } | null> {
    const [row] = await this.settingsRows(`workspace_id = ${str(wellFormed(workspaceId))}`);
    return row ? { doc: row.doc, version: Number(row.version) } : null;
  }

  /**
   * Each write is a row of its own (writer in the key), so two collectors writing one version at once both stay
   * visible. A writer that then sees a live write of its version other than its own withdraws its own (a row
   * with withdrawn = 1 replaces it) and reports the conflict: of writers racing, at most the one that checked
   * while alone keeps its write, and readers never take a withdrawn one. (A writer dying between its insert and
   * its withdrawal leaves its write live; the earliest stamped then counts.)
   */
  async putSettings(workspaceId: string, doc: string, version: number, atMs: number): Promise<boolean> {
    const row = {
      workspace_id: wellFormed(workspaceId),
      version: count(version),
      writer: randomUUID(),
      doc: wellFormed(doc),
      updated_at_ms: count(atMs),
      withdrawn: 0,
    };
    const insert = (r: typeof row) => this.insertRows('settings_versions', [r]);
    await insert(row);
    const live = await this.rows<{ writer: string }>(
      `SELECT writer FROM ${this.t('settings_versions')} FINAL
       WHERE workspace_id = ${str(row.workspace_id)} AND version = ${u64(String(row.version))} AND withdrawn = 0`,
    );
    if (live.length === 1 && live[0]!.writer === row.writer) return true;
    await insert({ ...row, withdrawn: 1 });
    return false;
  }

  private settingsRows(where: string) {
    return this.rows<{ doc: string; version: string; writer: string }>(
      `SELECT doc, version, writer FROM ${this.t('settings_versions')} FINAL WHERE ${where} AND withdrawn = 0
       ORDER BY version DESC, updated_at_ms, writer LIMIT 1`,
    );
  }

  // ---- published verification keys ----

  async publishKeys(keys: PublishedKey[]): Promise<void> {
    if (!keys.length) return;
    await this.insertRows(
      'verification_keys',
      keys.map((k) => ({
        key_id: wellFormed(k.keyId),
        public_key_pem: wellFormed(k.publicKeyPem),
        published_at_ms: count(k.publishedAtMs),
      })),
    );
  }

  async publishedKeys(): Promise<PublishedKey[]> {
    const rows = await this.rows<{ key_id: string; public_key_pem: string; published_at_ms: string }>(
      `SELECT key_id, any(public_key_pem) AS public_key_pem, toString(min(published_at_ms)) AS published_at_ms
       FROM ${this.t('verification_keys')} GROUP BY key_id ORDER BY key_id`,
    );
    return rows.map((r) => ({
      keyId: r.key_id,
      publicKeyPem: r.public_key_pem,
      publishedAtMs: Number(r.published_at_ms),
    }));
  }
}

function stripVersion(k: ApiKeyRecord & { version: number }): ApiKeyRecord {
  return {
    keyId: k.keyId,
    workspaceId: k.workspaceId,
    hash: k.hash,
    createdAtMs: k.createdAtMs,
    revokedAtMs: k.revokedAtMs,
  };
}

/** Span-level filters of listTraces; a trace matches when any one span satisfies all of them. */
function spanConditions(f: SpanFilter): string {
  const c: string[] = [];
  if (f.fromNs !== undefined) c.push(`start_date >= toDate(${str(utcDate(f.fromNs))})`, `start_ns >= ${u64(f.fromNs)}`);
  if (f.toNs !== undefined) {
    // utcDate stops at 2105-12-31, as the stored start_date does.
    c.push(`start_ns < ${u64(f.toNs)}`, `start_date <= toDate(${str(utcDate(f.toNs))})`);
  }
  if (f.model !== undefined) c.push(`model = ${str(f.model)}`);
  if (f.actionName !== undefined) c.push(`action_name = ${str(f.actionName)}`);
  if (f.environment !== undefined) c.push(`environment = ${str(f.environment)}`);
  if (f.source !== undefined) c.push(`source = ${str(f.source)}`);
  return c.join(' AND ');
}

interface AggRow {
  trace_id: string;
  t_start_s: string;
  t_end_s: string;
  n_spans: string;
  n_usage: string;
  sum_prompt: string;
  sum_completion: string;
  sum_total: string;
  sum_cost: number;
  max_prompt: string;
  max_completion: string;
  max_total: string;
  max_cost: number;
  n_errors: string;
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
    startNs: r.t_start_s,
    endNs: r.t_end_s,
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
