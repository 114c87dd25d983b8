// The OTLP/HTTP wire protocol: request decoding (protobuf and JSON) and response encoding.
export {
  decodeOtlpRequest,
  decodeOtlpLogsRequest,
  otlpLimits,
  OtlpDecodeError,
  CONTENT_KEYS,
  TRUNCATED_ATTR,
  NODES_PER_SPAN,
  maxNodesOf,
  truncateUtf8,
  type OtlpLimits,
  type OtlpEncoding,
  type NormalizedRequest,
  type NormalizedResourceSpans,
  type NormalizedScopeSpans,
  type NormalizedScope,
  type NormalizedSpan,
  type NormalizedEvent,
  type NormalizedLink,
} from './decode.ts';
export {
  encodeExportResponse,
  encodeStatus,
  rpcCodeForHttp,
  CONTENT_TYPES,
  type PartialSuccess,
  type FieldViolation,
} from './encode.ts';
