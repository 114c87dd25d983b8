import type { EnrichmentRecord } from './enrichment-records.ts';

// The one record model every source maps into. Mappers produce SpanRecords;
// processors enrich them; the spool and storage persist them unchanged.

export const SPAN_KINDS = ['llm', 'agent', 'tool', 'guardrail', 'chain', 'retrieval', 'embedding', 'other'] as const;
export type SpanKind = (typeof SPAN_KINDS)[number];
/**
 * Model calls: the spans whose usage (tokens, cost) trace roll-ups, analytics and alert windows add up. Agent and
 * chain spans repeat their children's usage and are not counted.
 */
export const USAGE_KINDS: ReadonlySet<string> = new Set<SpanKind>(['llm', 'embedding']);

export const SOURCES = [
  'native',
  'otlp',
  'agents',
  'guardrails',
  'tool_call',
  'proxy',
  'agent_lab',
  'coach',
  'sdk',
] as const;
export type Source = (typeof SOURCES)[number];

/** An attribute value as a client sent it (OTLP AnyValue, or JSON). */
export type AttrValue = string | number | boolean | null | AttrValue[] | { [key: string]: AttrValue };
export type Attributes = Record<string, AttrValue>;

export interface SpanEvent {
  name: string;
  timeNs: string; // decimal nanoseconds since the epoch
  attributes: Attributes;
}

export interface SpanRecord {
  workspaceId: string;
  traceId: string;
  spanId: string;
  parentSpanId: string; // '' for a root span
  name: string;
  kind: SpanKind;
  source: Source;
  startTimeNs: string; // decimal nanoseconds since the epoch (exceeds 2^53, so a string)
  endTimeNs: string;
  durationMs: number;
  status: string; // completed, error, blocked, cancelled, … (free text; `completed` is the usual)
  statusMessage: string;
  model: string;
  provider: string;
  prompt: string;
  response: string;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  costUsd: number;
  finishReason: string;
  actionName: string;
  environment: string;
  requestId: string;
  trainingPreferred: boolean;
  /** completed with both prompt and response (spec: States). */
  trainable: boolean;
  attributes: Attributes;
  resourceAttributes: Attributes;
  events: SpanEvent[];
  /** Server receive time in ms; also the version that makes a replayed record win. */
  ingestedAtMs: number;
}

/**
 * A record with every field at its empty value, for mappers to fill in. The fields are in JCS (sorted) order, so
 * the verification hash serializes a record without rebuilding it (see processors/canonical.ts).
 */
export function emptySpan(workspaceId: string, source: Source): SpanRecord {
  return {
    actionName: '',
    attributes: {},
    completionTokens: 0,
    costUsd: 0,
    durationMs: 0,
    endTimeNs: '0',
    environment: '',
    events: [],
    finishReason: '',
    ingestedAtMs: 0,
    kind: 'other',
    model: '',
    name: '',
    parentSpanId: '',
    prompt: '',
    promptTokens: 0,
    provider: '',
    requestId: '',
    resourceAttributes: {},
    response: '',
    source,
    spanId: '',
    startTimeNs: '0',
    status: 'completed',
    statusMessage: '',
    totalTokens: 0,
    traceId: '',
    trainable: false,
    trainingPreferred: false,
    workspaceId,
  };
}

export function isTrainable(r: Pick<SpanRecord, 'status' | 'prompt' | 'response'>): boolean {
  return r.status === 'completed' && r.prompt.length > 0 && r.response.length > 0;
}

/** The latest time storage can hold: ClickHouse buckets by 32-bit DateTime (2106-02-07T06:28:15Z). */
export const LATEST_STORABLE_NS = 4_294_967_295_000_000_000n;

/**
 * Most tokens one span may count (10^12, far beyond any model call): sums over millions of spans then stay
 * within ClickHouse's UInt64 instead of wrapping around.
 */
export const MAX_TOKENS = 1_000_000_000_000;

/** Most USD one span may cost, on every route: float sums and their corrections stay meaningful below it. */
export const MAX_COST_USD = 1e9;

/** Milliseconds (possibly fractional) → decimal nanosecond string, without float loss for whole ms. */

export function msToNs(ms: number): string {
  const whole = Math.floor(ms);
  const frac = Math.round((ms - whole) * 1e6);
  return (BigInt(whole) * 1_000_000n + BigInt(frac)).toString();
}

export function nsDiffMs(startNs: string, endNs: string): number {
  const d = BigInt(endNs) - BigInt(startNs);
  return d <= 0n ? 0 : Number(d) / 1e6;
}

/** What the spool and writer carry: spans, and the enrichment records produced with them. */
export type StoredRecord = SpanRecord | EnrichmentRecord;

export function isEnrichment(r: StoredRecord): r is EnrichmentRecord {
  return (r as EnrichmentRecord).recordType !== undefined;
}
