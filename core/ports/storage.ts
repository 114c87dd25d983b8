// The storage ports, one per concern. Two engines (ClickHouse, DuckDB) implement them all and pass the same
// contract suites (test/storage/contract.test.ts, test/storage/enrichment.test.ts).
import type { SpanRecord, SpanKind, Source } from '../record.ts';
import type {
  AlertRecord,
  AuditRecord,
  CheckpointRecord,
  EnrichmentRecord,
  FeedbackRecord,
  FindingRecord,
  PolicyRecord,
  SecurityAlertRecord,
  TraceMetaRecord,
  VerificationRecord,
} from '../enrichment-records.ts';

export interface Workspace {
  id: string;
  name: string;
  createdAtMs: number;
}

export interface ApiKeyRecord {
  keyId: string; // public part, e.g. "k_3f9a…"; the lookup key
  workspaceId: string;
  hash: string; // hex SHA-256 of the full secret key; the key itself is never stored
  createdAtMs: number;
  revokedAtMs: number; // 0 when active
}

/** A trace is listed when one of its spans satisfies every filter (time range on span start). */
export interface TraceFilter {
  fromMs?: number; // inclusive
  toMs?: number; // exclusive
  /** Bounds to the nanosecond (the read route's); each takes the place of its ms one. */
  fromNs?: bigint;
  toNs?: bigint;
  model?: string;
  actionName?: string;
  environment?: string;
  status?: string;
  source?: Source;
  /** Traces with at least one standing vote of this value (direct, or through a span, response or request id). */
  feedback?: 'up' | 'down';
  /** One trace only (its rollup when GET /api/traces/:id shows a part of its spans). */
  traceId?: string;
  limit: number; // 1..1000
  /** Opaque cursor returned as nextCursor by the previous page. */
  cursor?: string;
}

/** One row of GET /api/traces: a trace rolled up over its spans. */
export interface TraceSummary {
  traceId: string;
  name: string; // of the root-most span
  startTimeNs: string;
  endTimeNs: string;
  durationMs: number; // trace wall time: max(end) - min(start)
  spanCount: number;
  status: string; // 'error' if any span errored, else the root span's status
  errorCount: number; // spans with status 'error'
  model: string;
  source: Source | string;
  actionName: string;
  environment: string;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  costUsd: number;
}

export interface TracePage {
  items: TraceSummary[];
  nextCursor: string | null;
}

export interface ChainState {
  next: CheckpointRecord | null;
  lastCheckpoint: CheckpointRecord | null;
  last: { seq: number; createdAtMs: number } | null;
}

/** A place in a chain: pages of chain records start after it. */
export interface ChainPos {
  chainId: string;
  seq: number;
}

/**
 * A part of a trace's spans, in start order: the first `limit` after the span `after` (start ns, span id), fewer
 * when their stored size reaches `maxBytes` (the span reaching it ends the part, so a part is never empty while
 * spans are left).
 */
export interface SpanPage {
  limit: number;
  after?: { startNs: string; spanId: string };
  maxBytes?: number;
}

/** A part of a trace, and whether spans follow it. */
export interface SpanPart {
  spans: SpanRecord[];
  more: boolean;
}
/** A trace as stored: its distinct spans, and their text in bytes (each span's newest version, as SpanPage.maxBytes counts). */
export interface TraceSize {
  spans: number;
  bytes: number;
}

/**
 * Spans and enrichment records, each encoded as it is added, so that the caller need not hold them all as objects
 * until the insert (ClickHouseStorage.recordBatch, used by storage/spool-files.ts). finish() stores them as
 * insertSpans and then insertEnrichment would, and only once. add() throws for a span, audit, verification or
 * checkpoint record that cannot be stored, and leaves the batch as it was; findings, policies and alerts are
 * checked in finish(), after the spans are stored, as insertEnrichment does after insertSpans.
 */
export interface RecordBatch {
  add(record: SpanRecord | EnrichmentRecord): void;
  finish(): Promise<void>;
}

/** Storage: the engine itself. */
export interface StorageLifecycle {
  readonly kind: 'clickhouse' | 'duckdb';
  /** Connect and run migrations (idempotent, versioned). */
  init(): Promise<void>;
  close(): Promise<void>;
  /** True when the backend answers a trivial query. */
  ping(): Promise<boolean>;
}

/** Storage: spans and the reads over them. */
export interface SpanStore {
  /** Insert a batch. Idempotent on (workspaceId, traceId, spanId): the record with the highest ingestedAtMs wins. */
  insertSpans(rows: SpanRecord[]): Promise<void>;
  /** The spans of a trace in the workspace, ordered by start time then span id; [] when unknown. */
  getTrace(workspaceId: string, traceId: string): Promise<SpanRecord[]>;
  /**
   * A part of a trace (GET /api/traces/:id and verification read a large trace in parts): its span ids (and, for
   * `maxBytes`, their stored sizes) are picked first, then only those rows are read.
   */
  getTracePart(workspaceId: string, traceId: string, page: SpanPage): Promise<SpanPart>;
  /** Some spans of a trace by id, each as its newest version, in span id order; unknown ids are left out (verification of a large trace, a record at a time). */
  getSpans(workspaceId: string, traceId: string, spanIds: readonly string[]): Promise<SpanRecord[]>;
  /**
   * The stored version (newest ingestedAtMs) of each of these spans, in (traceId, spanId) order; unknown spans are
   * left out. Reads that list findings keep only the records of stored versions with it.
   */
  spanVersions(workspaceId: string, keys: readonly SpanKey[]): Promise<SpanVersion[]>;
  /** getTrace for many traces in one query (verification): trace id → its spans; unknown ids are left out. */
  getTraces(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, SpanRecord[]>>;
  listTraces(workspaceId: string, filter: TraceFilter): Promise<TracePage>;
  /** Distinct spans stored in a workspace (tests and the benchmark's stored==acknowledged check). */
  countSpans(workspaceId: string): Promise<number>;
  /**
   * Whether a stored proxy span gave this provider response id to the workspace, from this upstream (host:port).
   * insertSpans indexes each span that proves it (core/response-ownership.ts ownershipOf).
   */
  hasProxyResponse(workspaceId: string, responseId: string, upstream: string): Promise<boolean>;
  /** The sizes of these traces as stored (verification reads them in chunks that fit a budget); traces with none are left out. */
  traceSizes(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, TraceSize>>;
  /** The stored size (SpanPage.maxBytes's measure) of each of these spans of a trace, newest version; unknown ids are left out. */
  spanSizes(workspaceId: string, traceId: string, spanIds: readonly string[]): Promise<Map<string, number>>;
}

/** Storage: workspaces and their API keys. */
export interface WorkspaceStore {
  createWorkspace(ws: Workspace): Promise<void>;
  getWorkspaceByName(name: string): Promise<Workspace | null>;
  getWorkspace(id: string): Promise<Workspace | null>;
  putApiKey(key: ApiKeyRecord): Promise<void>;
  getApiKey(keyId: string): Promise<ApiKeyRecord | null>;
  listApiKeys(workspaceId?: string): Promise<ApiKeyRecord[]>;
  /** Returns false when no such key. */
  revokeApiKey(keyId: string, atMs: number): Promise<boolean>;
}

/** A browser session (POST /api/auth/session, issue 43): its token is never stored, only the token's SHA-256. */
export interface SessionRecord {
  /** Public id, `ses_` + 16 hex digits: what `sessions list` and `revoke`, audit records and rate limits name. */
  sessionId: string;
  /** Hex SHA-256 of the cookie's token: the lookup key. */
  tokenHash: string;
  workspaceId: string;
  createdAtMs: number;
  /** The last use recorded (a use is recorded at most about once a minute). */
  lastSeenAtMs: number;
  /** Absolute expiry: the session ends then, used or not. */
  expiresAtMs: number;
  /** 0 while not revoked. */
  revokedAtMs: number;
}

/** A one-time sign-in link (`tracegate sessions create`): its token stored only as the token's SHA-256. */
export interface SignInLinkRecord {
  tokenHash: string;
  workspaceId: string;
  createdAtMs: number;
  expiresAtMs: number;
}

/** Storage: browser sessions and one-time sign-in links, shared by every collector on the storage. */
export interface SessionStore {
  putSession(session: SessionRecord): Promise<void>;
  /** The session whose token has this hash, revoked or expired ones too; null when none. */
  getSession(tokenHash: string): Promise<SessionRecord | null>;
  /** Records a use: lastSeenAtMs becomes atMs if later. Never undoes a revocation, whatever the order of the two. */
  touchSession(session: SessionRecord, atMs: number): Promise<void>;
  /** Sessions whose absolute expiry is after `nowMs` (revoked ones included), newest first; of one workspace, or all. */
  listSessions(q: { workspaceId?: string; nowMs: number }): Promise<SessionRecord[]>;
  /** Revokes a session by id: the session as revoked (a revoked one keeps its first revocation time); null when none. */
  revokeSession(sessionId: string, atMs: number): Promise<SessionRecord | null>;
  putSignInLink(link: SignInLinkRecord): Promise<void>;
  /**
   * Takes a link for one sign-in: the link when it exists, has not expired at `atMs` and was never taken; else null.
   * Of claims racing (collectors sharing the storage included), at most one gets the link.
   */
  claimSignInLink(tokenHash: string, atMs: number): Promise<SignInLinkRecord | null>;
}

/** Storage: each workspace's settings document. */
export interface SettingsDocStore {
  /** The workspace's settings document (policy, provider, alert rules), newest version; null when never set. */
  getSettings(workspaceId: string): Promise<{ doc: string; version: number } | null>;
  /**
   * Store a version; resolves false, and the write does not count, when another write of the same version raced it
   * (collectors sharing the storage changing one workspace at once). Never true for two writes of one version.
   */
  putSettings(workspaceId: string, doc: string, version: number, atMs: number): Promise<boolean>;
}

/** Storage: findings, policy decisions, the audit log and alert signals. */
export interface EnrichmentStore {
  // ---- enrichment (issue: governance, audit, alerts, verification, analytics) ----
  /** Insert enrichment records of any type; idempotent per record's natural key (see each table). */
  insertEnrichment(rows: EnrichmentRecord[]): Promise<void>;
  listFindings(workspaceId: string, q: FindingQuery): Promise<Page<FindingRecord>>;
  /** How many findings each of these traces holds (each natural key once); traces without any left out. */
  findingCounts(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, number>>;
  /** A trace's policy records (the newest per span), in (createdAtMs, spanId) order; `spanIds`: of those spans only. */
  getPolicyRecords(workspaceId: string, traceId: string, spanIds?: readonly string[]): Promise<PolicyRecord[]>;
  /** Newest first by (atMs, chainId, seq). */
  listAudit(workspaceId: string, q: AuditQuery): Promise<Page<AuditRecord>>;
  /** A workspace's audit records in chain order (chainId, seq): the first `limit` after `after` (chain verification reads a page at a time). */
  auditPage(workspaceId: string, after: ChainPos | null, limit: number): Promise<AuditRecord[]>;
  /** Whether the workspace holds an audit record with this hash (the earlier run an audit chain continues). */
  hasAuditHash(workspaceId: string, hash: string): Promise<boolean>;
  /** Newest first. */
  listAlerts(workspaceId: string, q: AlertQuery): Promise<Page<AlertRecord>>;
}

/** Storage: verification records and checkpoints. */
export interface VerificationStore {
  /** Verification records covering a trace, in chain order. */
  getVerification(workspaceId: string, traceId: string): Promise<VerificationRecord[]>;
  /** Verification records of these traces, each trace's in chain order; traces without any are left out. */
  verificationOfTraces(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, VerificationRecord[]>>;
  /** A workspace's verification records in chain order (chainId, seq): the first `limit` after `after`. */
  verificationPage(workspaceId: string, after: ChainPos | null, limit: number): Promise<VerificationRecord[]>;
  /** A workspace's checkpoints in chain order (chainId, seq): the first `limit` after `after`. */
  checkpointPage(workspaceId: string, after: ChainPos | null, limit: number): Promise<CheckpointRecord[]>;
  /** Traces with stored spans but no verification record, in trace id order: the first `limit` after `after`, with their sizes. */
  unverifiedTraces(
    workspaceId: string,
    after: string | null,
    limit: number,
  ): Promise<Array<{ traceId: string } & TraceSize>>;
  /** A chain's records with fromSeq <= seq <= toSeq, in seq order (checking one trace reads around its records only). */
  verificationRange(
    workspaceId: string,
    chainId: string,
    fromSeq: number,
    toSeq: number,
  ): Promise<VerificationRecord[]>;
  /** Of a chain: its first checkpoint at or after `seq`, its newest checkpoint, and its newest record's seq and time. */
  chainState(workspaceId: string, chainId: string, seq: number): Promise<ChainState>;
  /** Whether the workspace holds a verification record with this hash (the earlier run a chain continues). */
  hasVerificationHash(workspaceId: string, hash: string): Promise<boolean>;
  /** Every workspace with anything to verify: registered, or holding spans, verification or audit records (for `tracegate verify` without --workspace). */
  verificationWorkspaces(): Promise<string[]>;
}

/** Storage: the public keys collectors sign checkpoints with. */
export interface SigningKeyStore {
  /** Record public signing keys (each collector publishes its own at start) so any collector verifies the others' chains. */
  publishKeys(keys: PublishedKey[]): Promise<void>;
  /** Every key published to this storage, by key id. */
  publishedKeys(): Promise<PublishedKey[]>;
}

/** Storage: aggregates over spans and findings. */
export interface AnalyticsStore {
  /** Usage analytics over model calls (kind llm and embedding); ClickHouse answers from materialized rollups. */
  usage(workspaceId: string, q: UsageQuery): Promise<UsageRow[]>;
  /**
   * Activity per hour or day (UTC) of span start: traces (by their first span in the range), spans, failed spans, tool
   * calls and their failures, guardrail checks; and security alerts by receive time. Buckets with nothing are left out.
   */
  activity(workspaceId: string, q: ActivityQuery): Promise<ActivityRow[]>;
  /** Findings per category and day. */
  findingsDaily(
    workspaceId: string,
    q: { fromMs?: number; toMs?: number },
  ): Promise<Array<{ day: string; category: string; severity: string; count: number }>>;
}

/**
 * Storage: feedback votes and security alerts as they link to traces. A vote or an alert names a trace directly, or
 * only a span, a provider response or a request id: those are resolved when read, against the spans stored by then
 * (so one that arrives before its trace is linked once the trace arrives).
 */
export interface SignalStore {
  /** The trace of each provider response id the proxy recorded for the workspace (any upstream); unknown ids left out. */
  responseTraces(workspaceId: string, responseIds: readonly string[]): Promise<Map<string, string>>;
  /** The trace of each span id stored in the workspace (the web UI's jump to a span); unknown ids left out. */
  spanTraces(workspaceId: string, spanIds: readonly string[]): Promise<Map<string, string>>;
  /** The standing votes (newest version of each, retractions left out) linked to the trace, newest first. */
  traceFeedback(workspaceId: string, traceId: string): Promise<FeedbackRecord[]>;
  /** The standing votes linked to each of these traces, counted as `traceFeedback` would list them (every trace named). */
  voteCounts(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, { up: number; down: number }>>;
  /** The security alerts linked to the trace, newest first, at most `limit`. */
  traceSecurityAlerts(workspaceId: string, traceId: string, limit: number): Promise<SecurityAlertRecord[]>;
  /** Newest first by (receivedAtMs, alertId). */
  listSecurityAlerts(workspaceId: string, q: SecurityAlertQuery): Promise<Page<SecurityAlertRecord>>;
}

/**
 * Storage: webhook signing secrets (sealed: storage never holds one in the clear) and the deliveries already
 * accepted, so that collectors sharing the storage refuse a replay that another of them accepted.
 */
export interface WebhookStore {
  putWebhookSecret(rec: WebhookSecretRecord): Promise<void>;
  getWebhookSecret(secretId: string): Promise<WebhookSecretRecord | null>;
  /** A workspace's secrets (every workspace's without one), active and revoked, oldest first. */
  listWebhookSecrets(workspaceId?: string): Promise<WebhookSecretRecord[]>;
  /** False when no such secret; a second revocation keeps the first time. */
  revokeWebhookSecret(secretId: string, atMs: number): Promise<boolean>;
  /**
   * Record deliveries as accepted, several at once: for each, true for the first claim of its key in its workspace,
   * false when it was claimed before (by this collector or another sharing the storage), or earlier in the same
   * call. Of claims racing, at most one gets true.
   */
  claimDeliveries(claims: readonly DeliveryClaim[], atMs: number): Promise<boolean[]>;
  /** For each delivery, whether it was claimed (a replay is refused before its body is looked at). */
  claimedDeliveries(claims: readonly DeliveryClaim[]): Promise<boolean[]>;
}

/** A signed webhook delivery, by what it signed (its claim key), in a workspace. */
export interface DeliveryClaim {
  workspaceId: string;
  key: string;
}

/** How a call the proxy made is named: the provider's response id (`resp_…`) or its request id (`req_…`). */
export interface ProxyCallRef {
  kind: 'response' | 'request';
  id: string;
}
/** The proxy span that recorded a call. */
export interface ProxyCall extends ProxyCallRef, SpanKey {}

/**
 * Storage: what joins an agent runtime's traces to the rest. Trace metadata records (TraceMetaRecord) are written
 * with the enrichment records (insertEnrichment, RecordBatch.add); the proxy-call index with the proxy spans that
 * name the calls (insertSpans, RecordBatch.add: every proxy span with a response or request id).
 */
export interface TraceLinkStore {
  /** The newest metadata record of each of these traces; traces without one are left out. */
  traceMeta(workspaceId: string, traceIds: readonly string[]): Promise<Map<string, TraceMetaRecord>>;
  /** The proxy span that recorded each of these calls, in (kind, id) order; calls the proxy never made are left out. */
  proxyCalls(workspaceId: string, refs: readonly ProxyCallRef[]): Promise<ProxyCall[]>;
}

/**
 * Where the training export's scan is: its order is a model call's prompt hash, response hash (the low 64 bits of the
 * MD5 of the stored text, as decimal), trace id and span id, so identical prompt/response pairs, and the answers to one
 * prompt, come one after another.
 */
export interface TrainingKey {
  promptHash: string;
  responseHash: string;
  traceId: string;
  spanId: string;
}

/** Which trainable model calls the export reads; each is matched on its stored (newest) version. */
export interface TrainingFilter {
  fromNs?: bigint; // span start, inclusive
  toNs?: bigint; // exclusive
  model?: string;
  actionName?: string;
  environment?: string;
  source?: string;
  /** trainingPreferred picks only. */
  curated?: boolean;
}

/** What the export needs to know before its scan: how many index rows match (to size its windows), and whether
 * the workspace has any votes or tool spans at all (each page then skips what it cannot find). */
export interface TrainingScope {
  candidates: number;
  votes: boolean;
  tools: boolean;
}

/** One page of the export's scan: at most `limit` index rows after `after`, prompt hashes in [`from`, `below`). */
export interface TrainingScan {
  filter: TrainingFilter;
  after?: TrainingKey;
  /** Inclusive lower bound on the prompt hash (decimal). */
  from?: string;
  /** Exclusive upper bound on the prompt hash (decimal); none: to the end. */
  below?: string;
  limit: number;
  /** A page ends once its spans' stored text reaches this many bytes (the span reaching it included). */
  maxBytes?: number;
  /** Read the page's traces' standing votes. */
  votes: boolean;
  /** Read the page's traces' tool spans, at most this many per trace (0: none). */
  tools: number;
}

/** What the export knows of a trace on its page. */
export interface TrainingTrace {
  /** Standing votes linked to the trace (as the trace read links them). */
  up: number;
  down: number;
  /** The agent runtime's group id (conversation), '' when none. */
  groupId: string;
  /** Its tool spans (kind tool), in start order. */
  tools: SpanRecord[];
}

export interface TrainingPage {
  /** The stored version of each trainable model call the page's index rows name, in scan order; an index row of an
   * earlier version (different text, no longer trainable, or gone) is left out. */
  rows: Array<{ key: TrainingKey; span: SpanRecord }>;
  /** Index rows read (stale ones included). */
  read: number;
  /** The last index row read: the next page starts after it (null when none). */
  last: TrainingKey | null;
  /** Whether rows may follow `last` within the scan's bounds. */
  more: boolean;
  /** By trace id. */
  traces: Map<string, TrainingTrace>;
}

/** Storage: the training-data export's scan, by an index of trainable model calls (clickhouse v15, duckdb v10). */
export interface TrainingStore {
  trainingScope(workspaceId: string, filter: TrainingFilter): Promise<TrainingScope>;
  trainingPage(workspaceId: string, scan: TrainingScan): Promise<TrainingPage>;
  /**
   * The trainable coach drafts (source coach, actionName coach_local_draft) of each coach session named, its newest
   * few (by start), in no particular order.
   */
  coachDrafts(workspaceId: string, sessionIds: readonly string[]): Promise<Map<string, SpanRecord[]>>;
}

/** Every storage engine: all the concerns above, behind one object. */
export interface Storage
  extends StorageLifecycle,
    SpanStore,
    WorkspaceStore,
    SessionStore,
    SettingsDocStore,
    EnrichmentStore,
    VerificationStore,
    SigningKeyStore,
    AnalyticsStore,
    SignalStore,
    WebhookStore,
    TraceLinkStore,
    TrainingStore {}

/** True only when `L` names every method of `T`: a method added to a port without its list fails the type check. */
type Complete<T, L extends readonly (keyof T)[]> = [Exclude<keyof T, L[number]>] extends [never] ? true : false;
type Assert<T extends true> = T;

// Each port's methods by name: what the storage thread's proxy forwards and the engines delegate by concern.
export const SPAN_METHODS = [
  'insertSpans',
  'getTrace',
  'getTracePart',
  'getSpans',
  'spanVersions',
  'getTraces',
  'listTraces',
  'countSpans',
  'hasProxyResponse',
  'traceSizes',
  'spanSizes',
] as const satisfies readonly (keyof SpanStore)[];
export const WORKSPACE_METHODS = [
  'createWorkspace',
  'getWorkspaceByName',
  'getWorkspace',
  'putApiKey',
  'getApiKey',
  'listApiKeys',
  'revokeApiKey',
] as const satisfies readonly (keyof WorkspaceStore)[];
export const SESSION_METHODS = [
  'putSession',
  'getSession',
  'touchSession',
  'listSessions',
  'revokeSession',
  'putSignInLink',
  'claimSignInLink',
] as const satisfies readonly (keyof SessionStore)[];
export const SETTINGS_METHODS = ['getSettings', 'putSettings'] as const satisfies readonly (keyof SettingsDocStore)[];
export const ENRICHMENT_METHODS = [
  'insertEnrichment',
  'listFindings',
  'findingCounts',
  'getPolicyRecords',
  'listAudit',
  'auditPage',
  'hasAuditHash',
  'listAlerts',
] as const satisfies readonly (keyof EnrichmentStore)[];
export const VERIFICATION_METHODS = [
  'getVerification',
  'verificationOfTraces',
  'verificationPage',
  'checkpointPage',
  'unverifiedTraces',
  'verificationRange',
  'chainState',
  'hasVerificationHash',
  'verificationWorkspaces',
] as const satisfies readonly (keyof VerificationStore)[];
export const SIGNING_KEY_METHODS = [
  'publishKeys',
  'publishedKeys',
] as const satisfies readonly (keyof SigningKeyStore)[];
export const ANALYTICS_METHODS = [
  'usage',
  'activity',
  'findingsDaily',
] as const satisfies readonly (keyof AnalyticsStore)[];
export const SIGNAL_METHODS = [
  'responseTraces',
  'spanTraces',
  'traceFeedback',
  'voteCounts',
  'traceSecurityAlerts',
  'listSecurityAlerts',
] as const satisfies readonly (keyof SignalStore)[];
export const WEBHOOK_METHODS = [
  'putWebhookSecret',
  'getWebhookSecret',
  'listWebhookSecrets',
  'revokeWebhookSecret',
  'claimDeliveries',
  'claimedDeliveries',
] as const satisfies readonly (keyof WebhookStore)[];
export const TRACE_LINK_METHODS = ['traceMeta', 'proxyCalls'] as const satisfies readonly (keyof TraceLinkStore)[];
export const TRAINING_METHODS = [
  'trainingScope',
  'trainingPage',
  'coachDrafts',
] as const satisfies readonly (keyof TrainingStore)[];

/** Fails the type check when a port's list misses one of its methods. */
export type PortListsComplete = [
  Assert<Complete<SpanStore, typeof SPAN_METHODS>>,
  Assert<Complete<WorkspaceStore, typeof WORKSPACE_METHODS>>,
  Assert<Complete<SessionStore, typeof SESSION_METHODS>>,
  Assert<Complete<SettingsDocStore, typeof SETTINGS_METHODS>>,
  Assert<Complete<EnrichmentStore, typeof ENRICHMENT_METHODS>>,
  Assert<Complete<VerificationStore, typeof VERIFICATION_METHODS>>,
  Assert<Complete<SigningKeyStore, typeof SIGNING_KEY_METHODS>>,
  Assert<Complete<AnalyticsStore, typeof ANALYTICS_METHODS>>,
  Assert<Complete<SignalStore, typeof SIGNAL_METHODS>>,
  Assert<Complete<WebhookStore, typeof WEBHOOK_METHODS>>,
  Assert<Complete<TraceLinkStore, typeof TRACE_LINK_METHODS>>,
  Assert<Complete<TrainingStore, typeof TRAINING_METHODS>>,
];

/** Every storage call but the engine's lifecycle (init, close, kind), in port order. */
export const STORAGE_METHODS = [
  ...SPAN_METHODS,
  ...WORKSPACE_METHODS,
  ...SESSION_METHODS,
  ...SETTINGS_METHODS,
  ...ENRICHMENT_METHODS,
  ...VERIFICATION_METHODS,
  ...SIGNING_KEY_METHODS,
  ...ANALYTICS_METHODS,
  ...SIGNAL_METHODS,
  ...WEBHOOK_METHODS,
  ...TRACE_LINK_METHODS,
  ...TRAINING_METHODS,
  'ping',
] as const;

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** A span named by its trace and span id (within a workspace). */
export interface SpanKey {
  traceId: string;
  spanId: string;
}
export interface SpanVersion extends SpanKey {
  ingestedAtMs: number;
}

/** A collector's public Ed25519 key (SPKI PEM) as published in storage; keyId is checked against the key itself on use. */
export interface PublishedKey {
  keyId: string;
  publicKeyPem: string;
  publishedAtMs: number;
}

export interface FindingQuery {
  traceId?: string;
  category?: string;
  detector?: string;
  fromMs?: number;
  toMs?: number;
  limit: number;
  cursor?: string;
}
export interface AuditQuery {
  action?: string;
  actor?: string;
  outcome?: string;
  fromMs?: number;
  toMs?: number;
  limit: number;
  cursor?: string;
}
export interface AlertQuery {
  kind?: string;
  ruleId?: string;
  fromMs?: number;
  toMs?: number;
  limit: number;
  cursor?: string;
}

export interface SecurityAlertQuery {
  source?: string;
  severity?: string;
  category?: string;
  /** Alerts that name this trace, directly or through a response id the proxy had recorded when they arrived. */
  traceId?: string;
  signature?: string;
  /** On receivedAtMs. */
  fromMs?: number;
  toMs?: number;
  limit: number;
  cursor?: string;
}

/** A webhook signing secret as stored: `sealed` is the secret encrypted with the collectors' key (AES-256-GCM). */
export interface WebhookSecretRecord {
  secretId: string;
  workspaceId: string;
  sealed: string;
  createdAtMs: number;
  revokedAtMs: number; // 0 when active
}

export interface UsageQuery {
  groupBy: 'model' | 'actionName' | 'environment' | 'source';
  bucket: 'hour' | 'day';
  fromMs?: number; // on span start
  toMs?: number;
}

export interface ActivityQuery {
  bucket: 'hour' | 'day';
  fromMs?: number; // on span start (alerts: receive time), inclusive
  toMs?: number; // exclusive
}

export interface ActivityRow {
  bucketStart: string; // ISO 8601 UTC, start of the hour/day
  traces: number;
  spans: number;
  errorSpans: number;
  toolCalls: number;
  toolErrors: number;
  guardrailChecks: number;
  securityAlerts: number;
}

export interface UsageRow {
  bucketStart: string; // ISO 8601 UTC, start of the hour/day
  key: string; // the group value ('' when unset)
  requests: number;
  errors: number;
  errorRate: number; // errors / requests
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  costUsd: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  /**
   * Standing votes given in the bucket (their vote time), on traces of the group (the group value of the trace's
   * first model call, of its root span when it has none; '' while the trace is not stored).
   */
  feedbackUp: number;
  feedbackDown: number;
}

export type { FeedbackRecord, SecurityAlertRecord, SpanRecord, SpanKind, Source };
