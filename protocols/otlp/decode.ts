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
// never runs (`constructor` or `prototype` simply become own properties). (Not null-prototype objects:
// they are dictionary-mode in V8, and copying an attribute set with `{...a}` is then many times
// slower than for a plain object — per span, on the hot path.) JSON bodies are
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
import type { NormalizedRequest, OtlpEncoding, OtlpLimits } from './normalized.ts';
import { decodeLogsProtobuf, decodeProtobuf } from './decode-protobuf.ts';
import { decodeJson, decodeLogsJson } from './decode-json.ts';

export {
  otlpLimits,
  OtlpDecodeError,
  CONTENT_KEYS,
  TRUNCATED_ATTR,
  MAX_ATTRIBUTE_KEY_BYTES,
  NODES_PER_SPAN,
  maxNodesOf,
  truncateUtf8,
  cutMarked,
  u64ToDecimal,
  type OtlpLimits,
  type OtlpEncoding,
  type NormalizedRequest,
  type NormalizedResourceSpans,
  type NormalizedScopeSpans,
  type NormalizedScope,
  type NormalizedSpan,
  type NormalizedEvent,
  type NormalizedLink,
} from './normalized.ts';
export { prescanProtobuf } from './prescan.ts';

/** Decode an OTLP/HTTP ExportTraceServiceRequest body (already decompressed). Throws OtlpDecodeError. */
export function decodeOtlpRequest(
  body: Buffer | Uint8Array,
  contentType: OtlpEncoding,
  limits: OtlpLimits,
): NormalizedRequest {
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return contentType === 'protobuf' ? decodeProtobuf(buf, limits) : decodeJson(buf, limits);
}

/** Decode an OTLP/HTTP ExportLogsServiceRequest body: one event span per log record with a span context (logs.ts). */
export function decodeOtlpLogsRequest(
  body: Buffer | Uint8Array,
  contentType: OtlpEncoding,
  limits: OtlpLimits,
): NormalizedRequest {
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return contentType === 'protobuf' ? decodeLogsProtobuf(buf, limits) : decodeLogsJson(buf, limits);
}
