// Versioned DuckDB schema. Append new migrations; never edit an applied one.
// Each migration runs in one transaction together with its schema_migrations row.

export interface DuckDbMigration {
  version: number;
  description: string;
  statements: string[];
}

/** Column order of `spans`; the appender in duckdb.ts writes values in exactly this order. */
export const SPAN_COLUMNS = [
  'workspace_id', 'trace_id', 'span_id', 'parent_span_id', 'name', 'kind', 'source',
  'start_ns', 'end_ns', 'duration_ms', 'status', 'status_message', 'model', 'provider', 'prompt', 'response',
  'prompt_tokens', 'completion_tokens', 'total_tokens', 'cost_usd',
  'finish_reason', 'action_name', 'environment', 'request_id', 'training_preferred', 'trainable',
  'attributes', 'resource_attributes', 'events_json', 'ingested_at_ms',
] as const;

export const DUCKDB_MIGRATIONS: readonly DuckDbMigration[] = [
  {
    version: 1,
    description: 'spans, workspaces, api_keys',
    statements: [
      // attributes/resource_attributes/events_json hold JSON text (json_extract works on them).
      `CREATE TABLE IF NOT EXISTS spans (
        workspace_id VARCHAR NOT NULL,
        trace_id VARCHAR NOT NULL,
        span_id VARCHAR NOT NULL,
        parent_span_id VARCHAR NOT NULL,
        name VARCHAR NOT NULL,
        kind VARCHAR NOT NULL,
        source VARCHAR NOT NULL,
        start_ns UBIGINT NOT NULL,
        end_ns UBIGINT NOT NULL,
        duration_ms DOUBLE NOT NULL,
        status VARCHAR NOT NULL,
        status_message VARCHAR NOT NULL,
        model VARCHAR NOT NULL,
        provider VARCHAR NOT NULL,
        prompt VARCHAR NOT NULL,
        response VARCHAR NOT NULL,
        prompt_tokens BIGINT NOT NULL,
        completion_tokens BIGINT NOT NULL,
        total_tokens BIGINT NOT NULL,
        cost_usd DOUBLE NOT NULL,
        finish_reason VARCHAR NOT NULL,
        action_name VARCHAR NOT NULL,
        environment VARCHAR NOT NULL,
        request_id VARCHAR NOT NULL,
        training_preferred BOOLEAN NOT NULL,
        trainable BOOLEAN NOT NULL,
        attributes VARCHAR NOT NULL,
        resource_attributes VARCHAR NOT NULL,
        events_json VARCHAR NOT NULL,
        ingested_at_ms BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, trace_id, span_id)
      )`,
      `CREATE TABLE IF NOT EXISTS workspaces (
        id VARCHAR PRIMARY KEY,
        name VARCHAR NOT NULL,
        created_at_ms BIGINT NOT NULL
      )`,
      `CREATE TABLE IF NOT EXISTS api_keys (
        key_id VARCHAR PRIMARY KEY,
        workspace_id VARCHAR NOT NULL,
        hash VARCHAR NOT NULL,
        created_at_ms BIGINT NOT NULL,
        revoked_at_ms BIGINT NOT NULL
      )`,
    ],
  },
  {
    version: 2,
    description: 'workspace settings documents, every version kept',
    statements: [
      `CREATE TABLE IF NOT EXISTS settings (
        workspace_id VARCHAR NOT NULL,
        version BIGINT NOT NULL,
        doc VARCHAR NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, version)
      )`,
    ],
  },
];
