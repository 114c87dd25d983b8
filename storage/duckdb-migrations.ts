// Versioned DuckDB schema. Append new migrations; never edit an applied one.
// Each migration runs in one transaction together with its schema_migrations row.

export interface DuckDbMigration {
  version: number;
  description: string;
  statements: string[];
}

/** Column order of `spans`; the appender in duckdb.ts writes values in exactly this order. */
export const SPAN_COLUMNS = [
  'workspace_id',
  'trace_id',
  'span_id',
  'parent_span_id',
  'name',
  'kind',
  'source',
  'start_ns',
  'end_ns',
  'duration_ms',
  'status',
  'status_message',
  'model',
  'provider',
  'prompt',
  'response',
  'prompt_tokens',
  'completion_tokens',
  'total_tokens',
  'cost_usd',
  'finish_reason',
  'action_name',
  'environment',
  'request_id',
  'training_preferred',
  'trainable',
  'attributes',
  'resource_attributes',
  'events_json',
  'ingested_at_ms',
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
  {
    version: 3,
    description: 'enrichment: findings, policy_records, audit_log, alerts, verification, verification_checkpoints',
    // Primary key = the record's natural key; duckdb-enrichment.ts upserts through per-connection
    // staging tables (versioned tables: newest version wins, the later write on a tie;
    // append-only tables: the first write stays). Column order is the appender's order.
    // No rollup tables: DuckDB answers usage()/findingsDaily() with plain SQL over spans/findings.
    statements: [
      `CREATE TABLE IF NOT EXISTS findings (
        workspace_id VARCHAR NOT NULL,
        trace_id VARCHAR NOT NULL,
        span_id VARCHAR NOT NULL,
        field VARCHAR NOT NULL,
        rule VARCHAR NOT NULL,
        start_offset BIGINT NOT NULL,
        end_offset BIGINT NOT NULL,
        detector VARCHAR NOT NULL,
        category VARCHAR NOT NULL,
        severity VARCHAR NOT NULL,
        preview VARCHAR NOT NULL,
        score DOUBLE NOT NULL,
        action VARCHAR NOT NULL,
        created_at_ms BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, trace_id, span_id, field, rule, start_offset)
      )`,
      `CREATE TABLE IF NOT EXISTS policy_records (
        workspace_id VARCHAR NOT NULL,
        trace_id VARCHAR NOT NULL,
        span_id VARCHAR NOT NULL,
        policy_version BIGINT NOT NULL,
        decision VARCHAR NOT NULL,
        reasons VARCHAR NOT NULL,
        created_at_ms BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, trace_id, span_id)
      )`,
      `CREATE TABLE IF NOT EXISTS audit_log (
        workspace_id VARCHAR NOT NULL,
        chain_id VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        at_ms BIGINT NOT NULL,
        actor VARCHAR NOT NULL,
        action VARCHAR NOT NULL,
        route VARCHAR NOT NULL,
        outcome VARCHAR NOT NULL,
        accepted BIGINT NOT NULL,
        rejected BIGINT NOT NULL,
        details VARCHAR NOT NULL,
        prev_hash VARCHAR NOT NULL,
        hash VARCHAR NOT NULL,
        PRIMARY KEY (workspace_id, chain_id, seq)
      )`,
      `CREATE TABLE IF NOT EXISTS alerts (
        workspace_id VARCHAR NOT NULL,
        alert_id VARCHAR NOT NULL,
        rule_id VARCHAR NOT NULL,
        kind VARCHAR NOT NULL,
        severity VARCHAR NOT NULL,
        message VARCHAR NOT NULL,
        trace_id VARCHAR NOT NULL,
        value DOUBLE NOT NULL,
        threshold DOUBLE NOT NULL,
        window_start_ms BIGINT NOT NULL,
        at_ms BIGINT NOT NULL,
        delivered VARCHAR NOT NULL,
        PRIMARY KEY (workspace_id, alert_id)
      )`,
      `CREATE TABLE IF NOT EXISTS verification (
        workspace_id VARCHAR NOT NULL,
        chain_id VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        trace_id VARCHAR NOT NULL,
        span_ids VARCHAR[] NOT NULL,
        span_versions UBIGINT[] NOT NULL,
        content_hash VARCHAR NOT NULL,
        prev_hash VARCHAR NOT NULL,
        hash VARCHAR NOT NULL,
        created_at_ms BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, chain_id, seq)
      )`,
      `CREATE TABLE IF NOT EXISTS verification_checkpoints (
        workspace_id VARCHAR NOT NULL,
        chain_id VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        head_hash VARCHAR NOT NULL,
        key_id VARCHAR NOT NULL,
        signature VARCHAR NOT NULL,
        at_ms BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, chain_id, seq)
      )`,
    ],
  },
  {
    version: 4,
    description: 'published verification keys',
    statements: [
      `CREATE TABLE IF NOT EXISTS verification_keys (
        key_id VARCHAR NOT NULL PRIMARY KEY,
        public_key_pem VARCHAR NOT NULL,
        published_at_ms BIGINT NOT NULL
      )`,
    ],
  },
  {
    version: 5,
    description: 'provider response ids the proxy handed to each workspace',
    statements: [
      `CREATE TABLE IF NOT EXISTS proxy_responses (
        workspace_id VARCHAR NOT NULL,
        response_id VARCHAR NOT NULL,
        upstream VARCHAR NOT NULL,
        trace_id VARCHAR NOT NULL,
        PRIMARY KEY (workspace_id, response_id, upstream)
      )`,
    ],
  },
  {
    version: 6,
    description: 'append-only chained tables (audit_log, verification, verification_checkpoints) without a key index',
    // Their PRIMARY KEY only dropped replays, and made every insert probe and grow an ART index that DuckDB holds in
    // memory for every record ever stored (an upsert costs more than an append). Replays are now skipped by chain
    // position before the append (duckdb-enrichment.ts, newOnly).
    // DuckDB cannot drop a constraint: each table is made again without it and its rows copied, in this migration's
    // transaction.
    statements: [
      ...withoutKey(
        'audit_log',
        `workspace_id VARCHAR NOT NULL,
        chain_id VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        at_ms BIGINT NOT NULL,
        actor VARCHAR NOT NULL,
        action VARCHAR NOT NULL,
        route VARCHAR NOT NULL,
        outcome VARCHAR NOT NULL,
        accepted BIGINT NOT NULL,
        rejected BIGINT NOT NULL,
        details VARCHAR NOT NULL,
        prev_hash VARCHAR NOT NULL,
        hash VARCHAR NOT NULL`,
      ),
      ...withoutKey(
        'verification',
        `workspace_id VARCHAR NOT NULL,
        chain_id VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        trace_id VARCHAR NOT NULL,
        span_ids VARCHAR[] NOT NULL,
        span_versions UBIGINT[] NOT NULL,
        content_hash VARCHAR NOT NULL,
        prev_hash VARCHAR NOT NULL,
        hash VARCHAR NOT NULL,
        created_at_ms BIGINT NOT NULL`,
      ),
      ...withoutKey(
        'verification_checkpoints',
        `workspace_id VARCHAR NOT NULL,
        chain_id VARCHAR NOT NULL,
        seq BIGINT NOT NULL,
        head_hash VARCHAR NOT NULL,
        key_id VARCHAR NOT NULL,
        signature VARCHAR NOT NULL,
        at_ms BIGINT NOT NULL`,
      ),
    ],
  },
  {
    version: 7,
    description: 'feedback votes, security alerts, webhook signing secrets and accepted deliveries',
    // feedback and security_alerts are keyed tables (duckdb-enrichment.ts upserts them, the newest received_at_ms
    // wins): a vote's key holds no date, so a re-vote on another day replaces the first.
    statements: [
      `CREATE TABLE IF NOT EXISTS feedback (
        workspace_id VARCHAR NOT NULL,
        vote_key VARCHAR NOT NULL,
        vote_id VARCHAR NOT NULL,
        trace_id VARCHAR NOT NULL,
        target_type VARCHAR NOT NULL,
        target_id VARCHAR NOT NULL,
        name VARCHAR NOT NULL,
        value VARCHAR NOT NULL,
        retracted BOOLEAN NOT NULL,
        comment VARCHAR NOT NULL,
        user_id VARCHAR NOT NULL,
        source VARCHAR NOT NULL,
        metadata VARCHAR NOT NULL,
        voted_at_ms BIGINT NOT NULL,
        received_at_ms BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, vote_key)
      )`,
      `CREATE TABLE IF NOT EXISTS security_alerts (
        workspace_id VARCHAR NOT NULL,
        alert_id VARCHAR NOT NULL,
        source VARCHAR NOT NULL,
        severity VARCHAR NOT NULL,
        raw_severity VARCHAR NOT NULL,
        title VARCHAR NOT NULL,
        category VARCHAR NOT NULL,
        external_id VARCHAR NOT NULL,
        detected_at_ms BIGINT NOT NULL,
        received_at_ms BIGINT NOT NULL,
        trace_id VARCHAR NOT NULL,
        span_id VARCHAR NOT NULL,
        request_id VARCHAR NOT NULL,
        response_id VARCHAR NOT NULL,
        session_id VARCHAR NOT NULL,
        user_id VARCHAR NOT NULL,
        signature VARCHAR NOT NULL,
        secret_id VARCHAR NOT NULL,
        correlation VARCHAR NOT NULL,
        body VARCHAR NOT NULL,
        PRIMARY KEY (workspace_id, alert_id)
      )`,
      `CREATE TABLE IF NOT EXISTS webhook_secrets (
        secret_id VARCHAR PRIMARY KEY,
        workspace_id VARCHAR NOT NULL,
        sealed VARCHAR NOT NULL,
        created_at_ms BIGINT NOT NULL,
        revoked_at_ms BIGINT NOT NULL
      )`,
      `CREATE TABLE IF NOT EXISTS webhook_deliveries (
        workspace_id VARCHAR NOT NULL,
        delivery_key VARCHAR NOT NULL,
        at_ms BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, delivery_key)
      )`,
    ],
  },
  {
    version: 8,
    description: 'browser sessions and one-time sign-in links',
    // Tokens are stored only as their SHA-256 (token_hash). claimed_at_ms: 0 until the link is used (once).
    statements: [
      `CREATE TABLE IF NOT EXISTS sessions (
        session_id VARCHAR NOT NULL,
        token_hash VARCHAR PRIMARY KEY,
        workspace_id VARCHAR NOT NULL,
        created_at_ms BIGINT NOT NULL,
        last_seen_ms BIGINT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        revoked_at_ms BIGINT NOT NULL
      )`,
      `CREATE TABLE IF NOT EXISTS signin_links (
        token_hash VARCHAR PRIMARY KEY,
        workspace_id VARCHAR NOT NULL,
        created_at_ms BIGINT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        claimed_at_ms BIGINT NOT NULL
      )`,
    ],
  },
  {
    version: 9,
    description: 'agent runtime traces: trace metadata, and the index of the calls the proxy recorded',
    // As ClickHouse v14: trace_meta keeps the newest trace item per trace; proxy_calls finds the proxy span of a
    // provider response id or request id.
    statements: [
      `CREATE TABLE IF NOT EXISTS trace_meta (
        workspace_id VARCHAR NOT NULL,
        trace_id VARCHAR NOT NULL,
        workflow_name VARCHAR NOT NULL,
        group_id VARCHAR NOT NULL,
        metadata VARCHAR NOT NULL,
        organization VARCHAR NOT NULL,
        project VARCHAR NOT NULL,
        source VARCHAR NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (workspace_id, trace_id)
      )`,
      `CREATE TABLE IF NOT EXISTS proxy_calls (
        workspace_id VARCHAR NOT NULL,
        id_kind VARCHAR NOT NULL,
        call_id VARCHAR NOT NULL,
        trace_id VARCHAR NOT NULL,
        span_id VARCHAR NOT NULL,
        PRIMARY KEY (workspace_id, id_kind, call_id)
      )`,
    ],
  },
  {
    version: 10,
    description: 'training_spans: the training export scans trainable model calls by prompt and response hash',
    // As ClickHouse v15. Appended to with every span insert (duckdb.ts), every version, no key: a read keeps a row only
    // while it names the span's stored version (storage/training.ts), so an index over it would only cost each insert
    // a probe and the memory of an entry per row. The rows of the spans stored before are copied here.
    statements: [
      `CREATE TABLE IF NOT EXISTS training_spans (
        workspace_id VARCHAR NOT NULL,
        prompt_hash UBIGINT NOT NULL,
        response_hash UBIGINT NOT NULL,
        trace_id VARCHAR NOT NULL,
        span_id VARCHAR NOT NULL,
        start_ns UBIGINT NOT NULL,
        model VARCHAR NOT NULL,
        action_name VARCHAR NOT NULL,
        environment VARCHAR NOT NULL,
        source VARCHAR NOT NULL,
        training_preferred BOOLEAN NOT NULL,
        stored_bytes BIGINT NOT NULL,
        ingested_at_ms BIGINT NOT NULL
      )`,
      `INSERT INTO training_spans ${trainingRows('spans')}`,
    ],
  },
];

/** training_spans' rows of a table with the spans table's columns (v10; the insert staging table too). */
export function trainingRows(table: string): string {
  return `SELECT workspace_id, md5_number_lower(prompt), md5_number_lower(response), trace_id, span_id, start_ns, model,
    action_name, environment, source, training_preferred,
    strlen(prompt) + strlen(response) + strlen(attributes) + strlen(resource_attributes) + strlen(events_json),
    ingested_at_ms FROM ${table} WHERE trainable AND kind = 'llm'`;
}

/** `table` made again with `columns` (its own, in its order) and no key; its rows copied over. */
function withoutKey(table: string, columns: string): string[] {
  return [
    `CREATE TABLE ${table}_v6 (${columns})`,
    `INSERT INTO ${table}_v6 SELECT * FROM ${table}`,
    `DROP TABLE ${table}`,
    `ALTER TABLE ${table}_v6 RENAME TO ${table}`,
  ];
}

/**
 * Enrichment tables: column order (the appender writes values in exactly this order), key
 * columns, and the version column deciding a conflicting write (null: append-only, first stays).
 * The append-only tables key a record by its chain position (workspace, chain, seq); since v6 no index holds it.
 */
export const ENRICHMENT_TABLES = {
  findings: {
    columns: [
      'workspace_id',
      'trace_id',
      'span_id',
      'field',
      'rule',
      'start_offset',
      'end_offset',
      'detector',
      'category',
      'severity',
      'preview',
      'score',
      'action',
      'created_at_ms',
    ],
    key: ['workspace_id', 'trace_id', 'span_id', 'field', 'rule', 'start_offset'],
    version: 'created_at_ms',
  },
  policy_records: {
    columns: ['workspace_id', 'trace_id', 'span_id', 'policy_version', 'decision', 'reasons', 'created_at_ms'],
    key: ['workspace_id', 'trace_id', 'span_id'],
    version: 'created_at_ms',
  },
  audit_log: {
    columns: [
      'workspace_id',
      'chain_id',
      'seq',
      'at_ms',
      'actor',
      'action',
      'route',
      'outcome',
      'accepted',
      'rejected',
      'details',
      'prev_hash',
      'hash',
    ],
    key: ['workspace_id', 'chain_id', 'seq'],
    version: null,
  },
  alerts: {
    columns: [
      'workspace_id',
      'alert_id',
      'rule_id',
      'kind',
      'severity',
      'message',
      'trace_id',
      'value',
      'threshold',
      'window_start_ms',
      'at_ms',
      'delivered',
    ],
    key: ['workspace_id', 'alert_id'],
    version: 'at_ms',
  },
  verification: {
    columns: [
      'workspace_id',
      'chain_id',
      'seq',
      'trace_id',
      'span_ids',
      'span_versions',
      'content_hash',
      'prev_hash',
      'hash',
      'created_at_ms',
    ],
    key: ['workspace_id', 'chain_id', 'seq'],
    version: null,
  },
  verification_checkpoints: {
    columns: ['workspace_id', 'chain_id', 'seq', 'head_hash', 'key_id', 'signature', 'at_ms'],
    key: ['workspace_id', 'chain_id', 'seq'],
    version: null,
  },
  feedback: {
    columns: [
      'workspace_id',
      'vote_key',
      'vote_id',
      'trace_id',
      'target_type',
      'target_id',
      'name',
      'value',
      'retracted',
      'comment',
      'user_id',
      'source',
      'metadata',
      'voted_at_ms',
      'received_at_ms',
    ],
    key: ['workspace_id', 'vote_key'],
    version: 'received_at_ms',
  },
  security_alerts: {
    columns: [
      'workspace_id',
      'alert_id',
      'source',
      'severity',
      'raw_severity',
      'title',
      'category',
      'external_id',
      'detected_at_ms',
      'received_at_ms',
      'trace_id',
      'span_id',
      'request_id',
      'response_id',
      'session_id',
      'user_id',
      'signature',
      'secret_id',
      'correlation',
      'body',
    ],
    key: ['workspace_id', 'alert_id'],
    version: 'received_at_ms',
  },
  trace_meta: {
    columns: [
      'workspace_id',
      'trace_id',
      'workflow_name',
      'group_id',
      'metadata',
      'organization',
      'project',
      'source',
      'updated_at_ms',
    ],
    key: ['workspace_id', 'trace_id'],
    version: 'updated_at_ms',
  },
} as const satisfies Record<string, { columns: readonly string[]; key: readonly string[]; version: string | null }>;
export type EnrichmentTable = keyof typeof ENRICHMENT_TABLES;
