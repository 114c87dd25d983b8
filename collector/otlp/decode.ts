// OTLP/HTTP trace request decoding: protobuf (protobufjs + our own schema) and
// OTLP/JSON both land in ONE normalized structure, `NormalizedRequest`.
//
// Normalized form
//   - ids: lowercase hex ('' when absent; an all-zero parentSpanId is '' = root)
//   - times: decimal nanosecond strings (fixed64 exceeds 2^53)
//   - attributes: plain `Attributes` objects:
//       stringValue → string, boolValue → boolean, doubleValue → number
//       (NaN/±Infinity → the strings "NaN", "Infinity", "-Infinity", as JSON cannot hold them),
//       intValue → number when |v| ≤ 2^53-1, otherwise the exact decimal string,
//       bytesValue → standard base64 string, arrayValue → array, kvlistValue → object,
//       an empty AnyValue → null. Duplicate keys: the last one wins.
//   - attribute keys: `tracegate.*` is the server's namespace (it writes `tracegate.truncated`
//     here and `tracegate.cost_source` in the mapper), so a client's top-level `tracegate.x` key —
//     on a span, event, link, scope or resource — is kept as `client.tracegate.x`, as on the
//     native route; kvlist keys inside a value are left alone. Done here, not in the mapper,
//     because only here can a client's key be told apart from the decoder's own marker.
//
// Limits (OtlpLimits, derived from Config by `otlpLimits`):
//   whole request → OtlpDecodeError (HTTP 400):
//     undecodable body, invalid UTF-8 in any string, AnyValue nesting deeper than maxDepth
//     (a scalar is depth 0, each arrayValue/kvlistValue level adds 1), the attribute/kvlist key
//     `__proto__` (JSON: also any object key `__proto__`, wrappers and kvlist entries included),
//     more than maxSpansPerRequest spans, more than maxNodes decoded messages in
//     total (see NODES_PER_SPAN; JSON: 2 × maxNodes objects).
//     When the problem has a place, OtlpDecodeError.field names it as a path
//     (`resourceSpans[0].scopeSpans[0].spans[3].attributes["x"]`, stopping at the attribute),
//     which the route sends as a google.rpc.BadRequest field violation. The path is built only
//     on the error path (try/catch at each level; the protobuf pre-scan re-reads the enclosing
//     message to count the index), so valid requests pay nothing for it.
//   one span → rejected, counted in `rejectedSpans` (+ `errorMessage`) for partialSuccess:
//     missing/invalid/all-zero traceId or spanId, invalid parentSpanId, missing start time,
//     end before start, malformed values (JSON).
//   counts: attributes beyond maxAttributes (on a resource, scope, span, event or link) and
//     events or links beyond maxEvents are dropped, the first ones kept, and the owner's
//     dropped*Count grows by as many, as an SDK's own limits do: the span is kept.
//   strings: attribute string values (also nested ones) longer than maxAttributeValueBytes
//     are cut at a UTF-8 boundary — content keys (prompt/response carriers, see
//     CONTENT_KEYS and FLAT_CONTENT) get the larger maxStringBytes — and the attribute set gets
//     `tracegate.truncated: [keys…]`. Keys (also kvlist keys) longer than maxKeyBytes
//     (TRACEGATE_MAX_ATTRIBUTE_KEY_BYTES, default 1024) are cut the same way; a cut top-level key is listed as cut,
//     a cut kvlist key lists its top-level attribute. Span/event names, status message and trace state
//     longer than maxAttributeValueBytes are cut too and listed as `otel.span.name`,
//     `otel.status_message`, `otel.trace_state`, `otel.event.name`.
//
// Prototype safety: attribute sets and kvlist values are ordinary `{}` objects, and every
// key is checked BEFORE it is assigned: `__proto__` fails the request. The only way a
// plain-object assignment can touch a prototype is the `__proto__` setter, which therefore
// never runs (`constructor` or `prototype` simply become own properties). (Null-prototype objects were measured and rejected:
// they are dictionary-mode in V8, and copying one 13-key attribute set with `{...a}` took
// ~6 µs against ~0.1 µs for a plain object — per span, on the hot path.) JSON bodies are
// parsed with JSON.parse, which defines `"__proto__"` as an own data property (never the
// prototype); objects carrying such a key are rejected too.
//
// Hostile-input safety: protobufjs caps message recursion at 100 (Reader.recursionLimit),
// so deeply nested protobuf fails fast with "max depth exceeded" (→ 400) instead of
// blowing the stack, but before protobufjs runs at all, `prescanProtobuf` walks the wire
// format (allocation-free) and rejects too many spans, too deep AnyValues and too many
// messages in total, so hostile bodies fail in milliseconds. JSON bodies are pre-scanned
// (byte loop, strings skipped with indexOf) for bracket depth and object count before
// JSON.parse, so a 20 MB "[[[[…" or "[{},{},…" never reaches the parser.
import { isUtf8 } from 'node:buffer';
import protobuf from 'protobufjs';
import { HttpError } from '../errors.ts';
import { LATEST_STORABLE_NS, type Attributes, type AttrValue } from '../record.ts';
import { jsonPrescan } from '../json-prescan.ts';
import type { Config } from '../../config/index.ts';
import {
  ExportTraceServiceRequest,
  type PbAnyValue, type PbExportRequest, type PbKeyValue, type PbLong, type PbSpan,
} from './schema.ts';

// ---------------------------------------------------------------------------
// Public types

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

export function otlpLimits(c: Pick<Config, 'MAX_DEPTH' | 'MAX_ATTRIBUTES' | 'MAX_EVENTS' | 'MAX_SPANS_PER_REQUEST' | 'MAX_ATTRIBUTE_VALUE_BYTES' | 'MAX_STRING_BYTES' | 'MAX_ATTRIBUTE_KEY_BYTES'>): OtlpLimits {
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
export class OtlpDecodeError extends HttpError {
  /** Where in the request the problem is; null when unknown or request-wide. */
  field: string | null = null;
  /** Request-wide limits (span and message counts) have no single location. */
  readonly requestWide: boolean;
  constructor(message: string, opts: { requestWide?: boolean } = {}) {
    super(400, 'invalid_request', message);
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
  'gen_ai.input.messages', 'gen_ai.output.messages', 'gen_ai.system_instructions', 'gen_ai.tool.definitions',
  'gen_ai.tool.call.arguments', 'gen_ai.tool.call.result', 'gen_ai.prompt', 'gen_ai.completion',
  'input.value', 'output.value', 'traceloop.entity.input', 'traceloop.entity.output',
  'ai.prompt', 'ai.prompt.messages', 'ai.response.text', 'ai.response.object', 'ai.response.toolCalls',
  'ai.toolCall.args', 'ai.toolCall.result', 'ai.toolCall.input', 'ai.toolCall.output',
  'content', 'message', 'body', 'gen_ai.event.content', 'tool.parameters', 'llm.invocation_parameters',
]);

/** Flattened message content: OpenInference `llm.{input,output}_messages.N.message.content` (and its
 * `message.contents.M.message_content.text` parts), OpenLLMetry `gen_ai.{prompt,completion}.N.content`. */
const FLAT_CONTENT = /^(?:llm\.(?:input|output)_messages\.\d+\.message\.(?:content|contents\.\d+\.message_content\.text|tool_calls\.\d+\.tool_call\.function\.arguments)|gen_ai\.(?:prompt|completion)\.\d+\.(?:content|tool_calls\.\d+\.arguments))$/;

function isContentKey(key: string): boolean {
  return CONTENT_KEYS.has(key) || ((key.startsWith('llm.') || key.startsWith('gen_ai.')) && FLAT_CONTENT.test(key));
}

export const TRUNCATED_ATTR = 'tracegate.truncated';

/** Default cap on attribute key length (UTF-8 bytes); see OtlpLimits.maxKeyBytes. */
export const MAX_ATTRIBUTE_KEY_BYTES = 1024;

/** `tracegate.*` attribute names are the server's; a client's `tracegate.x` is kept as `client.tracegate.x`. */
const SERVER_NS = 'tracegate.';
const CLIENT_NS = 'client.';

/** Decode an OTLP/HTTP ExportTraceServiceRequest body (already decompressed). Throws OtlpDecodeError. */
export function decodeOtlpRequest(body: Buffer | Uint8Array, contentType: OtlpEncoding, limits: OtlpLimits): NormalizedRequest {
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return contentType === 'protobuf' ? decodeProtobuf(buf, limits) : decodeJson(buf, limits);
}

// ---------------------------------------------------------------------------
// Shared helpers

class SpanReject {
  readonly reason: string;
  /** Location (see OtlpDecodeError.field), kept for when a resource/scope problem fails the request. */
  field: string | null = null;
  constructor(reason: string) { this.reason = reason; }
  within(segment: string): this {
    this.field = joinPath(segment, this.field);
    return this;
  }
}

/** Adds `segment` to the location of a decoder error on its way out (other errors pass unchanged). */
function located(err: unknown, segment: string): unknown {
  if (err instanceof OtlpDecodeError || err instanceof SpanReject) err.within(segment);
  return err;
}

/** A readable path segment for attribute `key` (long keys abbreviated). */
function attrSegment(key: unknown, index: number): string {
  if (typeof key !== 'string') return `attributes[${index}]`;
  return `attributes[${JSON.stringify(key.length > 64 ? key.slice(0, 64) + '…' : key)}]`;
}

/** `__proto__` is the one key whose plain-object assignment touches a prototype; `constructor` is a harmless own property. */
const HOSTILE_KEY = '__proto__';
const MAX_REASONS = 5;

/** Per-attribute-set state: limits and the list of truncated keys. */
class Ctx {
  readonly limits: OtlpLimits;
  readonly maxKeyBytes: number;
  truncated: string[] | null = null;
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
function attrKey(key: string, ctx: Ctx): string {
  checkKey(key);
  if (key.charCodeAt(0) === 116 /* t */ && key.startsWith(SERVER_NS)) key = CLIENT_NS + key;
  const max = ctx.maxKeyBytes;
  if (key.length * 3 > max && Buffer.byteLength(key, 'utf8') > max) {
    key = truncateUtf8(key, max);
    markTruncated(ctx, key);
  }
  return key;
}

/** A kvlist key inside attribute `topKey`: `__proto__` refused; cut to maxKeyBytes, marking `topKey`. */
function nestedKey(key: string, ctx: Ctx, topKey: string): string {
  checkKey(key);
  const max = ctx.maxKeyBytes;
  if (key.length * 3 > max && Buffer.byteLength(key, 'utf8') > max) {
    markTruncated(ctx, topKey);
    return truncateUtf8(key, max);
  }
  return key;
}

function tooDeep(limits: OtlpLimits): OtlpDecodeError {
  return new OtlpDecodeError(`attribute value nesting exceeds the limit of ${limits.maxDepth}`);
}

/** Cut a string to at most maxBytes of UTF-8, never inside a character. */
export function truncateUtf8(s: string, maxBytes: number): string {
  const b = Buffer.from(s, 'utf8');
  if (b.length <= maxBytes) return s;
  let end = maxBytes;
  while (end > 0 && (b[end]! & 0xc0) === 0x80) end--;
  return b.toString('utf8', 0, end);
}

/** Apply the string limit for attribute `topKey`; record truncation. */
function limitStr(s: string, ctx: Ctx, topKey: string): string {
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

function limitPlain(s: string, limits: OtlpLimits, marker: string, ctx: Ctx): string {
  if (s.length * 3 <= limits.maxAttributeValueBytes || Buffer.byteLength(s, 'utf8') <= limits.maxAttributeValueBytes) return s;
  markTruncated(ctx, marker);
  return truncateUtf8(s, limits.maxAttributeValueBytes);
}

function finishAttrs(attrs: Attributes, ctx: Ctx): Attributes {
  if (ctx.truncated !== null) {
    attrs[TRUNCATED_ATTR] = ctx.truncated;
    ctx.truncated = null;
  }
  return attrs;
}

const ZERO_TRACE = '00000000000000000000000000000000';
const ZERO_SPAN = '0000000000000000';

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

function rejectMessage(total: number, reasons: string[]): string {
  if (total === 0) return '';
  const more = total > reasons.length ? ` (and ${total - reasons.length} more)` : '';
  return `${total} span(s) rejected: ${reasons.join('; ')}${more}`;
}

// ClickHouse buckets by DateTime (UInt32 seconds): a later time would wrap around to 1970 in the rollups.
const LATEST_NS = LATEST_STORABLE_NS.toString();

function checkSpanTimes(start: string, end: string): void {
  if (start === '0') throw new SpanReject('missing startTimeUnixNano');
  if (decLess(end, start)) throw new SpanReject('endTimeUnixNano is before startTimeUnixNano');
  if (decLess(LATEST_NS, end)) throw new SpanReject('endTimeUnixNano is after 2106-02-07T06:28:15Z, the latest time storage can bucket');
}

// ---------------------------------------------------------------------------
// Protobuf

// protobufjs's generic stringVerify builds short strings char by char and runs a fatal
// TextDecoder on long ones. This reader is equally strict but faster:
//   - every string is sliced with the native `utf8Slice` (which turns invalid sequences
//     into U+FFFD); only if the result contains U+FFFD are the bytes checked with the
//     native `isUtf8`, so genuine U+FFFD characters still pass and invalid UTF-8 throws;
//   - short ASCII strings (attribute keys, model names, enum-like values repeat in every
//     span) go through a small intern cache keyed by a cheap signature (length and three
//     sampled bytes) and verified byte by byte, so repeated keys cost no allocation and
//     are already internalized when they become property names.
const INTERN_MAX_LEN = 48;
const INTERN_MAX_ENTRIES = 8192;
const intern = new Map<number, string>();

const BufferReaderBase = protobuf.BufferReader as unknown as new (buf: Buffer) => object;
class OtlpReader extends BufferReaderBase {
  stringVerify(): string {
    const self = this as unknown as { buf: Buffer; pos: number; len: number; uint32(): number };
    const len = self.uint32();
    const start = self.pos;
    const end = start + len;
    if (len < 0 || end > self.len) throw new RangeError('index out of range');
    self.pos = end;
    const buf = self.buf;
    if (len === 0) return '';
    let sig = -1;
    if (len <= INTERN_MAX_LEN) {
      sig = len | (buf[start]! << 6) | (buf[end - 1]! << 13) | ((buf[start + (len >> 1)]! ^ buf[start + (len >> 2)]!) << 20);
      const hit = intern.get(sig);
      if (hit !== undefined && hit.length === len) {
        let i = 0;
        while (i < len && hit.charCodeAt(i) === buf[start + i]) i++;
        if (i === len) return hit;
      }
    }
    const str = buf.utf8Slice(start, end);
    if (str.indexOf('\uFFFD') !== -1 && !isUtf8(buf.subarray(start, end))) {
      throw new TypeError('The encoded data was not valid for encoding utf-8');
    }
    if (sig !== -1 && str.length === len) { // one UTF-16 unit per byte: pure ASCII
      if (intern.size >= INTERN_MAX_ENTRIES) intern.clear();
      intern.set(sig, str);
    }
    return str;
  }

  /** fixed64 (timestamps) → exact decimal string, with no long.js allocation. */
  fixed64(): string {
    const self = this as unknown as { buf: Buffer; pos: number; len: number };
    const p = self.pos;
    if (p + 8 > self.len) throw new RangeError('index out of range');
    const b = self.buf;
    const lo = (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;
    const hi = (b[p + 4]! | (b[p + 5]! << 8) | (b[p + 6]! << 16) | (b[p + 7]! << 24)) >>> 0;
    self.pos = p + 8;
    return u64ToDecimal(lo, hi);
  }

  /** int64 (AnyValue.intValue) → number when |v| ≤ 2^53 − 1, else the exact decimal string. */
  int64(): number | string {
    const self = this as unknown as { buf: Buffer; pos: number; len: number };
    const b = self.buf;
    const len = self.len;
    let pos = self.pos;
    let lo = 0;
    let hi = 0;
    let c = 0;
    let done = false;
    for (let i = 0; i < 4; i++) {
      if (pos >= len) throw new RangeError('index out of range');
      c = b[pos++]!;
      lo |= (c & 127) << (i * 7);
      if (c < 128) { done = true; break; }
    }
    if (!done) {
      if (pos >= len) throw new RangeError('index out of range');
      c = b[pos++]!;
      lo |= (c & 127) << 28;
      hi = (c & 127) >> 4;
      if (c >= 128) {
        for (let i = 0; i < 5; i++) {
          if (pos >= len) throw new RangeError('index out of range');
          c = b[pos++]!;
          hi |= (c & 127) << (i * 7 + 3);
          if (c < 128) { done = true; break; }
        }
        if (!done) throw new Error('invalid varint encoding');
      }
    }
    self.pos = pos;
    hi |= 0;
    if (hi >= -0x200000 && hi < 0x200000) return hi * 4294967296 + (lo >>> 0);
    return BigInt.asIntN(64, (BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0)).toString();
  }
}
declare module 'node:buffer' {
  interface Buffer {
    latin1Slice(start: number, end: number): string;
    utf8Slice(start: number, end: number): string;
    hexSlice(start: number, end: number): string;
  }
}

// Structural pre-scan of the protobuf wire format, run BEFORE protobufjs materializes
// anything. Allocation-free; recursion is bounded by the schema plus maxDepth (checked
// before descending). It enforces the limits whose violation would otherwise cost time
// and memory proportional to a hostile body: span count, AnyValue nesting, and the total
// number of messages protobufjs would allocate (spans, events, links, key-values,
// any-values: `maxNodesOf(limits)`, by default NODES_PER_SPAN × maxSpansPerRequest).
// A 20 MB body of empty messages (10 M objects) otherwise takes seconds to decode.
export const NODES_PER_SPAN = 64;

export function maxNodesOf(limits: OtlpLimits): number {
  return limits.maxNodes ?? limits.maxSpansPerRequest * NODES_PER_SPAN;
}

const K_REQ = 0, K_RS = 1, K_RES = 2, K_SS = 3, K_SCOPE = 4, K_SPAN = 5, K_EVENT = 6, K_LINK = 7, K_KV = 8, K_ANY = 9, K_ARR = 10, K_KVL = 11;
// CHILD[kind * 16 + field] = kind of the length-delimited submessage, or -1.
const CHILD = new Int8Array(12 * 16).fill(-1);
const setChild = (kind: number, field: number, child: number) => { CHILD[kind * 16 + field] = child; };
setChild(K_REQ, 1, K_RS);
setChild(K_RS, 1, K_RES); setChild(K_RS, 2, K_SS);
setChild(K_RES, 1, K_KV);
setChild(K_SS, 1, K_SCOPE); setChild(K_SS, 2, K_SPAN);
setChild(K_SCOPE, 3, K_KV);
setChild(K_SPAN, 9, K_KV); setChild(K_SPAN, 11, K_EVENT); setChild(K_SPAN, 13, K_LINK);
setChild(K_EVENT, 3, K_KV);
setChild(K_LINK, 4, K_KV);
setChild(K_KV, 2, K_ANY);
setChild(K_ANY, 5, K_ARR); setChild(K_ANY, 6, K_KVL);
setChild(K_ARR, 1, K_ANY);
setChild(K_KVL, 1, K_KV);

// Field names for error locations (BadRequest field paths), for the messages above attribute values.
const FIELD_NAMES: Array<string | undefined> = [];
const REPEATED = new Set<number>();
const nameField = (kind: number, field: number, name: string, repeated: boolean) => {
  FIELD_NAMES[kind * 16 + field] = name;
  if (repeated) REPEATED.add(kind * 16 + field);
};
nameField(K_REQ, 1, 'resourceSpans', true);
nameField(K_RS, 1, 'resource', false); nameField(K_RS, 2, 'scopeSpans', true);
nameField(K_RES, 1, 'attributes', true);
nameField(K_SS, 1, 'scope', false); nameField(K_SS, 2, 'spans', true);
nameField(K_SCOPE, 3, 'attributes', true);
nameField(K_SPAN, 9, 'attributes', true); nameField(K_SPAN, 11, 'events', true); nameField(K_SPAN, 13, 'links', true);
nameField(K_EVENT, 3, 'attributes', true);
nameField(K_LINK, 4, 'attributes', true);

class PreScan {
  readonly buf: Buffer;
  readonly limits: OtlpLimits;
  readonly maxNodes: number;
  pos = 0;
  spans = 0;
  nodes = 0;
  constructor(buf: Buffer, limits: OtlpLimits) {
    this.buf = buf;
    this.limits = limits;
    this.maxNodes = maxNodesOf(limits);
  }

  varint(end: number): number {
    // Values we use (tags, lengths) fit in 32 bits; longer varints are skipped by skipVarint.
    const b = this.buf;
    let p = this.pos;
    if (p + 5 <= end) {
      let c = b[p++]!;
      let r = c & 127;
      if (c < 128) { this.pos = p; return r; }
      c = b[p++]!; r |= (c & 127) << 7;
      if (c < 128) { this.pos = p; return r; }
      c = b[p++]!; r |= (c & 127) << 14;
      if (c < 128) { this.pos = p; return r; }
      c = b[p++]!; r |= (c & 127) << 21;
      if (c < 128) { this.pos = p; return r; }
      c = b[p++]!; r += (c & 127) * 268435456;
      if (c < 128) { this.pos = p; return r; }
      throw new OtlpDecodeError('undecodable protobuf body: varint too long');
    }
    let result = 0;
    let shift = 0;
    for (let i = 0; i < 5; i++) {
      if (this.pos >= end) throw new OtlpDecodeError('undecodable protobuf body: truncated varint');
      const c = b[this.pos++]!;
      result += (c & 127) * 2 ** shift;
      if (c < 128) return result;
      shift += 7;
    }
    throw new OtlpDecodeError('undecodable protobuf body: varint too long');
  }

  skipVarint(end: number): void {
    const b = this.buf;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= end) throw new OtlpDecodeError('undecodable protobuf body: truncated varint');
      if (b[this.pos++]! < 128) return;
    }
    throw new OtlpDecodeError('undecodable protobuf body: varint too long');
  }

  /** Skip a field of wire type `wt` (groups are skipped iteratively, with a nesting cap). */
  skip(wt: number, end: number): void {
    if (wt === 0) this.skipVarint(end);
    else if (wt === 1) this.advance(8, end);
    else if (wt === 5) this.advance(4, end);
    else if (wt === 2) this.advance(this.varint(end), end);
    else if (wt === 3) {
      let groups = 1;
      while (groups > 0) {
        const t = this.varint(end);
        const w = t & 7;
        if (w === 3) {
          if (++groups > 32) throw new OtlpDecodeError('protobuf message nesting is too deep');
        } else if (w === 4) groups--;
        else this.skip(w, end);
      }
    } else throw new OtlpDecodeError(`undecodable protobuf body: invalid wire type ${wt}`);
  }

  advance(n: number, end: number): void {
    if (this.pos + n > end) throw new OtlpDecodeError('undecodable protobuf body: length out of range');
    this.pos += n;
  }

  /** Walk a message of `kind` spanning [pos, end). `depth` = AnyValue container depth. */
  walk(kind: number, end: number, depth: number): void {
    const start = this.pos;
    while (this.pos < end) {
      const tagAt = this.pos;
      const tag = this.varint(end);
      const field = tag >>> 3;
      const wt = tag & 7;
      const child = wt === 2 && field < 16 ? CHILD[kind * 16 + field]! : -1;
      if (child < 0) {
        this.skip(wt, end);
        continue;
      }
      const len = this.varint(end);
      const stop = this.pos + len;
      if (stop > end) throw new OtlpDecodeError('undecodable protobuf body: length out of range');
      let d = depth;
      if (child === K_SPAN) {
        if (++this.spans > this.limits.maxSpansPerRequest) {
          throw new OtlpDecodeError(`request has more than ${this.limits.maxSpansPerRequest} spans; the limit is ${this.limits.maxSpansPerRequest}`, { requestWide: true });
        }
      }
      if (child >= K_SPAN && child <= K_ANY && ++this.nodes > this.maxNodes) {
        throw new OtlpDecodeError(`request has more than ${this.maxNodes} spans, events, links and attribute values in total; split the batch`, { requestWide: true });
      }
      if (child === K_ARR || child === K_KVL) {
        d = depth + 1;
        if (d > this.limits.maxDepth) throw tooDeep(this.limits);
      }
      try {
        this.walk(child, stop, d);
      } catch (err) {
        throw this.locate(err, kind, field, start, tagAt, stop);
      }
      this.pos = stop;
    }
  }

  /**
   * Error path only: names the child (field `field` of a `kind` message starting at `start`, its tag at
   * `tagAt`, its body ending at `stop`) in the error's location, e.g. `spans[3]`, `attributes["k"]`.
   * Inside an attribute value nothing is added: the location stops at the attribute.
   */
  locate(err: unknown, kind: number, field: number, start: number, tagAt: number, stop: number): unknown {
    if (!(err instanceof OtlpDecodeError) || err.requestWide) return err;
    const name = FIELD_NAMES[kind * 16 + field];
    if (name === undefined) return err; // inside an attribute value
    if (!REPEATED.has(kind * 16 + field)) return err.within(name);
    const index = this.countBefore(start, tagAt, field);
    if (name !== 'attributes') return err.within(`${name}[${index}]`);
    err.field = null; // the attribute is the location
    return err.within(attrSegment(this.kvKey(tagAt, stop), index));
  }

  /** How many fields number `field` precede `tagAt` in the message starting at `start`. */
  countBefore(start: number, tagAt: number, field: number): number {
    let n = 0;
    try {
      this.pos = start;
      while (this.pos < tagAt) {
        const tag = this.varint(tagAt);
        if (tag >>> 3 === field) n++;
        this.skip(tag & 7, tagAt);
      }
    } catch { /* best effort */ }
    return n;
  }

  /** The key of the KeyValue field whose tag is at `tagAt` and body ends at `stop` (undefined when unreadable). */
  kvKey(tagAt: number, stop: number): string | undefined {
    try {
      this.pos = tagAt;
      this.varint(stop); // tag
      this.varint(stop); // length
      while (this.pos < stop) {
        const tag = this.varint(stop);
        if (tag === 0x0a) { // 1: key, length-delimited
          const len = this.varint(stop);
          return this.pos + len <= stop ? this.buf.toString('utf8', this.pos, this.pos + len) : undefined;
        }
        this.skip(tag & 7, stop);
      }
    } catch { /* best effort */ }
    return undefined;
  }
}

/** Validate the protobuf body's structure against the limits before decoding it. */
export function prescanProtobuf(buf: Buffer, limits: OtlpLimits): { spans: number; nodes: number } {
  const p = new PreScan(buf, limits);
  p.walk(K_REQ, buf.length, 0);
  return { spans: p.spans, nodes: p.nodes };
}

function decodeProtobuf(buf: Buffer, limits: OtlpLimits): NormalizedRequest {
  prescanProtobuf(buf, limits);
  let msg: PbExportRequest;
  try {
    msg = ExportTraceServiceRequest.decode(new OtlpReader(buf) as unknown as protobuf.Reader) as unknown as PbExportRequest;
  } catch (err) {
    const m = err instanceof Error ? err.message : String(err);
    if (/utf-?8/i.test(m)) throw new OtlpDecodeError('invalid UTF-8 in a protobuf string field');
    if (/max depth|call stack/i.test(m)) throw new OtlpDecodeError('protobuf message nesting is too deep');
    throw new OtlpDecodeError(`undecodable protobuf body: ${m}`);
  }
  const rsList = msg.resourceSpans;
  let total = 0;
  for (const rs of rsList) for (const ss of rs.scopeSpans) total += ss.spans.length;
  if (total > limits.maxSpansPerRequest) {
    throw new OtlpDecodeError(`request has ${total} spans; the limit is ${limits.maxSpansPerRequest}`);
  }
  const ctx = new Ctx(limits);
  const reasons: string[] = [];
  let rejected = 0;
  let kept = 0;
  let index = 0;
  const out: NormalizedResourceSpans[] = new Array(rsList.length);
  for (let r = 0; r < rsList.length; r++) {
    const rs = rsList[r]!;
    try {
      const res = rs.resource;
      let resAttrs = {} as Attributes;
      if (res) {
        try { resAttrs = pbAttrList(res.attributes, ctx); } catch (err) { throw located(err, 'resource'); }
      }
      const nss: NormalizedScopeSpans[] = new Array(rs.scopeSpans.length);
      for (let s = 0; s < rs.scopeSpans.length; s++) {
        const ss = rs.scopeSpans[s]!;
        try {
          const sc = ss.scope;
          let scope: NormalizedScope = { name: '', version: '', attributes: {} as Attributes, droppedAttributesCount: 0 };
          if (sc) {
            try {
              scope = { name: limitPlain(sc.name, limits, 'otel.scope.name', ctx), version: limitPlain(sc.version, limits, 'otel.scope.version', ctx), attributes: pbAttrList(sc.attributes, ctx), droppedAttributesCount: (sc.droppedAttributesCount >>> 0) + over(sc.attributes, limits.maxAttributes) };
            } catch (err) { throw located(err, 'scope'); }
          }
          const spans: NormalizedSpan[] = [];
          for (let k = 0; k < ss.spans.length; k++) {
            const sp = ss.spans[k]!;
            try {
              spans.push(pbSpan(sp, ctx));
              kept++;
            } catch (err) {
              if (!(err instanceof SpanReject)) throw located(err, `spans[${k}]`);
              ctx.truncated = null;
              rejected++;
              if (reasons.length < MAX_REASONS) reasons.push(`span #${index}${idHint(sp.spanId)}: ${err.reason}`);
            }
            index++;
          }
          nss[s] = { scope, schemaUrl: ss.schemaUrl, spans };
        } catch (err) { throw located(err, `scopeSpans[${s}]`); }
      }
      out[r] = { resource: { attributes: resAttrs, droppedAttributesCount: res ? (res.droppedAttributesCount >>> 0) + over(res.attributes, limits.maxAttributes) : 0 }, schemaUrl: rs.schemaUrl, scopeSpans: nss };
    } catch (err) { throw located(err, `resourceSpans[${r}]`); }
  }
  return { resourceSpans: out, spanCount: kept, rejectedSpans: rejected, errorMessage: rejectMessage(rejected, reasons) };
}

function idHint(id: unknown): string {
  if (id instanceof Uint8Array && id.length > 0 && id.length <= 16) return ` (spanId ${toHex(id)})`;
  if (typeof id === 'string' && id.length > 0 && id.length <= 32) return ` (spanId ${id})`;
  return '';
}

function toHex(b: Uint8Array): string {
  return (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)).hexSlice(0, b.length);
}

function pbId(b: Uint8Array | undefined, size: 8 | 16, what: string, optional: boolean): string {
  if (!b || b.length === 0) {
    if (optional) return '';
    throw new SpanReject(`missing ${what}`);
  }
  if (b.length !== size) throw new SpanReject(`invalid ${what} (${b.length} bytes, expected ${size})`);
  const hex = toHex(b);
  if (hex === (size === 16 ? ZERO_TRACE : ZERO_SPAN)) {
    if (optional) return '';
    throw new SpanReject(`invalid ${what} (all zero)`);
  }
  return hex;
}

function pbTime(v: PbLong | number | string | undefined): string {
  if (v === undefined || v === null) return '0';
  if (typeof v === 'string') return v; // OtlpReader.fixed64
  if (typeof v === 'number') return v >= 0 && Number.isInteger(v) ? BigInt(v).toString() : '0';
  return u64ToDecimal(v.low, v.high);
}

function pbSpan(sp: PbSpan, ctx: Ctx): NormalizedSpan {
  const limits = ctx.limits;
  const traceId = pbId(sp.traceId, 16, 'traceId', false);
  const spanId = pbId(sp.spanId, 8, 'spanId', false);
  const parentSpanId = pbId(sp.parentSpanId, 8, 'parentSpanId', true);
  const startTimeNs = pbTime(sp.startTimeUnixNano);
  const endTimeNs = pbTime(sp.endTimeUnixNano);
  checkSpanTimes(startTimeNs, endTimeNs);
  const max = limits.maxAttributes;
  const spEvents = cap(sp.events, limits.maxEvents);
  const spLinks = cap(sp.links, limits.maxEvents);

  const events: NormalizedEvent[] = new Array(spEvents.length);
  for (let i = 0; i < spEvents.length; i++) {
    const e = spEvents[i]!;
    let attributes: Attributes;
    try { attributes = pbAttrs(cap(e.attributes, max), ctx); } catch (err) { throw located(err, `events[${i}]`); }
    const name = limitPlain(e.name, limits, 'otel.event.name', ctx);
    events[i] = { name, timeNs: pbTime(e.timeUnixNano), attributes: finishAttrs(attributes, ctx), droppedAttributesCount: (e.droppedAttributesCount >>> 0) + over(e.attributes, max) };
  }
  const links: NormalizedLink[] = [];
  for (let i = 0; i < spLinks.length; i++) {
    const l = spLinks[i]!;
    const lt = pbIdLoose(l.traceId, 16);
    const ls = pbIdLoose(l.spanId, 8);
    let attributes: Attributes;
    try { attributes = pbAttrs(cap(l.attributes, max), ctx); } catch (err) { throw located(err, `links[${i}]`); }
    const traceState = limitPlain(l.traceState, limits, 'otel.trace_state', ctx);
    const attrs = finishAttrs(attributes, ctx);
    if (lt === '' || ls === '') continue; // a link without valid ids points nowhere: dropped
    links.push({ traceId: lt, spanId: ls, traceState, flags: l.flags >>> 0, attributes: attrs, droppedAttributesCount: (l.droppedAttributesCount >>> 0) + over(l.attributes, max) });
  }
  const attributes = pbAttrs(cap(sp.attributes, max), ctx);
  const name = limitPlain(sp.name, limits, 'otel.span.name', ctx);
  const traceState = limitPlain(sp.traceState, limits, 'otel.trace_state', ctx);
  const st = sp.status;
  const statusMessage = st ? limitPlain(st.message, limits, 'otel.status_message', ctx) : '';
  const code = st ? st.code : 0;
  return {
    traceId, spanId, parentSpanId, traceState, flags: sp.flags >>> 0, name, kind: sp.kind | 0,
    startTimeNs, endTimeNs, attributes: finishAttrs(attributes, ctx), droppedAttributesCount: (sp.droppedAttributesCount >>> 0) + over(sp.attributes, max),
    events, droppedEventsCount: (sp.droppedEventsCount >>> 0) + over(sp.events, limits.maxEvents),
    links, droppedLinksCount: (sp.droppedLinksCount >>> 0) + over(sp.links, limits.maxEvents),
    statusCode: code === 1 || code === 2 ? code : 0, statusMessage,
  };
}

function pbIdLoose(b: Uint8Array | undefined, size: 8 | 16): string {
  if (!b || b.length !== size) return '';
  const hex = toHex(b);
  return hex === (size === 16 ? ZERO_TRACE : ZERO_SPAN) ? '' : hex;
}

/** The first `max` items (all of them when within the limit). */
function cap<T>(items: T[], max: number): T[] {
  return items.length > max ? items.slice(0, max) : items;
}

/** How many items `cap` leaves out. */
function over(items: unknown[], max: number): number {
  return items.length > max ? items.length - max : 0;
}

/** Resource / scope attributes (the first maxAttributes; the caller adds the rest to the dropped count). */
function pbAttrList(kvs: PbKeyValue[], ctx: Ctx): Attributes {
  return finishAttrs(pbAttrs(cap(kvs, ctx.limits.maxAttributes), ctx), ctx);
}

function pbAttrs(kvs: PbKeyValue[], ctx: Ctx): Attributes {
  const out: Attributes = {}; // plain object: safe, see "Prototype safety" above
  let i = 0;
  try {
    for (; i < kvs.length; i++) {
      const kv = kvs[i]!;
      const key = attrKey(kv.key, ctx);
      out[key] = pbValue(kv.value, 0, ctx, key);
    }
  } catch (err) {
    throw located(err, attrSegment(kvs[i]?.key, i));
  }
  return out;
}

const has = Object.prototype.hasOwnProperty;

function pbValue(v: PbAnyValue | null | undefined, depth: number, ctx: Ctx, topKey: string): AttrValue {
  if (!v) return null;
  if (has.call(v, 'stringValue')) return limitStr(v.stringValue!, ctx, topKey);
  if (has.call(v, 'intValue')) {
    const n = v.intValue!; // number or exact decimal string (OtlpReader.int64)
    if (typeof n === 'number' || typeof n === 'string') return n;
    const hi = n.high | 0; // a long.js Long, should another reader ever be used
    if (hi >= -0x200000 && hi < 0x200000) return hi * 4294967296 + (n.low >>> 0);
    return n.toString();
  }
  if (has.call(v, 'boolValue')) return v.boolValue!;
  if (has.call(v, 'doubleValue')) return finiteOrString(v.doubleValue!);
  if (has.call(v, 'arrayValue')) {
    if (depth + 1 > ctx.limits.maxDepth) throw tooDeep(ctx.limits);
    const vals = v.arrayValue?.values ?? [];
    const arr: AttrValue[] = new Array(vals.length);
    for (let i = 0; i < vals.length; i++) arr[i] = pbValue(vals[i], depth + 1, ctx, topKey);
    return arr;
  }
  if (has.call(v, 'kvlistValue')) {
    if (depth + 1 > ctx.limits.maxDepth) throw tooDeep(ctx.limits);
    const vals = v.kvlistValue?.values ?? [];
    const obj: { [k: string]: AttrValue } = {};
    for (let i = 0; i < vals.length; i++) {
      const kv = vals[i]!;
      obj[nestedKey(kv.key, ctx, topKey)] = pbValue(kv.value, depth + 1, ctx, topKey);
    }
    return obj;
  }
  if (has.call(v, 'bytesValue')) return toBase64(v.bytesValue!);
  return null;
}

function toBase64(b: Uint8Array): string {
  return (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)).toString('base64');
}

function finiteOrString(d: number): number | string {
  return Number.isFinite(d) ? d : String(d);
}

// ---------------------------------------------------------------------------
// JSON

type J = Record<string, unknown>;

const isObj = (v: unknown): v is J => typeof v === 'object' && v !== null && !Array.isArray(v);

function jArr(v: unknown, what: string, perSpan: boolean): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) {
    if (perSpan) throw new SpanReject(`${what} is not an array`);
    throw new OtlpDecodeError(`${what} is not an array`);
  }
  return v;
}

function jStr(v: unknown, what: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new SpanReject(`${what} is not a string`);
  return v;
}

function jUint(v: unknown): number {
  if (typeof v === 'number') return v >= 0 && Number.isFinite(v) ? Math.floor(v) >>> 0 : 0;
  if (typeof v === 'string' && v !== '') { const n = Number(v); return n >= 0 && Number.isFinite(n) ? Math.floor(n) >>> 0 : 0; }
  return 0;
}

function hostileObject(o: J): void {
  if (has.call(o, '__proto__')) throw new OtlpDecodeError('JSON key "__proto__" is not allowed');
}

const SPAN_KIND_NAMES: Record<string, number> = {
  SPAN_KIND_UNSPECIFIED: 0, SPAN_KIND_INTERNAL: 1, SPAN_KIND_SERVER: 2, SPAN_KIND_CLIENT: 3, SPAN_KIND_PRODUCER: 4, SPAN_KIND_CONSUMER: 5,
};
const STATUS_CODE_NAMES: Record<string, number> = { STATUS_CODE_UNSET: 0, STATUS_CODE_OK: 1, STATUS_CODE_ERROR: 2 };

function jEnum(v: unknown, names: Record<string, number>): number {
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string') {
    if (has.call(names, v)) return names[v]!;
    const n = Number(v);
    if (Number.isInteger(n)) return n;
  }
  return 0;
}

function isDigits(s: string, from: number): boolean {
  if (s.length <= from) return false;
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

function jTime(v: unknown, what: string): string {
  if (v === undefined || v === null) return '0';
  if (typeof v === 'string') {
    if (!isDigits(v, 0)) throw new SpanReject(`${what} is not a decimal integer`);
    if (v.length > 1 && v.charCodeAt(0) === 48) return BigInt(v).toString();
    if (v.length > 20 || (v.length === 20 && v > '18446744073709551615')) throw new SpanReject(`${what} is out of range`);
    return v;
  }
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return BigInt(v).toString();
  throw new SpanReject(`${what} is not a decimal integer`);
}

function isHex(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i) | 0x20; // lower-case letters; digits unchanged
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

function isBase64(s: string): boolean {
  let i = 0;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ok = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 43 || c === 47 || c === 45 || c === 95;
    if (!ok) break;
  }
  for (; i < s.length; i++) if (s.charCodeAt(i) !== 61) return false; // '=' padding only at the end
  return true;
}

/** Hex (case-insensitive) or base64 (standard or URL-safe, padding optional) id → lowercase hex; '' when absent; null when invalid. */
function jId(v: unknown, size: 8 | 16): string | null {
  if (v === undefined || v === null || v === '') return '';
  if (typeof v !== 'string') return null;
  if (v.length === size * 2 && isHex(v)) return v.toLowerCase();
  const b64len = Math.ceil(size / 3) * 4; // 24 for 16 bytes, 12 for 8
  const unpadded = Math.ceil((size * 4) / 3); // 22 / 11
  if ((v.length === b64len || v.length === unpadded) && isBase64(v)) {
    const b = Buffer.from(v, v.includes('-') || v.includes('_') ? 'base64url' : 'base64');
    if (b.length === size) return b.toString('hex');
  }
  return null;
}

function jSpanId(v: unknown, size: 8 | 16, what: string, optional: boolean): string {
  const id = jId(v, size);
  if (id === null) throw new SpanReject(`invalid ${what}`);
  if (id === '' || id === (size === 16 ? ZERO_TRACE : ZERO_SPAN)) {
    if (optional) return '';
    throw new SpanReject(id === '' ? `missing ${what}` : `invalid ${what} (all zero)`);
  }
  return id;
}

function decodeJson(buf: Buffer, limits: OtlpLimits): NormalizedRequest {
  if (!isUtf8(buf)) throw new OtlpDecodeError('request body is not valid UTF-8');
  // Structural depth of a span attribute value is 12 for a scalar; each container adds ≤ 4.
  const maxObjects = 2 * maxNodesOf(limits);
  const pre = jsonPrescan(buf, 16 + 4 * limits.maxDepth, maxObjects);
  if (pre === 'deep') throw tooDeep(limits);
  if (pre === 'wide') throw new OtlpDecodeError(`request has more than ${maxObjects} JSON objects; split the batch`);
  let root: unknown;
  const bom = buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0;
  try {
    root = buf.length === bom ? {} : JSON.parse(buf.toString('utf8', bom));
  } catch (err) {
    throw new OtlpDecodeError(`undecodable JSON body: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!isObj(root)) throw new OtlpDecodeError('request body is not a JSON object');
  hostileObject(root);
  const rsList = jArr(root.resourceSpans, 'resourceSpans', false);
  let total = 0;
  for (const rs of rsList) {
    if (!isObj(rs)) throw new OtlpDecodeError('resourceSpans[] entry is not an object');
    for (const ss of jArr(rs.scopeSpans, 'scopeSpans', false)) {
      if (!isObj(ss)) throw new OtlpDecodeError('scopeSpans[] entry is not an object');
      total += jArr(ss.spans, 'spans', false).length;
    }
  }
  if (total > limits.maxSpansPerRequest) {
    throw new OtlpDecodeError(`request has ${total} spans; the limit is ${limits.maxSpansPerRequest}`);
  }
  const ctx = new Ctx(limits);
  const reasons: string[] = [];
  let rejected = 0;
  let kept = 0;
  let index = 0;
  const out: NormalizedResourceSpans[] = [];
  for (let r = 0; r < rsList.length; r++) {
    const rs = rsList[r] as J;
    try {
      hostileObject(rs);
      const res = isObj(rs.resource) ? rs.resource : null;
      let resAttrs = {} as Attributes;
      if (res) {
        try {
          hostileObject(res);
          resAttrs = jAttrList(res.attributes, ctx, 'resource');
        } catch (err) { throw located(err, 'resource'); }
      }
      const nss: NormalizedScopeSpans[] = [];
      const ssList = jArr(rs.scopeSpans, 'scopeSpans', false);
      for (let s = 0; s < ssList.length; s++) {
        const ss = ssList[s] as J;
        try {
          hostileObject(ss);
          const sc = isObj(ss.scope) ? ss.scope : null;
          let scope: NormalizedScope;
          if (sc) {
            try {
              hostileObject(sc);
              scope = {
                name: limitPlain(typeof sc.name === 'string' ? sc.name : '', limits, 'otel.scope.name', ctx),
                version: limitPlain(typeof sc.version === 'string' ? sc.version : '', limits, 'otel.scope.version', ctx),
                attributes: jAttrList(sc.attributes, ctx, 'scope'),
                droppedAttributesCount: jUint(sc.droppedAttributesCount) + over(jArr(sc.attributes, 'scope attributes', false), limits.maxAttributes),
              };
            } catch (err) { throw located(err, 'scope'); }
          } else {
            scope = { name: '', version: '', attributes: {} as Attributes, droppedAttributesCount: 0 };
          }
          const spans: NormalizedSpan[] = [];
          const spList = jArr(ss.spans, 'spans', false);
          for (let k = 0; k < spList.length; k++) {
            const sp = spList[k];
            try {
              if (!isObj(sp)) throw new SpanReject('span is not an object');
              spans.push(jSpan(sp, ctx));
              kept++;
            } catch (err) {
              if (!(err instanceof SpanReject)) throw located(err, `spans[${k}]`);
              ctx.truncated = null;
              rejected++;
              if (reasons.length < MAX_REASONS) reasons.push(`span #${index}${isObj(sp) ? idHint(sp.spanId) : ''}: ${err.reason}`);
            }
            index++;
          }
          nss.push({ scope, schemaUrl: typeof ss.schemaUrl === 'string' ? ss.schemaUrl : '', spans });
        } catch (err) { throw located(err, `scopeSpans[${s}]`); }
      }
      out.push({
        resource: { attributes: resAttrs, droppedAttributesCount: res ? jUint(res.droppedAttributesCount) + over(jArr(res.attributes, 'resource attributes', false), limits.maxAttributes) : 0 },
        schemaUrl: typeof rs.schemaUrl === 'string' ? rs.schemaUrl : '',
        scopeSpans: nss,
      });
    } catch (err) { throw located(err, `resourceSpans[${r}]`); }
  }
  return { resourceSpans: out, spanCount: kept, rejectedSpans: rejected, errorMessage: rejectMessage(rejected, reasons) };
}

/** An event's or link's attributes (the first `max`), its own keys checked; a failure names `segment`. */
function jItemAttrs(item: J, what: string, segment: string, max: number, ctx: Ctx): { raw: unknown[]; attributes: Attributes } {
  try {
    hostileObject(item);
    const raw = jArr(item.attributes, `${what} attributes`, true);
    return { raw, attributes: jAttrs(cap(raw, max), ctx) };
  } catch (err) { throw located(err, segment); }
}

function jSpan(sp: J, ctx: Ctx): NormalizedSpan {
  const limits = ctx.limits;
  hostileObject(sp);
  const traceId = jSpanId(sp.traceId, 16, 'traceId', false);
  const spanId = jSpanId(sp.spanId, 8, 'spanId', false);
  const parentSpanId = jSpanId(sp.parentSpanId, 8, 'parentSpanId', true);
  const startTimeNs = jTime(sp.startTimeUnixNano, 'startTimeUnixNano');
  const endTimeNs = jTime(sp.endTimeUnixNano, 'endTimeUnixNano');
  checkSpanTimes(startTimeNs, endTimeNs);
  const rawAttrs = jArr(sp.attributes, 'attributes', true);
  const rawEvents = jArr(sp.events, 'events', true);
  const rawLinks = jArr(sp.links, 'links', true);
  const max = limits.maxAttributes;
  const jEvents = cap(rawEvents, limits.maxEvents);

  const events: NormalizedEvent[] = new Array(jEvents.length);
  for (let i = 0; i < jEvents.length; i++) {
    const e = jEvents[i];
    if (!isObj(e)) throw new SpanReject('event is not an object');
    const { raw: ea, attributes } = jItemAttrs(e, 'event', `events[${i}]`, max, ctx);
    const name = limitPlain(jStr(e.name, 'event name'), limits, 'otel.event.name', ctx);
    events[i] = { name, timeNs: jTime(e.timeUnixNano, 'event timeUnixNano'), attributes: finishAttrs(attributes, ctx), droppedAttributesCount: jUint(e.droppedAttributesCount) + over(ea, max) };
  }
  const links: NormalizedLink[] = [];
  const jLinks = cap(rawLinks, limits.maxEvents);
  for (let i = 0; i < jLinks.length; i++) {
    const l = jLinks[i];
    if (!isObj(l)) throw new SpanReject('link is not an object');
    const { raw: la, attributes } = jItemAttrs(l, 'link', `links[${i}]`, max, ctx);
    const traceState = limitPlain(jStr(l.traceState, 'link traceState'), limits, 'otel.trace_state', ctx);
    const attrs = finishAttrs(attributes, ctx);
    const lt = jId(l.traceId, 16);
    const ls = jId(l.spanId, 8);
    if (!lt || !ls || lt === ZERO_TRACE || ls === ZERO_SPAN) continue; // link without valid ids: dropped
    links.push({ traceId: lt, spanId: ls, traceState, flags: jUint(l.flags), attributes: attrs, droppedAttributesCount: jUint(l.droppedAttributesCount) + over(la, max) });
  }
  const attributes = jAttrs(cap(rawAttrs, max), ctx);
  const name = limitPlain(jStr(sp.name, 'name'), limits, 'otel.span.name', ctx);
  const traceState = limitPlain(jStr(sp.traceState, 'traceState'), limits, 'otel.trace_state', ctx);
  let statusCode = 0;
  let statusMessage = '';
  if (isObj(sp.status)) {
    try { hostileObject(sp.status); } catch (err) { throw located(err, 'status'); }
    statusCode = jEnum(sp.status.code, STATUS_CODE_NAMES);
    if (statusCode !== 1 && statusCode !== 2) statusCode = 0;
    statusMessage = limitPlain(jStr(sp.status.message, 'status message'), limits, 'otel.status_message', ctx);
  }
  return {
    traceId, spanId, parentSpanId, traceState, flags: jUint(sp.flags), name, kind: jEnum(sp.kind, SPAN_KIND_NAMES),
    startTimeNs, endTimeNs, attributes: finishAttrs(attributes, ctx), droppedAttributesCount: jUint(sp.droppedAttributesCount) + over(rawAttrs, max),
    events, droppedEventsCount: jUint(sp.droppedEventsCount) + over(rawEvents, limits.maxEvents),
    links, droppedLinksCount: jUint(sp.droppedLinksCount) + over(rawLinks, limits.maxEvents),
    statusCode, statusMessage,
  };
}

function jAttrList(v: unknown, ctx: Ctx, where: string): Attributes {
  const kvs = jArr(v, `${where} attributes`, false);
  try {
    return finishAttrs(jAttrs(cap(kvs, ctx.limits.maxAttributes), ctx), ctx);
  } catch (err) {
    if (err instanceof SpanReject) { // no span to reject: the request fails
      const e = new OtlpDecodeError(`${where}: ${err.reason}`);
      e.field = err.field;
      throw e;
    }
    throw err;
  }
}

function jAttrs(kvs: unknown[], ctx: Ctx): Attributes {
  const out: Attributes = {}; // plain object: safe, see "Prototype safety" above
  let i = 0;
  try {
    for (; i < kvs.length; i++) {
      const kv = kvs[i];
      if (!isObj(kv)) throw new SpanReject('attribute is not an object');
      hostileObject(kv);
      if (typeof kv.key !== 'string') throw new SpanReject('attribute key is not a string');
      const key = attrKey(kv.key, ctx);
      out[key] = jValue(kv.value, 0, ctx, key);
    }
  } catch (err) {
    const kv = kvs[i];
    throw located(err, attrSegment(isObj(kv) ? kv.key : undefined, i));
  }
  return out;
}

function jInt(v: unknown, key: string): number | string {
  if (typeof v === 'number') {
    if (Number.isSafeInteger(v)) return v;
    if (Number.isInteger(v)) return BigInt(v).toString();
    throw new SpanReject(`attribute "${key}": intValue is not an integer`);
  }
  if (typeof v === 'string') {
    const neg = v.charCodeAt(0) === 45;
    if (!isDigits(v, neg ? 1 : 0)) throw new SpanReject(`attribute "${key}": intValue is not an integer`);
    if (v.length <= 15) return Number(v);
    const b = BigInt(v);
    if (b > 9223372036854775807n || b < -9223372036854775808n) throw new SpanReject(`attribute "${key}": intValue is out of int64 range`);
    return b <= 9007199254740991n && b >= -9007199254740991n ? Number(b) : b.toString();
  }
  throw new SpanReject(`attribute "${key}": intValue is not an integer`);
}

function jDouble(v: unknown, key: string): number | string {
  if (typeof v === 'number') return finiteOrString(v); // 1e400 parses to Infinity
  if (typeof v === 'string') {
    if (v === 'NaN' || v === 'Infinity' || v === '-Infinity') return v;
    const n = Number(v);
    if (v.trim() !== '' && !Number.isNaN(n)) return finiteOrString(n);
  }
  throw new SpanReject(`attribute "${key}": doubleValue is not a number`);
}

function jValue(v: unknown, depth: number, ctx: Ctx, topKey: string): AttrValue {
  if (v === undefined || v === null) return null;
  if (!isObj(v)) throw new SpanReject(`attribute "${topKey}": value is not an AnyValue object`);
  hostileObject(v);
  let x: unknown;
  if ((x = v.stringValue) !== undefined) {
    if (typeof x !== 'string') throw new SpanReject(`attribute "${topKey}": stringValue is not a string`);
    return limitStr(x, ctx, topKey);
  }
  if ((x = v.intValue) !== undefined) return jInt(x, topKey);
  if ((x = v.boolValue) !== undefined) {
    if (typeof x !== 'boolean') throw new SpanReject(`attribute "${topKey}": boolValue is not a boolean`);
    return x;
  }
  if ((x = v.doubleValue) !== undefined) return jDouble(x, topKey);
  if ((x = v.arrayValue) !== undefined) {
    if (depth + 1 > ctx.limits.maxDepth) throw tooDeep(ctx.limits);
    if (!isObj(x)) throw new SpanReject(`attribute "${topKey}": arrayValue is not an object`);
    hostileObject(x);
    const vals = jArr(x.values, `attribute "${topKey}" arrayValue.values`, true);
    const arr: AttrValue[] = new Array(vals.length);
    for (let i = 0; i < vals.length; i++) arr[i] = jValue(vals[i], depth + 1, ctx, topKey);
    return arr;
  }
  if ((x = v.kvlistValue) !== undefined) {
    if (depth + 1 > ctx.limits.maxDepth) throw tooDeep(ctx.limits);
    if (!isObj(x)) throw new SpanReject(`attribute "${topKey}": kvlistValue is not an object`);
    hostileObject(x);
    const vals = jArr(x.values, `attribute "${topKey}" kvlistValue.values`, true);
    const obj: { [k: string]: AttrValue } = {};
    for (const kv of vals) {
      if (!isObj(kv)) throw new SpanReject(`attribute "${topKey}": malformed kvlistValue entry`);
      hostileObject(kv);
      if (typeof kv.key !== 'string') throw new SpanReject(`attribute "${topKey}": malformed kvlistValue entry`);
      obj[nestedKey(kv.key, ctx, topKey)] = jValue(kv.value, depth + 1, ctx, topKey);
    }
    return obj;
  }
  if ((x = v.bytesValue) !== undefined) {
    if (typeof x !== 'string' || !isBase64(x)) throw new SpanReject(`attribute "${topKey}": bytesValue is not base64`);
    return Buffer.from(x, x.includes('-') || x.includes('_') ? 'base64url' : 'base64').toString('base64');
  }
  return null;
}
