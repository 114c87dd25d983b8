// What both OTLP decoders (decode-protobuf.ts, decode-json.ts) produce, the limits they enforce, and the
// helpers they share. The normalized form and the limits are described in decode.ts, the entry point.
import { hash } from 'node:crypto';
import { TracegateError } from '../../core/errors.ts';
import { LATEST_STORABLE_NS, type Attributes, type AttrValue } from '../../core/record.ts';
import type { Config } from '../../config/index.ts';
import { cutOutsideValues } from '../../processors/governance/cut.ts';

export interface OtlpLimits {
  maxDepth: number;
  maxAttributes: number;
  maxEvents: number;
  maxSpansPerRequest: number;
  maxAttributeValueBytes: number;
  maxStringBytes: number;
  /**
   * Longest attribute key (also kvlist keys) in UTF-8 bytes; longer keys are cut and marked like long
   * values. Default MAX_ATTRIBUTE_KEY_BYTES; its own setting (TRACEGATE_MAX_ATTRIBUTE_KEY_BYTES): tying it to
   * maxAttributeValueBytes would cut ordinary keys when values are kept small.
   */
  maxKeyBytes?: number;
  /**
   * Cap on decoded messages per request (spans + events + links + key-values + any-values;
   * JSON: twice as many objects). Default maxSpansPerRequest × NODES_PER_SPAN. Bounds the
   * worst-case decode time/memory of a body full of tiny messages.
   */
  maxNodes?: number;
}

export function otlpLimits(
  c: Pick<
    Config,
    | 'MAX_DEPTH'
    | 'MAX_ATTRIBUTES'
    | 'MAX_EVENTS'
    | 'MAX_SPANS_PER_REQUEST'
    | 'MAX_ATTRIBUTE_VALUE_BYTES'
    | 'MAX_STRING_BYTES'
    | 'MAX_ATTRIBUTE_KEY_BYTES'
  >,
): OtlpLimits {
  return {
    maxDepth: c.MAX_DEPTH,
    maxAttributes: c.MAX_ATTRIBUTES,
    maxEvents: c.MAX_EVENTS,
    maxSpansPerRequest: c.MAX_SPANS_PER_REQUEST,
    maxAttributeValueBytes: c.MAX_ATTRIBUTE_VALUE_BYTES,
    maxStringBytes: c.MAX_STRING_BYTES,
    maxKeyBytes: c.MAX_ATTRIBUTE_KEY_BYTES,
  };
}

/**
 * Whole-request failure: the route answers 400 with a google.rpc.Status carrying `message` and, when
 * `field` is known, a google.rpc.BadRequest field violation (`field` is a path into the request, e.g.
 * `resourceSpans[0].scopeSpans[0].spans[3].attributes["x"]`).
 */
export class OtlpDecodeError extends TracegateError {
  /** Where in the request the problem is; null when unknown or request-wide. */
  field: string | null = null;
  /** Request-wide limits (span and message counts) have no single location. */
  readonly requestWide: boolean;
  constructor(message: string, opts: { requestWide?: boolean } = {}) {
    super('invalid', 'invalid_request', message);
    this.name = 'OtlpDecodeError';
    this.requestWide = opts.requestWide === true;
  }

  /** Prefix the location with an enclosing path segment (`spans[3]`, `resource`, `attributes["k"]`). */
  within(segment: string): this {
    if (!this.requestWide) this.field = joinPath(segment, this.field);
    return this;
  }
}

function joinPath(segment: string, rest: string | null): string {
  return rest === null ? segment : rest.charCodeAt(0) === 91 /* [ */ ? segment + rest : `${segment}.${rest}`;
}

export interface NormalizedEvent {
  name: string;
  timeNs: string;
  attributes: Attributes;
  droppedAttributesCount: number;
}

export interface NormalizedLink {
  traceId: string;
  spanId: string;
  traceState: string;
  flags: number;
  attributes: Attributes;
  droppedAttributesCount: number;
}

export interface NormalizedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState: string;
  flags: number;
  name: string;
  /** SpanKind enum value: 0 UNSPECIFIED, 1 INTERNAL, 2 SERVER, 3 CLIENT, 4 PRODUCER, 5 CONSUMER. */
  kind: number;
  startTimeNs: string;
  endTimeNs: string;
  attributes: Attributes;
  droppedAttributesCount: number;
  events: NormalizedEvent[];
  droppedEventsCount: number;
  links: NormalizedLink[];
  droppedLinksCount: number;
  /** 0 UNSET, 1 OK, 2 ERROR (any other value is normalized to 0). */
  statusCode: number;
  statusMessage: string;
  /** Set on an event span made from a log record (protocols/otlp/logs.ts): its body, not stored twice. */
  log?: { body: AttrValue | undefined };
}

export interface NormalizedScope {
  name: string;
  version: string;
  attributes: Attributes;
  droppedAttributesCount: number;
}

export interface NormalizedScopeSpans {
  scope: NormalizedScope;
  schemaUrl: string;
  spans: NormalizedSpan[];
}

export interface NormalizedResourceSpans {
  resource: { attributes: Attributes; droppedAttributesCount: number };
  schemaUrl: string;
  scopeSpans: NormalizedScopeSpans[];
}

export interface NormalizedRequest {
  resourceSpans: NormalizedResourceSpans[];
  /** Spans kept (valid). */
  spanCount: number;
  /** Spans dropped by per-span validation. */
  rejectedSpans: number;
  /** Human-readable reason(s) for the rejected spans; '' when none. */
  errorMessage: string;
}

export type OtlpEncoding = 'protobuf' | 'json';

/** Attribute keys whose string values may be as long as maxStringBytes (prompt/response carriers). */
export const CONTENT_KEYS: ReadonlySet<string> = new Set([
  'gen_ai.input.messages',
  'gen_ai.output.messages',
  'gen_ai.system_instructions',
  'gen_ai.tool.definitions',
  'gen_ai.tool.call.arguments',
  'gen_ai.tool.call.result',
  'gen_ai.prompt',
  'gen_ai.completion',
  'input.value',
  'output.value',
  'traceloop.entity.input',
  'traceloop.entity.output',
  'ai.prompt',
  'ai.prompt.messages',
  'ai.response.text',
  'ai.response.object',
  'ai.response.toolCalls',
  'ai.value',
  'ai.values',
  'ai.toolCall.args',
  'ai.toolCall.result',
  'ai.toolCall.input',
  'ai.toolCall.output',
  'content',
  'message',
  'body',
  'gen_ai.event.content',
  'tool.parameters',
  'llm.invocation_parameters',
  'otel.log.body',
]);

/** Flattened message content: OpenInference `llm.{input,output}_messages.N.message.content` (and its
 * `message.contents.M.message_content.text` parts), OpenLLMetry `gen_ai.{prompt,completion}.N.content`. */
export const FLAT_CONTENT =
  /^(?:llm\.(?:input|output)_messages\.\d+\.message\.(?:content|contents\.\d+\.message_content\.text|tool_calls\.\d+\.tool_call\.function\.arguments)|gen_ai\.(?:prompt|completion)\.\d+\.(?:content|tool_calls\.\d+\.arguments))$/;

function isContentKey(key: string): boolean {
  return CONTENT_KEYS.has(key) || ((key.startsWith('llm.') || key.startsWith('gen_ai.')) && FLAT_CONTENT.test(key));
}

export const TRUNCATED_ATTR = 'tracegate.truncated';

/** Default cap on attribute key length (UTF-8 bytes); see OtlpLimits.maxKeyBytes. */
export const MAX_ATTRIBUTE_KEY_BYTES = 1024;

/** `tracegate.*` attribute names are the server's; a client's `tracegate.x` is kept as `client.tracegate.x`. */
const SERVER_NS = 'tracegate.';
const CLIENT_NS = 'client.';

/** Decoded messages allowed per span by default (see OtlpLimits.maxNodes). */
export const NODES_PER_SPAN = 64;

export function maxNodesOf(limits: OtlpLimits): number {
  return limits.maxNodes ?? limits.maxSpansPerRequest * NODES_PER_SPAN;
}

export class SpanReject {
  readonly reason: string;
  /** Location (see OtlpDecodeError.field), kept for when a resource/scope problem fails the request. */
  field: string | null = null;
  constructor(reason: string) {
    this.reason = reason;
  }
  within(segment: string): this {
    this.field = joinPath(segment, this.field);
    return this;
  }
}

/** Adds `segment` to the location of a decoder error on its way out (other errors pass unchanged). */
export function located(err: unknown, segment: string): unknown {
  if (err instanceof OtlpDecodeError || err instanceof SpanReject) err.within(segment);
  return err;
}

/** A readable path segment for attribute `key` (long keys abbreviated). */
export function attrSegment(key: unknown, index: number): string {
  if (typeof key !== 'string') return `attributes[${index}]`;
  return `attributes[${JSON.stringify(key.length > 64 ? key.slice(0, 64) + '…' : key)}]`;
}

/** `__proto__` is the one key whose plain-object assignment touches a prototype; `constructor` is a harmless own property. */
const HOSTILE_KEY = '__proto__';
const MAX_REASONS = 5;

/** Per-attribute-set state: limits and the list of truncated keys. */
export class Ctx {
  readonly limits: OtlpLimits;
  readonly maxKeyBytes: number;
  truncated: string[] | null = null;
  /** Log records seen so far in the request (logs.ts): their order, where timestamps tie. */
  logIndex = 0;
  constructor(limits: OtlpLimits) {
    this.limits = limits;
    this.maxKeyBytes = limits.maxKeyBytes ?? MAX_ATTRIBUTE_KEY_BYTES;
  }
}

function checkKey(key: string): void {
  if (key === HOSTILE_KEY) {
    throw new OtlpDecodeError(`attribute key "${key}" is not allowed`);
  }
}

/**
 * A top-level attribute key as stored: `__proto__` refused, a client's `tracegate.x` renamed to
 * `client.tracegate.x` (the server's namespace), then cut to maxKeyBytes and, if cut, listed (as cut)
 * in `tracegate.truncated`.
 */
export function attrKey(key: string, ctx: Ctx): string {
  checkKey(key);
  if (key.charCodeAt(0) === 116 /* t */ && key.startsWith(SERVER_NS)) key = CLIENT_NS + key;
  const max = ctx.maxKeyBytes;
  if (key.length * 3 > max && Buffer.byteLength(key, 'utf8') > max) {
    key = cutKey(key, max);
    markTruncated(ctx, key);
  }
  return key;
}

/**
 * A key cut to max bytes ends in `~` and 8 hex digits of the whole key's SHA-256: two long keys sharing their
 * first max bytes stay two keys instead of one overwriting the other.
 */
function cutKey(key: string, max: number): string {
  return `${truncateUtf8(key, max - 9)}~${hash('sha256', key, 'hex').slice(0, 8)}`;
}

/** A kvlist key inside attribute `topKey`: `__proto__` refused; cut to maxKeyBytes, marking `topKey`. */
export function nestedKey(key: string, ctx: Ctx, topKey: string): string {
  checkKey(key);
  const max = ctx.maxKeyBytes;
  if (key.length * 3 > max && Buffer.byteLength(key, 'utf8') > max) {
    markTruncated(ctx, topKey);
    return cutKey(key, max);
  }
  return key;
}

export function tooDeep(limits: OtlpLimits): OtlpDecodeError {
  return new OtlpDecodeError(`attribute value nesting exceeds the limit of ${limits.maxDepth}`);
}

/**
 * Cut a string to at most maxBytes of UTF-8, never inside a character, and never inside a PII or secret value
 * (the part left would escape redaction: see cutOutsideValues).
 */
export function truncateUtf8(s: string, maxBytes: number): string {
  const b = Buffer.from(s, 'utf8');
  if (b.length <= maxBytes) return s;
  let end = maxBytes;
  while (end > 0 && (b[end]! & 0xc0) === 0x80) end--;
  const kept = b.toString('utf8', 0, end);
  return kept.slice(0, cutOutsideValues(s, kept.length));
}

/** `s` cut to `max` UTF-8 bytes (truncateUtf8), with `marker` added to `attrs`' tracegate.truncated when it was. */
export function cutMarked(s: string, max: number, attrs: Attributes, marker: string): string {
  if (s.length * 3 <= max || Buffer.byteLength(s, 'utf8') <= max) return s;
  const prev = attrs[TRUNCATED_ATTR];
  attrs[TRUNCATED_ATTR] = Array.isArray(prev) ? [...prev, marker] : [marker];
  return truncateUtf8(s, max);
}

/** Apply the string limit for attribute `topKey`; record truncation. */
export function limitStr(s: string, ctx: Ctx, topKey: string): string {
  const small = ctx.limits.maxAttributeValueBytes;
  if (s.length * 3 <= small) return s; // cannot exceed, whatever the characters
  const max = isContentKey(topKey) ? ctx.limits.maxStringBytes : small;
  if (s.length * 3 <= max || Buffer.byteLength(s, 'utf8') <= max) return s;
  markTruncated(ctx, topKey);
  return truncateUtf8(s, max);
}

function markTruncated(ctx: Ctx, key: string): void {
  if (ctx.truncated === null) ctx.truncated = [key];
  else if (!ctx.truncated.includes(key)) ctx.truncated.push(key);
}

export function limitPlain(s: string, limits: OtlpLimits, marker: string, ctx: Ctx): string {
  if (s.length * 3 <= limits.maxAttributeValueBytes || Buffer.byteLength(s, 'utf8') <= limits.maxAttributeValueBytes)
    return s;
  markTruncated(ctx, marker);
  return truncateUtf8(s, limits.maxAttributeValueBytes);
}

export function finishAttrs(attrs: Attributes, ctx: Ctx): Attributes {
  if (ctx.truncated !== null) {
    attrs[TRUNCATED_ATTR] = ctx.truncated;
    ctx.truncated = null;
  }
  return attrs;
}

export const ZERO_TRACE = '00000000000000000000000000000000';
export const ZERO_SPAN = '0000000000000000';

/** Decimal string compare for non-negative integers without leading zeros. */
function decLess(a: string, b: string): boolean {
  return a.length !== b.length ? a.length < b.length : a < b;
}

/** Unsigned 64-bit (lo, hi as 32-bit words) → exact decimal string, without BigInt. */
export function u64ToDecimal(lo: number, hi: number): string {
  lo >>>= 0;
  hi >>>= 0;
  if (hi < 0x200000) return String(hi * 4294967296 + lo);
  // hi·2^32 + lo = hi·4294·10^6 + (hi·967296 + lo); the bracket stays < 2^53.
  const low = hi * 967296 + lo;
  const top = hi * 4294 + Math.floor(low / 1e6);
  const rem = low % 1e6;
  return String(top) + String(rem).padStart(6, '0');
}

function rejectMessage(total: number, reasons: string[], noun: string): string {
  if (total === 0) return '';
  const more = total > reasons.length ? ` (and ${total - reasons.length} more)` : '';
  return `${total} ${noun}(s) rejected: ${reasons.join('; ')}${more}`;
}

/** Span bookkeeping both decoders share: the per-request span limit, kept and rejected counts, the first reasons. */
export class SpanTally {
  kept = 0;
  rejected = 0;
  private index = 0;
  private readonly reasons: string[] = [];

  private readonly noun: string;
  constructor(total: number, limits: OtlpLimits, noun = 'span') {
    this.noun = noun;
    if (total > limits.maxSpansPerRequest) {
      throw new OtlpDecodeError(`request has ${total} ${noun}s; the limit is ${limits.maxSpansPerRequest}`);
    }
  }

  keep(): void {
    this.kept++;
    this.index++;
  }

  /** A span rejected on its own (`hint` names its id when known); what it marked as truncated is dropped with it. */
  reject(ctx: Ctx, hint: string, reason: string): void {
    ctx.truncated = null;
    this.rejected++;
    if (this.reasons.length < MAX_REASONS) this.reasons.push(`${this.noun} #${this.index}${hint}: ${reason}`);
    this.index++;
  }

  get errorMessage(): string {
    return rejectMessage(this.rejected, this.reasons, this.noun);
  }
}

// ClickHouse buckets by DateTime (UInt32 seconds): a later time would wrap around to 1970 in the rollups.
const LATEST_NS = LATEST_STORABLE_NS.toString();

export function checkSpanTimes(start: string, end: string, endField = 'endTimeUnixNano'): void {
  if (start === '0') throw new SpanReject('missing startTimeUnixNano');
  if (decLess(end, start)) throw new SpanReject('endTimeUnixNano is before startTimeUnixNano');
  if (decLess(LATEST_NS, end))
    throw new SpanReject(`${endField} is after 2106-02-07T06:28:15Z, the latest time storage can bucket`);
}

export function idHint(id: unknown): string {
  if (id instanceof Uint8Array && id.length > 0 && id.length <= 16) return ` (spanId ${toHex(id)})`;
  if (typeof id === 'string' && id.length > 0 && id.length <= 32) return ` (spanId ${id})`;
  return '';
}

export function toHex(b: Uint8Array): string {
  return (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)).hexSlice(0, b.length);
}

/** The first `max` items (all of them when within the limit). */
export function cap<T>(items: T[], max: number): T[] {
  return items.length > max ? items.slice(0, max) : items;
}

/** How many items `cap` leaves out. */
export function over(items: unknown[], max: number): number {
  return items.length > max ? items.length - max : 0;
}

export const has = Object.prototype.hasOwnProperty;

export function finiteOrString(d: number): number | string {
  return Number.isFinite(d) ? d : String(d);
}
