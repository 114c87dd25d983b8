/**
 * Guardrail results → span records (pure): `mapGuardrails(normalized, link, ctx)`. Each result (normalized by
 * guardrails-schema.ts) is one span, kind `guardrail`, source `guardrails`:
 *
 * | field | from |
 * |---|---|
 * | traceId, parentSpanId | the link the route resolved: the given trace (and span), the proxy span of the given response or request id (its child), or a trace of their own (roots) |
 * | spanId | 16 hex of a hash of (trace, parent, stage, guardrail name, position in its stage): a replay lands on the same span |
 * | name | guardrailName |
 * | start, end | occurredAt, else the receive time (a result has no duration) |
 * | status | `error` when executionFailed (status message: errorMessage), else `completed` |
 * | prompt | checkedText (stored as a masked preview unless the workspace policy says: processors/guardrails.ts) |
 * | attributes | `guardrail.name`, `guardrail.stage`, `guardrail.tripwire_triggered`, `guardrail.execution_failed`, `guardrail.error`, `guardrail.media_type`, `guardrail.info` (info less the keys moved into fields), `guardrail.token_usage`, `guardrail.linked_by`, `guardrail.response_id`, `guardrail.request_id`, `guardrails.source`, `guardrails.sdk_version` |
 *
 * A result with token usage (an LLM-based check) also gets a child span of kind `llm` holding that usage (and its
 * model, when given): the check's model call, counted in usage and cost like any other.
 */
import { createHmac, hash } from 'node:crypto';
import { type Attributes, type AttrValue, emptySpan, MAX_TOKENS, msToNs, type SpanRecord } from '../core/record.ts';
import { GUARDRAIL_INFO } from '../processors/guardrails.ts';
import { cutMarked, truncateUtf8 } from '../protocols/otlp/normalized.ts';
import { isoToNs } from './agents-schema.ts';
import type { Envelope, NormalizedResult } from './guardrails-schema.ts';

export type LinkedBy = 'trace' | 'response' | 'request' | 'none';
export interface GuardrailLink {
  traceId: string;
  parentSpanId: string;
  linkedBy: LinkedBy;
}

export interface GuardrailsMapContext {
  workspaceId: string;
  receivedAtMs: number;
  limits: { maxStringBytes: number; maxAttributeValueBytes: number };
}

const digest = (...parts: string[]) => hash('sha256', JSON.stringify(parts), 'hex');

/**
 * The trace of results linked to nothing: the same for the same results, so that a replay lands on it. An HMAC
 * under a server secret (the id hash key), not a plain hash: the id is shown, and must not let a reader test guesses
 * of the checked text against it.
 */
export function ownTraceId(
  workspaceId: string,
  envelope: Envelope,
  results: readonly NormalizedResult[],
  key: Buffer,
): string {
  const content = JSON.stringify([workspaceId, envelope, results]);
  return createHmac('sha256', key).update(content).digest('hex').slice(0, 32);
}

/** The link given in the body (a trace id), or null when the route must look one up or make one. */
export function givenLink(envelope: Envelope): GuardrailLink | null {
  return envelope.traceId
    ? { traceId: envelope.traceId, parentSpanId: envelope.spanId ?? '', linkedBy: 'trace' }
    : null;
}

const tok = (v: unknown): number =>
  typeof v === 'number' && Number.isFinite(v) ? Math.min(Math.max(0, Math.round(v)), MAX_TOKENS) : 0;

export function mapGuardrails(
  envelope: Envelope,
  results: readonly NormalizedResult[],
  link: GuardrailLink,
  ctx: GuardrailsMapContext,
): SpanRecord[] {
  const at = (envelope.occurredAt && isoToNs(envelope.occurredAt)) || msToNs(ctx.receivedAtMs);
  const out: SpanRecord[] = [];
  for (const res of results) {
    const span = resultSpan(res, envelope, link, at, ctx);
    out.push(span);
    const usage = res.tokenUsage;
    if (usage) {
      const llm = checkCall(span, res, ctx);
      if (llm.totalTokens > 0) out.push(llm);
    }
  }
  return out;
}

function resultSpan(
  res: NormalizedResult,
  env: Envelope,
  link: GuardrailLink,
  atNs: string,
  ctx: GuardrailsMapContext,
): SpanRecord {
  const r = emptySpan(ctx.workspaceId, 'guardrails');
  r.traceId = link.traceId;
  r.parentSpanId = link.parentSpanId;
  r.spanId = digest(link.traceId, link.parentSpanId, res.stage, res.guardrailName, String(res.index)).slice(0, 16);
  r.name = res.guardrailName;
  r.kind = 'guardrail';
  r.startTimeNs = atNs;
  r.endTimeNs = atNs;
  r.ingestedAtMs = ctx.receivedAtMs;
  const a: Attributes = {
    'guardrail.name': res.guardrailName,
    'guardrail.stage': res.stage,
    'guardrail.tripwire_triggered': res.tripwireTriggered,
    'guardrail.execution_failed': res.executionFailed,
    'guardrail.linked_by': link.linkedBy,
  };
  const put = (k: string, v: unknown) => {
    if (v !== undefined && v !== null) a[k] = v as AttrValue;
  };
  if (res.executionFailed) {
    r.status = 'error';
    r.statusMessage = res.errorMessage ?? 'the guardrail failed to run';
  }
  put('guardrail.error', res.errorMessage);
  put('guardrail.media_type', res.mediaType);
  put(GUARDRAIL_INFO, res.info && limited(res.info, ctx.limits.maxStringBytes));
  put('guardrail.token_usage', res.tokenUsage);
  put('guardrail.model', res.model);
  put('guardrail.response_id', env.responseId);
  put('guardrail.request_id', env.requestId);
  put('guardrails.source', env.source);
  put('guardrails.sdk_version', env.sdkVersion);
  r.prompt = cutMarked(res.checkedText ?? '', ctx.limits.maxStringBytes, a, 'tracegate.prompt');
  r.attributes = a;
  return r;
}

/** The model call an LLM-based check made: its usage as a span of its own (kind llm), under the result's span. */
function checkCall(parent: SpanRecord, res: NormalizedResult, ctx: GuardrailsMapContext): SpanRecord {
  const u = res.tokenUsage ?? {};
  const r = emptySpan(ctx.workspaceId, 'guardrails');
  r.traceId = parent.traceId;
  r.parentSpanId = parent.spanId;
  r.spanId = digest(parent.spanId, 'llm').slice(0, 16);
  r.name = `${res.guardrailName} check`;
  r.kind = 'llm';
  r.model = res.model ?? '';
  r.startTimeNs = parent.startTimeNs;
  r.endTimeNs = parent.endTimeNs;
  r.ingestedAtMs = ctx.receivedAtMs;
  r.promptTokens = tok(u.prompt_tokens ?? u.input_tokens);
  r.completionTokens = tok(u.completion_tokens ?? u.output_tokens);
  r.totalTokens = tok(u.total_tokens) || Math.min(r.promptTokens + r.completionTokens, MAX_TOKENS);
  r.attributes = { 'guardrail.name': res.guardrailName, 'guardrail.stage': res.stage, 'gen_ai.operation.name': 'chat' };
  if (r.model) r.attributes['gen_ai.request.model'] = r.model;
  return r;
}

/** A copy of `v` with its strings cut to `max` UTF-8 bytes. */
function limited(v: Record<string, unknown>, max: number): AttrValue {
  const walk = (x: unknown): AttrValue => {
    if (typeof x === 'string') return x.length * 3 <= max ? x : truncateUtf8(x, max);
    if (Array.isArray(x)) return x.map(walk);
    if (typeof x === 'object' && x !== null) {
      const out: { [k: string]: AttrValue } = {};
      for (const k of Object.keys(x)) out[k] = walk((x as Record<string, unknown>)[k]);
      return out;
    }
    return x as AttrValue;
  };
  return walk(v);
}
