// How spans are read back from ClickHouse: the columns a read selects and their decoding into a SpanRecord. The
// spans table and training_calls (clickhouse-migrations.ts v16) hold the same columns, so both read this way.
import type { SpanKind, SpanRecord, Source } from '../core/record.ts';
import { decodeAttrs } from './codec.ts';

/** Span row as read back: 64-bit integers arrive as JSON strings. */
export interface SpanReadRow {
  workspace_id: string;
  trace_id: string;
  span_id: string;
  parent_span_id: string;
  name: string;
  kind: string;
  source: string;
  start_ns: string;
  end_ns: string;
  duration_ms: number;
  status: string;
  status_message: string;
  model: string;
  provider: string;
  prompt: string;
  response: string;
  prompt_tokens: string;
  completion_tokens: string;
  total_tokens: string;
  cost_usd: number;
  finish_reason: string;
  action_name: string;
  environment: string;
  request_id: string;
  training_preferred: number;
  trainable: number;
  attr_keys: string[];
  attr_values: string[];
  attr_types: string[];
  res_keys: string[];
  res_values: string[];
  res_types: string[];
  events_json: string;
  ingested_at_ms: string;
}

export const SPAN_COLUMNS = `workspace_id, trace_id, span_id, parent_span_id, name, kind, source,
  toString(start_ns) AS start_ns, toString(end_ns) AS end_ns, duration_ms,
  status, status_message, model, provider, prompt, response,
  prompt_tokens, completion_tokens, total_tokens, cost_usd,
  finish_reason, action_name, environment, request_id, training_preferred, trainable,
  attr_keys, attr_values, attr_types, res_keys, res_values, res_types, events_json,
  toString(ingested_at_ms) AS ingested_at_ms`;

/** What a part's byte budget counts (SpanPage.maxBytes): the bytes of a span's text as stored. */
export const STORED_BYTES = `length(name) + length(status_message) + length(model) + length(provider) + length(prompt) + length(response)
  + length(events_json) + arraySum(arrayMap(x -> length(x), attr_keys)) + arraySum(arrayMap(x -> length(x), attr_values))
  + arraySum(arrayMap(x -> length(x), res_keys)) + arraySum(arrayMap(x -> length(x), res_values))`;

/** A read row as the record it stores. */
export function fromReadRow(r: SpanReadRow): SpanRecord {
  return {
    workspaceId: r.workspace_id,
    traceId: r.trace_id,
    spanId: r.span_id,
    parentSpanId: r.parent_span_id,
    name: r.name,
    kind: r.kind as SpanKind,
    source: r.source as Source,
    startTimeNs: r.start_ns,
    endTimeNs: r.end_ns,
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
    trainingPreferred: r.training_preferred === 1,
    trainable: r.trainable === 1,
    attributes: decodeAttrs(r.attr_keys, r.attr_values, r.attr_types),
    resourceAttributes: decodeAttrs(r.res_keys, r.res_values, r.res_types),
    events: JSON.parse(r.events_json) as SpanRecord['events'],
    ingestedAtMs: Number(r.ingested_at_ms),
  };
}
