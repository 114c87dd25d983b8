// The wire shapes: a native trace for POST /api/traces, a vote for /api/ingest/feedback, a tool call for
// /api/ingest/tool-calls. Pure: ids and times come in from the caller.
import { promptText } from './render.ts';

type Json = Record<string, unknown>;

export interface TraceMetrics {
  promptTokens?: number;
  completionTokens?: number;
  totalTokens?: number;
  latencyMs?: number;
  estimatedCostUsd?: number;
  finishReason?: string;
  [key: string]: unknown;
}

/** The options form of `trace()`: the native trace's fields. */
export interface TraceOptions {
  model?: string;
  /** The prompt: text, or a list of chat messages (rendered as `role: text` blocks). */
  prompt?: unknown;
  response?: string;
  metrics?: TraceMetrics;
  actionName?: string;
  environment?: string;
  /** Free-form; `source` defaults to `sdk`, `trainingPreferred: true` marks a curated pick. */
  parameters?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  /** The trace's id (printable ASCII, at most 256). A new 32-hex id when absent; re-sending the same id replaces. */
  requestId?: string;
  /** Default `completed`. */
  status?: string;
  /** e.g. `openai`: helps the server price the call. */
  provider?: string;
}

/** What the OpenAI wrapper adds: fields the server keeps as attributes (`gen_ai.response.id`…). */
export interface TraceInput extends TraceOptions {
  requestId: string;
  attributes?: Record<string, unknown>;
}

export const isPlainObject = (v: unknown): v is Json =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);

/** The spec's call, `trace(model, input, metadata)`: a `response` or `metrics` in the metadata fill those fields. */
export function fromSpecCall(model: unknown, input: unknown, metadata: unknown): TraceOptions {
  const t: TraceOptions = { prompt: input };
  if (model !== undefined && model !== null) t.model = String(model);
  if (isPlainObject(metadata)) {
    const { response, metrics, ...rest } = metadata;
    if (response !== undefined && response !== null)
      t.response = typeof response === 'string' ? response : json(response);
    if (isPlainObject(metrics)) t.metrics = metrics as TraceMetrics;
    if (Object.keys(rest).length) t.metadata = rest;
  }
  return t;
}

function json(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/** The native payload. Defaults (from the client) fill what the trace leaves out. */
export function tracePayload(t: TraceInput, defaults: { actionName?: string; environment?: string }): Json {
  const body: Json = {
    requestId: t.requestId,
    actionName: t.actionName ?? defaults.actionName,
    environment: t.environment ?? defaults.environment,
    status: t.status,
    model: t.model,
    provider: t.provider,
    prompt: promptText(t.prompt),
    response: t.response,
    metrics: t.metrics,
    parameters: { source: 'sdk', ...t.parameters },
    metadata: t.metadata,
  };
  // Extra fields are stored as attributes; the native fields above win over a clash.
  return { ...t.attributes, ...dropUndefined(body) };
}

function dropUndefined(o: Json): Json {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return o;
}

export type Timestamp = Date | string | number;

/** A time on the wire: ISO 8601. Numbers are epoch milliseconds; strings are sent as given. */
export function isoTime(v: Timestamp | undefined): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  const d = typeof v === 'number' ? new Date(v) : v;
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

export type FeedbackValue = 'up' | 'down' | boolean | 1 | 0 | -1 | null;
const VOTE_VALUES: ReadonlySet<unknown> = new Set(['up', 'down', true, false, 1, 0, -1, null]);

export interface FeedbackInput {
  /** What the vote is about: one of these. A trace id from `trace()` or `traceIdOf()` is the usual one. */
  traceId?: string;
  spanId?: string;
  /** A provider response id (`resp_…`) the proxy recorded. */
  responseId?: string;
  requestId?: string;
  /** `up`/`down`, `true`/`false`, `1`/`0`/`-1`; `null` retracts the vote. */
  value: FeedbackValue;
  /** Default `user_feedback` (server side). */
  name?: string;
  comment?: string;
  /** The end user who voted: one standing vote per (target, name, user). */
  userId?: string;
  source?: string;
  metadata?: Record<string, unknown>;
  /** When the vote was given; default: when `feedback()` was called. */
  timestamp?: Timestamp;
  /** Idempotency key: a vote with the same id replaces the earlier one. */
  id?: string;
}

/**
 * A vote on the wire, or why it cannot be one. Without a user, each vote counts on the server: the SDK then gives it
 * an id so that a retried batch does not count it twice. With a user, the server keeps one vote per user, and an id
 * would make each change of mind a vote of its own. A retraction (null) names the vote by its id or user.
 */
export function feedbackPayload(f: FeedbackInput, ids: { newId: () => string; nowMs: number }): Json | string {
  if (!isPlainObject(f)) return 'feedback() takes an object';
  if (!f.traceId && !f.spanId && !f.responseId && !f.requestId)
    return 'feedback needs a target: traceId, spanId, responseId or requestId';
  if (!('value' in f) || !VOTE_VALUES.has(f.value))
    return `feedback value must be up, down, true, false, 1, 0, -1 or null (to retract), not ${json(f.value)}`;
  if (f.value === null && !f.id && !f.userId) return 'null retracts a vote, which needs its id or userId to name it';
  return dropUndefined({
    id: f.id ?? (f.userId || f.value === null ? undefined : ids.newId()),
    trace_id: f.traceId,
    span_id: f.spanId,
    response_id: f.responseId,
    request_id: f.requestId,
    value: f.value,
    name: f.name,
    comment: f.comment,
    user_id: f.userId,
    source: f.source,
    metadata: f.metadata,
    timestamp: isoTime(f.timestamp) ?? new Date(ids.nowMs).toISOString(),
  });
}

export interface ToolCallError {
  type?: string;
  message?: string;
  data?: unknown;
}

export interface ToolCallInput {
  name: string;
  /** The model's tool-call id (`call_…`). */
  id?: string;
  /** function | extension | datastore | mcp */
  type?: string;
  description?: string;
  /** An object, or a JSON string. */
  arguments?: unknown;
  result?: unknown;
  /** `{ type, message, data }`, or an `Error` (its name and message). */
  error?: ToolCallError | Error;
  /** ok | error (derived by the server when absent). */
  status?: string;
  startedAt?: Timestamp;
  endedAt?: Timestamp;
  durationMs?: number;
  /** The trace to add the call to; a W3C `traceparent` or a `responseId` instead also link it. */
  traceId?: string;
  traceparent?: string;
  parentSpanId?: string;
  /** The call's span id; a new one when absent (a retried batch then lands on the same span). */
  spanId?: string;
  responseId?: string;
  sessionId?: string;
  userId?: string;
  metadata?: Record<string, unknown>;
}

function toolError(e: ToolCallError | Error | undefined): Json | undefined {
  if (e === undefined || e === null) return undefined;
  if (e instanceof Error) return { type: e.name, message: e.message };
  return isPlainObject(e) ? dropUndefined({ type: e.type, message: e.message, data: e.data }) : undefined;
}

/** A tool call on the wire with the ids it will be stored under, or why it cannot be one. */
export function toolCallPayload(
  t: ToolCallInput,
  ids: { newTraceId: () => string; newSpanId: () => string },
): { body: Json; traceId: string | undefined; spanId: string } | string {
  if (!isPlainObject(t)) return 'toolCall() takes an object';
  if (typeof t.name !== 'string' || !t.name) return 'a tool call needs a name';
  const spanId = t.spanId ?? ids.newSpanId();
  // A call linked to nothing starts a trace of its own: its id is chosen here so a retry lands in the same one.
  const traceId = t.traceId ?? (t.traceparent || t.responseId ? undefined : ids.newTraceId());
  const body = dropUndefined({
    name: t.name,
    id: t.id,
    type: t.type,
    description: t.description,
    arguments: t.arguments,
    result: t.result,
    error: toolError(t.error),
    status: t.status,
    started_at: isoTime(t.startedAt),
    ended_at: isoTime(t.endedAt),
    duration_ms: t.durationMs,
    trace_id: traceId,
    traceparent: t.traceparent,
    parent_span_id: t.parentSpanId,
    span_id: spanId,
    response_id: t.responseId,
    session_id: t.sessionId,
    user_id: t.userId,
    metadata: t.metadata,
  });
  return { body, traceId, spanId };
}
