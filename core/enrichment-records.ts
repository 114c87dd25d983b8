// Records stored next to spans: those enrichment produces, and a source's own records other than spans (trace
// metadata). Each carries its workspace and a `recordType` tag so one spool and one writer carry them with the
// spans they describe.

import type { Severity } from './governance.ts';

export type { Severity };

/** A detector hit. `preview` is masked: the raw matched text is never stored. */
export interface FindingRecord {
  recordType: 'finding';
  workspaceId: string;
  traceId: string;
  spanId: string;
  detector: string; // pii | secret | injection
  rule: string; // stable rule id, e.g. pii.email
  category: string; // email, payment_card, api_key, prompt_injection, …
  severity: Severity;
  field: string; // prompt | response | attribute:<name>
  start: number; // UTF-16 offsets in the scanned text (before redaction)
  end: number;
  preview: string;
  score: number; // injection score in [0,1]; 1 for deterministic detectors
  action: string; // flag | redact | block — what the policy did about it
  createdAtMs: number;
}

/**
 * A span allowed with no finding and no reason gets no policy record: it carries the version of the policy that
 * allowed it in this attribute, and reads list it as an `allow` decision like a record (see storedPolicy). Most
 * spans are such, and a stored record each cost more server CPU than the rest of governance storage. tracegate.*
 * attribute names are the server's (mappers keep a client's as client.tracegate.*), so a client cannot forge one.
 */
export const CLEAN_POLICY_ATTRIBUTE = 'tracegate.policy_version';

/** The policy decision for one span at ingestion (or a proxy preflight). */
export interface PolicyRecord {
  recordType: 'policy';
  workspaceId: string;
  traceId: string;
  spanId: string;
  policyVersion: number;
  decision: 'allow' | 'flag' | 'redact' | 'block';
  reasons: string; // JSON array of { code, message, category?, rule? }
  createdAtMs: number;
}

/** Append-only, hash-chained per workspace: hash = sha256(prevHash + canonical JSON of the rest). */
export interface AuditRecord {
  recordType: 'audit';
  workspaceId: string; // '_system' for events with no workspace (e.g. unknown key)
  chainId: string; // one chain per workspace per server process start (see README)
  seq: number; // 1, 2, 3 … within the chain
  atMs: number;
  actor: string; // key id, 'cli', 'system'
  action: string; // ingest, auth.rejected, key.create, key.revoke, policy.update, settings.update, …
  route: string;
  outcome: string; // ok, partial, rejected, error, denied
  accepted: number;
  rejected: number;
  details: string; // JSON object
  prevHash: string;
  hash: string;
}

export interface AlertRecord {
  recordType: 'alert';
  workspaceId: string;
  alertId: string;
  ruleId: string;
  kind: string; // latency | cost | error_rate | finding | guardrail | security_alert
  severity: Severity;
  message: string;
  traceId: string; // the trace that tipped it, when there is one
  value: number;
  threshold: number;
  windowStartMs: number;
  atMs: number;
  delivered: string; // '' (no webhook), 'queued' (handed to the notifier), then 'sent' or 'failed' (a later version of the record)
}

/** Integrity of one trace's spans as stored in one batch, in a per-workspace hash chain. */
export interface VerificationRecord {
  recordType: 'verification';
  workspaceId: string;
  traceId: string;
  spanIds: string[];
  spanVersions: number[]; // ingestedAtMs of each covered span: a later replay supersedes, not tampers
  contentHash: string; // sha256 of RFC 8785 canonical JSON of the covered spans
  chainId: string;
  seq: number;
  prevHash: string;
  hash: string; // sha256(prevHash + contentHash + seq + traceId)
  createdAtMs: number;
}

/** An Ed25519 signature over a chain head: signs every verification record up to `seq`. */
export interface CheckpointRecord {
  recordType: 'checkpoint';
  workspaceId: string;
  chainId: string;
  seq: number;
  headHash: string;
  keyId: string;
  signature: string; // base64
  atMs: number;
}

/** What a vote names when it has no trace id of its own, resolved against the trace's spans when read. */
export const FEEDBACK_TARGETS = ['trace', 'span', 'response', 'request'] as const;
export type FeedbackTarget = (typeof FEEDBACK_TARGETS)[number];

/**
 * A thumbs-up/down vote (POST /api/ingest/feedback). `voteKey` is its identity within the workspace: `id:<id>`
 * (the sender's id), `user:<hash of target, name, user>` (one vote per user, the latest wins) or `vote:<hash of the
 * item>` (anonymous: each distinct vote counts, a replay collapses). The newest `receivedAtMs` of a key wins; a
 * retraction is a later version with `retracted` set.
 */
export interface FeedbackRecord {
  recordType: 'feedback';
  workspaceId: string;
  voteKey: string;
  /** The sender's id, or the key's hash part. */
  voteId: string;
  /** The trace id as sent (or from a traceparent); '' when the vote names only a span, response or request. */
  traceId: string;
  targetType: FeedbackTarget;
  /** The id of the target as sent (equal to traceId for a trace vote). */
  targetId: string;
  name: string;
  /** 'up' or 'down'; '' for a retraction. */
  value: '' | 'up' | 'down';
  retracted: boolean;
  comment: string;
  userId: string;
  source: string;
  /** JSON object, as text ('{}' when none). */
  metadata: string;
  /** When the vote was given (the sender's timestamp, else the receive time). */
  votedAtMs: number;
  receivedAtMs: number;
}

/** How a security alert's delivery was authenticated beyond the API key. */
export const ALERT_SIGNATURES = ['verified', 'unverified', 'unsigned'] as const;
export type AlertSignature = (typeof ALERT_SIGNATURES)[number];

/**
 * An external security alert (POST /api/ingest/webhooks): the body as received plus what was read from it.
 * `alertId` follows from the workspace and the body, so a redelivery (re-signed or not) collapses into one record.
 */
export interface SecurityAlertRecord {
  recordType: 'security_alert';
  workspaceId: string;
  alertId: string;
  source: string;
  severity: Severity;
  /** The sender's own word for it ('' when none). */
  rawSeverity: string;
  title: string;
  category: string;
  externalId: string;
  detectedAtMs: number;
  receivedAtMs: number;
  /** Correlation keys, first hit of each; traceId may come from a response id the proxy recorded. */
  traceId: string;
  spanId: string;
  requestId: string;
  responseId: string;
  sessionId: string;
  userId: string;
  signature: AlertSignature;
  /** The signing secret that verified it ('' unless verified). */
  secretId: string;
  /** JSON object of every hit per key: { trace_id: [{ from, value }], … }, as text. */
  correlation: string;
  /** The body as received (UTF-8 text). */
  body: string;
}

/**
 * What an agent runtime says of a whole trace (the OpenAI Agents SDK's `{object: "trace"}` item): sent when the trace
 * starts, with no times, before, after or without its spans; kept beside them, the newest per (workspace, trace).
 */
export interface TraceMetaRecord {
  recordType: 'trace_meta';
  workspaceId: string;
  traceId: string;
  workflowName: string;
  /** The conversation or session the trace belongs to ('' for none). */
  groupId: string;
  /** A JSON object as sent ('' for none). */
  metadata: string;
  /** The OpenAI-Organization and OpenAI-Project headers of the request that carried it ('' when absent). */
  organization: string;
  project: string;
  source: string;
  /** Server receive time: the version (the newest wins). */
  updatedAtMs: number;
}

export type EnrichmentRecord =
  | FindingRecord
  | PolicyRecord
  | AuditRecord
  | AlertRecord
  | VerificationRecord
  | CheckpointRecord
  | FeedbackRecord
  | SecurityAlertRecord
  | TraceMetaRecord;
export type EnrichmentType = EnrichmentRecord['recordType'];
