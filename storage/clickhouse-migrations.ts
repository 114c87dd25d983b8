// Versioned ClickHouse schema. Append new migrations; never edit an applied one.
// Every statement must be idempotent (IF NOT EXISTS …): two collectors may start at once.
// Keep to syntax ClickHouse 18.16 understands (no Map/JSON/DateTime64/LowCardinality/TTL/
// SimpleAggregateFunction) that current releases still accept (no old-style MergeTree(date, key, 8192)).

/**
 * A statement, or an ALTER TABLE … ADD COLUMN that is skipped when the column already exists, or an ALTER TABLE …
 * DROP COLUMN skipped when it is gone (18.16 has neither IF NOT EXISTS nor IF EXISTS there; it answers code 44),
 * or a statement reading a table that the same migration drops after it (skipped when the table is gone: another
 * collector ran it first).
 */
export type ClickHouseStatement =
  | string
  | { addColumn: string }
  | { dropColumn: string }
  | { fromDroppedTable: string };

export interface ClickHouseMigration {
  version: number;
  description: string;
  /** SQL statements for database `db` (an already-checked identifier). */
  statements(db: string): ClickHouseStatement[];
}

const DURATION = 'reinterpretAsFloat64(reinterpretAsString(duration_ms_bits))';

/** The findings_daily view: v4 counted every insert, v5 only rows flagged rollup = 1 (same SQL otherwise). */
function findingsView(db: string, name: string, where: string): string {
  return `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.${name} TO ${db}.findings_daily AS
      SELECT
        workspace_id,
        toDate(toDateTime(intDiv(created_at_ms, 1000), 'UTC')) AS day,
        category,
        severity,
        count() AS finding_count
      FROM ${db}.findings
      ${where}
      GROUP BY workspace_id, day, category, severity`;
}

const COST = 'reinterpretAsFloat64(reinterpretAsString(cost_usd_bits))';

/**
 * The usage_hourly view (v4, and v5 with the rollup flag): `latency` feeds the quantile state, `where` picks the
 * rows; `cost` is the cost column's state (v4–v6 a sumKahan one, which 18.16 cannot read back after a restart).
 */
function usageView(
  db: string,
  name: string,
  latency: string,
  where: string,
  cost = `sumKahanState(${COST}) AS cost_usd_sum`,
): string {
  return `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.${name} TO ${db}.usage_hourly AS
      SELECT
        workspace_id,
        toStartOfHour(toDateTime(intDiv(start_ns, 1000000000), 'UTC')) AS hour,
        model,
        action_name,
        environment,
        source,
        countState() AS requests,
        sumState(toUInt64(status = 'error')) AS errors,
        sumState(prompt_tokens) AS prompt_tokens_sum,
        sumState(completion_tokens) AS completion_tokens_sum,
        sumState(total_tokens) AS total_tokens_sum,
        ${cost},
        quantilesState(0.5, 0.95, 0.99)(${latency}) AS latency_ms
      FROM ${db}.spans
      WHERE ${where}
      GROUP BY workspace_id, hour, model, action_name, environment, source`;
}

/**
 * On a cluster (TRACEGATE_CLICKHOUSE_CLUSTER), which shard each table's rows go to. Rows that replace each
 * other (the ORDER BY key) must meet on one shard to collapse, and a trace's spans, index entries, findings and
 * policy records stay together; rollups merge across shards at query time. Every table needs an entry.
 */
export const SHARDING_KEYS: Readonly<Record<string, string>> = {
  spans: 'cityHash64(workspace_id, trace_id)',
  trace_index: 'cityHash64(workspace_id, trace_id)', // dropped by v10; listed so its stale Distributed table goes too
  trace_days: 'cityHash64(workspace_id, trace_id)',
  proxy_responses: 'cityHash64(workspace_id, response_id)',
  findings: 'cityHash64(workspace_id, trace_id)',
  policy_records: 'cityHash64(workspace_id, trace_id)',
  workspaces: 'cityHash64(id)',
  api_keys: 'cityHash64(key_id)',
  settings: 'cityHash64(workspace_id)',
  audit_log: 'cityHash64(workspace_id, chain_id, seq)',
  verification: 'cityHash64(workspace_id, chain_id, seq)',
  verification_traces: 'cityHash64(workspace_id, chain_id, seq)', // filled on each shard from its verification rows
  verification_checkpoints: 'cityHash64(workspace_id, chain_id, seq)',
  alerts: 'cityHash64(workspace_id, alert_id)',
  settings_versions: 'cityHash64(workspace_id)',
  verification_keys: 'cityHash64(key_id)',
  usage_hourly: 'cityHash64(workspace_id)',
  usage_corrections: 'cityHash64(workspace_id)',
  findings_daily: 'cityHash64(workspace_id)',
  findings_daily_corrections: 'cityHash64(workspace_id)',
  feedback: 'cityHash64(workspace_id, vote_key)',
  security_alerts: 'cityHash64(workspace_id, alert_id)',
  webhook_secrets: 'cityHash64(secret_id)',
  webhook_deliveries: 'cityHash64(workspace_id, delivery_key)',
  trace_meta: 'cityHash64(workspace_id, trace_id)',
  proxy_calls: 'cityHash64(workspace_id, call_id)',
  training_spans: 'cityHash64(workspace_id, trace_id)', // dropped by v16; listed so its stale Distributed table goes too
  training_calls: 'cityHash64(workspace_id, trace_id)', // filled on each shard from its spans
  sessions: 'cityHash64(token_hash)', // a session's writes meet on one shard; revoke-by-id reads every shard first
  signin_links: 'cityHash64(token_hash)',
  signin_claims: 'cityHash64(token_hash)', // with its link, so a claimer reads every claim of it from one shard
};

export const CLICKHOUSE_MIGRATIONS: readonly ClickHouseMigration[] = [
  {
    version: 1,
    description: 'spans, trace_index, workspaces, api_keys',
    statements: (db) => [
      // Float64 values travel as their IEEE-754 bits: 18.16's text parser is off by an ulp for
      // some doubles, and the MATERIALIZED column reconstructs the exact value server-side.
      `CREATE TABLE IF NOT EXISTS ${db}.spans (
        workspace_id String,
        trace_id String,
        span_id String,
        parent_span_id String,
        name String,
        kind String,
        source String,
        start_ns UInt64,
        end_ns UInt64,
        start_date Date,
        duration_ms_bits UInt64,
        duration_ms Float64 MATERIALIZED reinterpretAsFloat64(reinterpretAsString(duration_ms_bits)),
        status String,
        status_message String,
        model String,
        provider String,
        prompt String,
        response String,
        prompt_tokens UInt64,
        completion_tokens UInt64,
        total_tokens UInt64,
        cost_usd_bits UInt64,
        cost_usd Float64 MATERIALIZED reinterpretAsFloat64(reinterpretAsString(cost_usd_bits)),
        finish_reason String,
        action_name String,
        environment String,
        request_id String,
        training_preferred UInt8,
        trainable UInt8,
        attr_keys Array(String),
        attr_values Array(String),
        attr_types Array(String),
        res_keys Array(String),
        res_values Array(String),
        res_types Array(String),
        events_json String,
        ingested_at_ms UInt64
      ) ENGINE = ReplacingMergeTree(ingested_at_ms)
      PARTITION BY toYYYYMM(start_date)
      ORDER BY (workspace_id, start_date, trace_id, span_id)`,
      // Trace id → the days its spans start on, so getTrace reads only those days.
      `CREATE TABLE IF NOT EXISTS ${db}.trace_index (
        workspace_id String,
        trace_id String,
        start_date Date
      ) ENGINE = ReplacingMergeTree()
      ORDER BY (workspace_id, trace_id, start_date)`,
      `CREATE TABLE IF NOT EXISTS ${db}.workspaces (
        id String,
        name String,
        created_at_ms UInt64,
        version UInt64
      ) ENGINE = ReplacingMergeTree(version)
      ORDER BY id`,
      `CREATE TABLE IF NOT EXISTS ${db}.api_keys (
        key_id String,
        workspace_id String,
        hash String,
        created_at_ms UInt64,
        revoked_at_ms UInt64,
        version UInt64
      ) ENGINE = ReplacingMergeTree(version)
      ORDER BY key_id`,
    ],
  },
  {
    version: 2,
    description: 'workspace settings documents, every version kept',
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.settings (
        workspace_id String,
        version UInt64,
        doc String,
        updated_at_ms UInt64
      ) ENGINE = ReplacingMergeTree()
      ORDER BY (workspace_id, version)`,
    ],
  },
  {
    version: 3,
    description: 'enrichment: findings, policy_records, audit_log, alerts, verification, verification_checkpoints',
    // Each table's ORDER BY is the record's natural key, so ReplacingMergeTree collapses replays
    // (reads use FINAL). Tables are partitioned by month of a record time that is not part of the
    // key, so a key re-written with another time may sit in two partitions: reads of versioned
    // tables (findings, policy_records, alerts) also keep one row per key with LIMIT 1 BY.
    // Versioned tables keep the highest version, the last written on a tie. Append-only tables
    // (audit_log, verification, verification_checkpoints) have no version: a replay is identical.
    // Float64 values travel as IEEE bits, as in spans.
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.findings (
        workspace_id String,
        trace_id String,
        span_id String,
        field String,
        rule String,
        start_offset UInt64,
        end_offset UInt64,
        detector String,
        category String,
        severity String,
        preview String,
        score_bits UInt64,
        score Float64 MATERIALIZED reinterpretAsFloat64(reinterpretAsString(score_bits)),
        action String,
        created_at_ms UInt64
      ) ENGINE = ReplacingMergeTree(created_at_ms)
      PARTITION BY toYYYYMM(toDateTime(intDiv(created_at_ms, 1000), 'UTC'))
      ORDER BY (workspace_id, trace_id, span_id, field, rule, start_offset)`,
      `CREATE TABLE IF NOT EXISTS ${db}.policy_records (
        workspace_id String,
        trace_id String,
        span_id String,
        policy_version UInt64,
        decision String,
        reasons String,
        created_at_ms UInt64
      ) ENGINE = ReplacingMergeTree(created_at_ms)
      PARTITION BY toYYYYMM(toDateTime(intDiv(created_at_ms, 1000), 'UTC'))
      ORDER BY (workspace_id, trace_id, span_id)`,
      `CREATE TABLE IF NOT EXISTS ${db}.audit_log (
        workspace_id String,
        chain_id String,
        seq UInt64,
        at_ms UInt64,
        actor String,
        action String,
        route String,
        outcome String,
        accepted UInt64,
        rejected UInt64,
        details String,
        prev_hash String,
        hash String
      ) ENGINE = ReplacingMergeTree()
      PARTITION BY toYYYYMM(toDateTime(intDiv(at_ms, 1000), 'UTC'))
      ORDER BY (workspace_id, chain_id, seq)`,
      `CREATE TABLE IF NOT EXISTS ${db}.alerts (
        workspace_id String,
        alert_id String,
        rule_id String,
        kind String,
        severity String,
        message String,
        trace_id String,
        value_bits UInt64,
        value Float64 MATERIALIZED reinterpretAsFloat64(reinterpretAsString(value_bits)),
        threshold_bits UInt64,
        threshold Float64 MATERIALIZED reinterpretAsFloat64(reinterpretAsString(threshold_bits)),
        window_start_ms UInt64,
        at_ms UInt64,
        delivered String
      ) ENGINE = ReplacingMergeTree(at_ms)
      PARTITION BY toYYYYMM(toDateTime(intDiv(at_ms, 1000), 'UTC'))
      ORDER BY (workspace_id, alert_id)`,
      `CREATE TABLE IF NOT EXISTS ${db}.verification (
        workspace_id String,
        chain_id String,
        seq UInt64,
        trace_id String,
        span_ids Array(String),
        span_versions Array(UInt64),
        content_hash String,
        prev_hash String,
        hash String,
        created_at_ms UInt64
      ) ENGINE = ReplacingMergeTree()
      PARTITION BY toYYYYMM(toDateTime(intDiv(created_at_ms, 1000), 'UTC'))
      ORDER BY (workspace_id, chain_id, seq)`,
      `CREATE TABLE IF NOT EXISTS ${db}.verification_checkpoints (
        workspace_id String,
        chain_id String,
        seq UInt64,
        head_hash String,
        key_id String,
        signature String,
        at_ms UInt64
      ) ENGINE = ReplacingMergeTree()
      PARTITION BY toYYYYMM(toDateTime(intDiv(at_ms, 1000), 'UTC'))
      ORDER BY (workspace_id, chain_id, seq)`,
    ],
  },
  {
    version: 4,
    description: 'analytics rollups: usage_hourly (from spans), findings_daily (from findings)',
    // Enrichment as materialized processing: each materialized view aggregates every inserted
    // block into its rollup at insert time, and usage()/findingsDaily() read only the rollups.
    //
    // A view sees inserts, not the collapsed table, so these views counted a re-delivered span
    // or finding twice; v5 replaces them with views that count each record once.
    // Spans stored before this migration are not in the rollup (no automatic backfill: two
    // collectors migrating at once would both backfill). A one-off backfill, run before any
    // collector with this migration has written spans, is the view's SELECT as
    // INSERT INTO usage_hourly SELECT … FROM spans FINAL WHERE kind = 'llm' GROUP BY ….
    //
    // Latency quantiles use quantilesState (a reservoir of up to 8192 values per state, merged
    // exactly while a merged group holds at most 8192 values; a uniform sample beyond that).
    // Its interpolation is reproduced bit-for-bit by DuckDB's usage() (enrichment.ts).
    // The levels are part of the column type: changing them needs a new column.
    // Times are bucketed in UTC whatever the server time zone (DateTime('UTC')).
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.usage_hourly (
        workspace_id String,
        hour DateTime('UTC'),
        model String,
        action_name String,
        environment String,
        source String,
        requests AggregateFunction(count),
        errors AggregateFunction(sum, UInt64),
        prompt_tokens_sum AggregateFunction(sum, UInt64),
        completion_tokens_sum AggregateFunction(sum, UInt64),
        total_tokens_sum AggregateFunction(sum, UInt64),
        cost_usd_sum AggregateFunction(sumKahan, Float64),
        latency_ms AggregateFunction(quantiles(0.5, 0.95, 0.99), Float64)
      ) ENGINE = AggregatingMergeTree()
      PARTITION BY toYYYYMM(hour)
      ORDER BY (workspace_id, hour, model, action_name, environment, source)`,
      // Floats from their bits, not the MATERIALIZED columns, so the view never depends on
      // whether the inserted block carries them. No output alias equals a column of spans
      // (\`sumState(x) AS x\` resolves differently across ClickHouse analyzers).
      usageView(db, 'usage_hourly_mv', DURATION, `kind = 'llm'`),
      `CREATE TABLE IF NOT EXISTS ${db}.findings_daily (
        workspace_id String,
        day Date,
        category String,
        severity String,
        finding_count UInt64
      ) ENGINE = SummingMergeTree(finding_count)
      PARTITION BY toYYYYMM(day)
      ORDER BY (workspace_id, day, category, severity)`,
      findingsView(db, 'findings_daily_mv', ''),
    ],
  },
  {
    version: 5,
    description: 'rollups count a record once: rollup flag on spans and findings, correction tables',
    // See clickhouse-rollup.ts. The writer marks each inserted row with rollup = 1 when the
    // rollup must count it (new, or a changed version), 2 when it must count it but its latency
    // is already in the group's quantiles, and 0 for a re-delivery; a changed row's previous
    // version is taken out by a correction row. Quantile states skip NaN, hence if(…, nan).
    // Old views are dropped and new ones created under new names. The writer always sends the
    // flag: 18.16 fills a column omitted from JSONEachRow with 0, not its DEFAULT, so a collector
    // older than this migration still writing to the same database would not be counted.
    statements: (db) => [
      { addColumn: `ALTER TABLE ${db}.spans ADD COLUMN rollup UInt8 DEFAULT 1` },
      { addColumn: `ALTER TABLE ${db}.findings ADD COLUMN rollup UInt8 DEFAULT 1` },
      `CREATE TABLE IF NOT EXISTS ${db}.usage_corrections (
        workspace_id String,
        hour DateTime('UTC'),
        model String,
        action_name String,
        environment String,
        source String,
        requests Int64,
        errors Int64,
        prompt_tokens Int64,
        completion_tokens Int64,
        total_tokens Int64,
        cost_usd Float64
      ) ENGINE = SummingMergeTree()
      PARTITION BY toYYYYMM(hour)
      ORDER BY (workspace_id, hour, model, action_name, environment, source)`,
      `CREATE TABLE IF NOT EXISTS ${db}.findings_daily_corrections (
        workspace_id String,
        day Date,
        category String,
        severity String,
        delta Int64
      ) ENGINE = SummingMergeTree()
      PARTITION BY toYYYYMM(day)
      ORDER BY (workspace_id, day, category, severity)`,
      `DROP TABLE IF EXISTS ${db}.usage_hourly_mv`,
      usageView(db, 'usage_hourly_once_mv', `if(rollup = 1, ${DURATION}, nan)`, `kind = 'llm' AND rollup >= 1`),
      `DROP TABLE IF EXISTS ${db}.findings_daily_mv`,
      findingsView(db, 'findings_daily_once_mv', 'WHERE rollup = 1'),
    ],
  },
  {
    version: 6,
    description: 'usage rollup counts embedding calls too',
    // Embedding calls cost money like LLM calls (the trace roll-ups count both). A second view, not a replaced
    // one: the LLM view keeps counting while this runs, so no insert falls between a DROP and a CREATE.
    // Embedding spans stored before this migration are not in the rollup (as for v4); one of them changed after it
    // is taken out through usage_corrections all the same, leaving its group low by that span (spans seldom change).
    statements: (db) => [
      usageView(
        db,
        'usage_hourly_embedding_mv',
        `if(rollup = 1, ${DURATION}, nan)`,
        `kind = 'embedding' AND rollup >= 1`,
      ),
    ],
  },
  {
    version: 7,
    description: 'usage cost as a sum state: 18.16 cannot read sumKahan states back after a restart',
    // ClickHouse 18.16 reads an AggregateFunction(sumKahan, Float64) column written before the server restarted as
    // if its states were half their size ("Sizes of columns doesn't match"): every usage query and every merge of
    // usage_hourly failed after a restart. The cost moves to a sum state (exact enough: usage() rounds sums) and
    // the old column is dropped; the views are replaced (an insert in the instant between the DROP and the CREATE
    // is not counted). The cost of what was stored before is then rebuilt: the rollup gains what makes rollup plus
    // corrections the cost of each span's newest version (the statement adds nothing when run again, unless spans
    // arrive meanwhile: upgrading several collectors at once, start one first).
    statements: (db) => [
      { addColumn: `ALTER TABLE ${db}.usage_hourly ADD COLUMN cost_usd_total AggregateFunction(sum, Float64)` },
      `DROP TABLE IF EXISTS ${db}.usage_hourly_once_mv`,
      `DROP TABLE IF EXISTS ${db}.usage_hourly_embedding_mv`,
      usageView(
        db,
        'usage_hourly_llm_v7_mv',
        `if(rollup = 1, ${DURATION}, nan)`,
        `kind = 'llm' AND rollup >= 1`,
        `sumState(${COST}) AS cost_usd_total`,
      ),
      usageView(
        db,
        'usage_hourly_embedding_v7_mv',
        `if(rollup = 1, ${DURATION}, nan)`,
        `kind = 'embedding' AND rollup >= 1`,
        `sumState(${COST}) AS cost_usd_total`,
      ),
      { dropColumn: `ALTER TABLE ${db}.usage_hourly DROP COLUMN cost_usd_sum` },
      // What the rollup's cost must gain so that rollup plus corrections is the stored cost: 0 when run again.
      // Only groups that still have spans (those of a month dropped for retention keep their rollup as it is).
      `INSERT INTO ${db}.usage_hourly (workspace_id, hour, model, action_name, environment, source, cost_usd_total)
        SELECT workspace_id, hour, model, action_name, environment, source, sumState(delta) AS cost
        FROM (
          SELECT workspace_id, hour, model, action_name, environment, source, sum(v) AS delta, max(has) AS has_spans
          FROM (
            SELECT workspace_id, toStartOfHour(toDateTime(intDiv(s, 1000000000), 'UTC')) AS hour, m AS model,
              a AS action_name, e AS environment, src AS source, reinterpretAsFloat64(reinterpretAsString(bits)) AS v, 1 AS has
            FROM (
              SELECT argMax(start_ns, ingested_at_ms) AS s, argMax(model, ingested_at_ms) AS m,
                argMax(action_name, ingested_at_ms) AS a, argMax(environment, ingested_at_ms) AS e,
                argMax(source, ingested_at_ms) AS src, argMax(kind, ingested_at_ms) AS k,
                argMax(cost_usd_bits, ingested_at_ms) AS bits, workspace_id
              FROM ${db}.spans
              GROUP BY workspace_id, trace_id, span_id)
            WHERE k IN ('llm', 'embedding')
            UNION ALL
            SELECT workspace_id, hour, model, action_name, environment, source, -cost_usd AS v, 0 AS has FROM ${db}.usage_corrections
            UNION ALL
            SELECT workspace_id, hour, model, action_name, environment, source, -finalizeAggregation(cost_usd_total) AS v, 0 AS has
            FROM ${db}.usage_hourly)
          GROUP BY workspace_id, hour, model, action_name, environment, source
          HAVING has_spans = 1 AND abs(delta) > 1e-9)
        GROUP BY workspace_id, hour, model, action_name, environment, source`,
    ],
  },
  {
    version: 8,
    description: 'settings versions keep every writer; published verification keys',
    // settings collapsed two collectors' writes of one version into one row, silently losing a change: each write
    // is now its own row (writer id in the key), and a writer that finds another live write of its version
    // withdraws its own (a second row, withdrawn = 1, replacing it) and answers 409 (storage/clickhouse.ts). The
    // rows of settings are copied over (again when re-run: the same rows collapse); settings itself is left for
    // collectors of an earlier version still running (their changes are not seen here: upgrade them all first).
    // verification_keys: each collector's public key, so any one of them verifies the chains of all the others.
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.settings_versions (
        workspace_id String,
        version UInt64,
        writer String,
        doc String,
        updated_at_ms UInt64,
        withdrawn UInt8
      ) ENGINE = ReplacingMergeTree()
      ORDER BY (workspace_id, version, writer)`,
      `INSERT INTO ${db}.settings_versions (workspace_id, version, writer, doc, updated_at_ms, withdrawn)
        SELECT workspace_id, version, '', doc, updated_at_ms, 0 FROM ${db}.settings FINAL`,
      `CREATE TABLE IF NOT EXISTS ${db}.verification_keys (
        key_id String,
        public_key_pem String,
        published_at_ms UInt64
      ) ENGINE = ReplacingMergeTree()
      ORDER BY key_id`,
    ],
  },
  {
    version: 9,
    description: 'provider response ids the proxy handed to each workspace',
    // Written with the proxy spans that prove them (storage/clickhouse.ts insertSpans); the proxy relays calls
    // about a stored response only for ids found here (core/response-ownership.ts). Spans stored before this
    // version lack the upstream (server.address) and are not indexed.
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.proxy_responses (
        workspace_id String,
        response_id String,
        upstream String,
        trace_id String
      ) ENGINE = ReplacingMergeTree()
      ORDER BY (workspace_id, response_id, upstream)`,
    ],
  },
  {
    version: 10,
    description: 'trace_days: the trace-id index in granules of 256 rows (was trace_index, 8,192)',
    // The writer looks up a batch's thousands of trace ids before each insert (TRACEGATE_CLICKHOUSE_EXACT_ROLLUPS),
    // and each random id costs a granule: in 8,192-row granules a batch read most of the index, which grows with
    // every trace stored (256-row granules read a small share of it).
    // A table's granularity cannot change, so the index moves to a new table: the copy is idempotent (rows
    // collapse), and trace_index goes once copied. Its primary index in memory: ~0.2 byte a trace.
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.trace_days (
        workspace_id String,
        trace_id String,
        start_date Date
      ) ENGINE = ReplacingMergeTree()
      ORDER BY (workspace_id, trace_id, start_date)
      SETTINGS index_granularity = 256`,
      {
        fromDroppedTable: `INSERT INTO ${db}.trace_days (workspace_id, trace_id, start_date) SELECT workspace_id, trace_id, start_date FROM ${db}.trace_index`,
      },
      `DROP TABLE IF EXISTS ${db}.trace_index`,
    ],
  },
  {
    version: 11,
    description: "verification_traces: which chain positions hold a trace's verification records",
    // verification is sorted by chain position (verify walks the chains); a lookup by trace id read every record of
    // the workspace, for one trace and again for each page of a workspace verify. The view
    // keeps a narrow index sorted by trace id, written with each insert (also a record written behind the
    // collector's back). The copy of the records stored before is idempotent (rows collapse).
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.verification_traces (
        workspace_id String,
        trace_id String,
        chain_id String,
        seq UInt64
      ) ENGINE = ReplacingMergeTree()
      ORDER BY (workspace_id, trace_id, chain_id, seq)
      SETTINGS index_granularity = 256`,
      `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.verification_traces_mv TO ${db}.verification_traces AS
        SELECT workspace_id, trace_id, chain_id, seq FROM ${db}.verification`,
      `INSERT INTO ${db}.verification_traces (workspace_id, trace_id, chain_id, seq)
        SELECT workspace_id, trace_id, chain_id, seq FROM ${db}.verification`,
    ],
  },
  {
    version: 12,
    description: 'feedback votes, security alerts, webhook signing secrets and accepted deliveries',
    // feedback: one row per version of a vote; the newest received_at_ms of a vote_key stands (reads take it with
    // LIMIT 1 BY, a retraction is a version with retracted = 1). Neither the key nor a partition holds a date: a
    // re-vote on another day must replace the first (Langfuse's scores table keys on toDate(timestamp), and such a
    // re-vote duplicates there). security_alerts: alert_id follows from the body, so redeliveries collapse.
    // webhook_secrets: versioned like api_keys (a revocation is a later version). webhook_deliveries: one row per
    // claim; a claim wins only when it is the one row of its key (storage/clickhouse-signals.ts claimDelivery).
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.feedback (
        workspace_id String,
        vote_key String,
        vote_id String,
        trace_id String,
        target_type String,
        target_id String,
        name String,
        value String,
        retracted UInt8,
        comment String,
        user_id String,
        source String,
        metadata String,
        voted_at_ms UInt64,
        received_at_ms UInt64
      ) ENGINE = ReplacingMergeTree(received_at_ms)
      ORDER BY (workspace_id, vote_key)`,
      `CREATE TABLE IF NOT EXISTS ${db}.security_alerts (
        workspace_id String,
        alert_id String,
        source String,
        severity String,
        raw_severity String,
        title String,
        category String,
        external_id String,
        detected_at_ms UInt64,
        received_at_ms UInt64,
        trace_id String,
        span_id String,
        request_id String,
        response_id String,
        session_id String,
        user_id String,
        signature String,
        secret_id String,
        correlation String,
        body String
      ) ENGINE = ReplacingMergeTree(received_at_ms)
      ORDER BY (workspace_id, alert_id)`,
      `CREATE TABLE IF NOT EXISTS ${db}.webhook_secrets (
        secret_id String,
        workspace_id String,
        sealed String,
        created_at_ms UInt64,
        revoked_at_ms UInt64,
        version UInt64
      ) ENGINE = ReplacingMergeTree(version)
      ORDER BY secret_id`,
      `CREATE TABLE IF NOT EXISTS ${db}.webhook_deliveries (
        workspace_id String,
        delivery_key String,
        claimant String,
        at_ms UInt64
      ) ENGINE = MergeTree()
      PARTITION BY toYYYYMM(toDateTime(intDiv(at_ms, 1000), 'UTC'))
      ORDER BY (workspace_id, delivery_key, claimant)`,
    ],
  },
  {
    version: 13,
    description: 'browser sessions and one-time sign-in links',
    // sessions: one row per token hash (the SHA-256 of the cookie's token; the token is never stored), the highest
    // version standing: a use writes its time, a revocation 2^50 + its time, so a revocation outranks any use written
    // after it (clickhouse-sessions.ts). signin_claims: who took a link; a claimer seeing another live claim withdraws
    // its own (withdrawn = 1 replaces the row), so at most one claim of a link stands.
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.sessions (
        session_id String,
        token_hash String,
        workspace_id String,
        created_at_ms UInt64,
        last_seen_ms UInt64,
        expires_at_ms UInt64,
        revoked_at_ms UInt64,
        version UInt64
      ) ENGINE = ReplacingMergeTree(version)
      ORDER BY token_hash`,
      `CREATE TABLE IF NOT EXISTS ${db}.signin_links (
        token_hash String,
        workspace_id String,
        created_at_ms UInt64,
        expires_at_ms UInt64
      ) ENGINE = ReplacingMergeTree()
      ORDER BY token_hash`,
      `CREATE TABLE IF NOT EXISTS ${db}.signin_claims (
        token_hash String,
        claimer String,
        claimed_at_ms UInt64,
        withdrawn UInt8
      ) ENGINE = ReplacingMergeTree(withdrawn)
      ORDER BY (token_hash, claimer)`,
    ],
  },
  {
    version: 14,
    description: 'agent runtime traces: trace metadata, and the index of the calls the proxy recorded',
    // trace_meta: an Agents SDK trace item (workflow name, group id, metadata), the newest per trace. proxy_calls:
    // every proxy span by the provider's response id and request id (any key, unlike proxy_responses, which proves
    // ownership), so an agent's response span and a guardrail result find the call the proxy recorded. Spans stored
    // before this version are not indexed.
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.trace_meta (
        workspace_id String,
        trace_id String,
        workflow_name String,
        group_id String,
        metadata String,
        organization String,
        project String,
        source String,
        updated_at_ms UInt64
      ) ENGINE = ReplacingMergeTree(updated_at_ms)
      ORDER BY (workspace_id, trace_id)
      SETTINGS index_granularity = 256`,
      `CREATE TABLE IF NOT EXISTS ${db}.proxy_calls (
        workspace_id String,
        id_kind String,
        call_id String,
        trace_id String,
        span_id String
      ) ENGINE = ReplacingMergeTree()
      ORDER BY (workspace_id, id_kind, call_id)
      SETTINGS index_granularity = 256`,
    ],
  },
  {
    version: 15,
    description: 'training_spans: the training export scans trainable model calls by prompt and response hash',
    // The export streams identical prompt/response pairs and the answers to one prompt one after another, so it
    // dedupes and pairs them holding one group at a time; in this order a page reads one range of the key. The view
    // indexes every version of a trainable model call as it is inserted (also rows written behind the collector's
    // back); a read keeps a row only while it names the span's stored version (storage/training.ts). The hash is the
    // MD5's bytes 9-16 read as a little-endian UInt64: DuckDB's md5_number_lower, and node:crypto's. stored_bytes (the
    // span's text) lets a page stop before its rows' size passes a budget. The copy of the spans stored before is
    // idempotent (rows collapse).
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.training_spans (
        workspace_id String,
        prompt_hash UInt64,
        response_hash UInt64,
        trace_id String,
        span_id String,
        start_ns UInt64,
        start_date Date,
        model String,
        action_name String,
        environment String,
        source String,
        training_preferred UInt8,
        stored_bytes UInt64,
        ingested_at_ms UInt64
      ) ENGINE = ReplacingMergeTree(ingested_at_ms)
      PARTITION BY toYYYYMM(start_date)
      ORDER BY (workspace_id, prompt_hash, response_hash, trace_id, span_id)`,
      `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.training_spans_mv TO ${db}.training_spans AS ${trainingRows(db)}`,
      `INSERT INTO ${db}.training_spans ${trainingRows(db)}`,
    ],
  },
  {
    version: 16,
    description: 'training_calls: the training index with the text of each call, replacing training_spans',
    // A page of training_spans named its calls in hash order, so reading their text by trace id from spans read
    // nearly every granule of it: each page cost as much as the whole store. The index now carries every column a
    // span read decodes, and a page checks against spans only which version is stored (narrow columns). A new table
    // and view, not columns added to the old ones: added columns read empty on the rows already indexed. The view
    // exists before the copy, so a span inserted meanwhile is indexed by one or the other (rows collapse); only an
    // insert begun before the view existed and committed after the copy began is in neither (18.16 has no way to
    // wait for it). The computed columns are ALIAS ones: 18.16's view cannot insert into a table with MATERIALIZED
    // columns.
    statements: (db) => [
      `CREATE TABLE IF NOT EXISTS ${db}.training_calls (
        workspace_id String,
        prompt_hash UInt64,
        response_hash UInt64,
        trace_id String,
        span_id String,
        parent_span_id String,
        name String,
        kind String,
        source String,
        start_ns UInt64,
        end_ns UInt64,
        start_date Date,
        duration_ms_bits UInt64,
        duration_ms Float64 ALIAS reinterpretAsFloat64(reinterpretAsString(duration_ms_bits)),
        status String,
        status_message String,
        model String,
        provider String,
        prompt String,
        response String,
        prompt_tokens UInt64,
        completion_tokens UInt64,
        total_tokens UInt64,
        cost_usd_bits UInt64,
        cost_usd Float64 ALIAS reinterpretAsFloat64(reinterpretAsString(cost_usd_bits)),
        finish_reason String,
        action_name String,
        environment String,
        request_id String,
        training_preferred UInt8,
        trainable UInt8,
        attr_keys Array(String),
        attr_values Array(String),
        attr_types Array(String),
        res_keys Array(String),
        res_values Array(String),
        res_types Array(String),
        events_json String,
        stored_bytes UInt64,
        ingested_at_ms UInt64
      ) ENGINE = ReplacingMergeTree(ingested_at_ms)
      PARTITION BY toYYYYMM(start_date)
      ORDER BY (workspace_id, prompt_hash, response_hash, trace_id, span_id)`,
      `CREATE MATERIALIZED VIEW IF NOT EXISTS ${db}.training_calls_mv TO ${db}.training_calls AS ${trainingCalls(db)}`,
      `INSERT INTO ${db}.training_calls ${trainingCalls(db)}`,
      `DROP TABLE IF EXISTS ${db}.training_spans_mv`,
      `DROP TABLE IF EXISTS ${db}.training_spans`,
    ],
  },
];

/** training_calls' rows of the spans table's (v16): the spans row as stored, with its hashes and text size. */
function trainingCalls(db: string): string {
  const hash = (col: string) => `reinterpretAsUInt64(substring(MD5(${col}), 9, 8))`;
  return `SELECT workspace_id, ${hash('prompt')} AS prompt_hash, ${hash('response')} AS response_hash, trace_id, span_id,
        parent_span_id, name, kind, source, start_ns, end_ns, start_date, duration_ms_bits, status, status_message,
        model, provider, prompt, response, prompt_tokens, completion_tokens, total_tokens, cost_usd_bits,
        finish_reason, action_name, environment, request_id, training_preferred, trainable,
        attr_keys, attr_values, attr_types, res_keys, res_values, res_types, events_json,
        length(prompt) + length(response) + length(events_json) + arraySum(arrayMap(x -> length(x), attr_values))
          + arraySum(arrayMap(x -> length(x), res_values)) AS stored_bytes,
        ingested_at_ms
      FROM ${db}.spans WHERE trainable = 1 AND kind = 'llm'`;
}

/** training_spans' rows of the spans table's (v15). */
function trainingRows(db: string): string {
  const hash = (col: string) => `reinterpretAsUInt64(substring(MD5(${col}), 9, 8))`;
  return `SELECT workspace_id, ${hash('prompt')} AS prompt_hash, ${hash('response')} AS response_hash, trace_id, span_id,
        start_ns, start_date, model, action_name, environment, source, training_preferred,
        length(prompt) + length(response) + length(events_json) + arraySum(arrayMap(x -> length(x), attr_values))
          + arraySum(arrayMap(x -> length(x), res_values)) AS stored_bytes,
        ingested_at_ms
      FROM ${db}.spans WHERE trainable = 1 AND kind = 'llm'`;
}

/**
 * Run after the migrations at every start: what later versions dropped, dropped again. A collector still running
 * an old migration while another finished the newest (two starting at once on an empty database) can re-create a
 * superseded view — one writing the dropped cost_usd_sum column fails every span insert — and, if it dies before
 * reaching the newest itself, nothing else would remove it.
 */
export function supersededObjects(db: string): ClickHouseStatement[] {
  return [
    `DROP TABLE IF EXISTS ${db}.usage_hourly_mv`,
    `DROP TABLE IF EXISTS ${db}.usage_hourly_once_mv`,
    `DROP TABLE IF EXISTS ${db}.usage_hourly_embedding_mv`,
    `DROP TABLE IF EXISTS ${db}.findings_daily_mv`,
    { dropColumn: `ALTER TABLE ${db}.usage_hourly DROP COLUMN cost_usd_sum` },
    // v15's view re-created after v16 dropped its table would fail every span insert.
    `DROP TABLE IF EXISTS ${db}.training_spans_mv`,
    `DROP TABLE IF EXISTS ${db}.training_spans`,
  ];
}
