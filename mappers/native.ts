// Native payload → one span record (a native trace is a single-span trace).
import { hash, randomUUID } from 'node:crypto';
import {
  emptySpan,
  isTrainable,
  msToNs,
  type Attributes,
  type AttrValue,
  type SpanRecord,
  type Source,
} from '../core/record.ts';
import type { NativeTrace } from './native-schema.ts';

const KNOWN = new Set([
  'requestId',
  'actionName',
  'environment',
  'status',
  'model',
  'provider',
  'prompt',
  'response',
  'metrics',
  'parameters',
  'metadata',
]);
/** parameters.source values that name the record's source (the spec's local sources among them). */
const NATIVE_SOURCES: ReadonlySet<string> = new Set(['native', 'sdk', 'agent_lab', 'coach']);
const KNOWN_METRICS = new Set([
  'promptTokens',
  'completionTokens',
  'totalTokens',
  'latencyMs',
  'estimatedCostUsd',
  'finishReason',
]);

/** Deterministic span id so a replayed requestId lands on the same (traceId, spanId) and collapses. */
export function nativeSpanId(traceId: string): string {
  return hash('sha256', traceId, 'hex').slice(0, 16);
}

export function mapNative(t: NativeTrace, workspaceId: string, nowMs: number): SpanRecord {
  const params = t.parameters ?? {};
  const source: Source =
    params.source !== undefined && NATIVE_SOURCES.has(params.source) ? (params.source as Source) : 'native';
  const r = emptySpan(workspaceId, source);
  const metrics = t.metrics ?? {};
  r.traceId = t.requestId ?? randomUUID();
  r.spanId = nativeSpanId(r.traceId);
  r.requestId = t.requestId ?? '';
  r.name = t.actionName || 'trace';
  r.kind = 'llm';
  const latency = metrics.latencyMs ?? 0;
  r.endTimeNs = msToNs(nowMs);
  r.startTimeNs = msToNs(nowMs - latency);
  r.durationMs = latency;
  r.status = t.status;
  r.model = t.model ?? '';
  r.provider = t.provider ?? '';
  r.prompt = t.prompt ?? '';
  r.response = t.response ?? '';
  r.promptTokens = metrics.promptTokens ?? 0;
  r.completionTokens = metrics.completionTokens ?? 0;
  r.totalTokens = metrics.totalTokens ?? r.promptTokens + r.completionTokens;
  r.finishReason = metrics.finishReason ?? '';
  r.actionName = t.actionName ?? '';
  r.environment = t.environment ?? '';
  r.trainingPreferred = params.trainingPreferred === true;
  r.trainable = isTrainable(r);
  r.ingestedAtMs = nowMs;

  const attrs: Attributes = {};
  // Nothing the client sent is thrown away: parameters, metadata and unknown fields become attributes.
  // `tracegate.*` is the server's namespace: a client field there is kept as `client.tracegate.*`.
  if (t.parameters) attrs['parameters'] = t.parameters as AttrValue;
  if (t.metadata) attrs['metadata'] = t.metadata as AttrValue;
  for (const [k, v] of Object.entries(metrics)) if (!KNOWN_METRICS.has(k)) attrs[`metrics.${k}`] = v as AttrValue;
  for (const [k, v] of Object.entries(t))
    if (!KNOWN.has(k)) attrs[k.startsWith('tracegate.') ? `client.${k}` : k] = v as AttrValue;
  if (metrics.estimatedCostUsd !== undefined) {
    r.costUsd = metrics.estimatedCostUsd;
    attrs['tracegate.cost_source'] = 'client';
  }
  r.attributes = attrs;
  return r;
}
