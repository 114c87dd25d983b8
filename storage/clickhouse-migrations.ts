// Versioned ClickHouse schema. Append new migrations; never edit an applied one.
// Every statement must be idempotent (IF NOT EXISTS …): two collectors may start at once.
// Keep to syntax ClickHouse 18.16 understands (no Map/JSON/DateTime64/LowCardinality/TTL).

export interface ClickHouseMigration {
  version: number;
  description: string;
  /** SQL statements for database `db` (an already-checked identifier). */
  statements(db: string): string[];
}

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
];
