// OTLP/HTTP response bodies. The reply uses the request's encoding (spec: the server
// MUST answer with the Content-Type it received).
//   200 → ExportTraceServiceResponse (partial_success unset on full success)
//   4xx/5xx → google.rpc.Status { code, message, details }
import { BAD_REQUEST_TYPE_URL, ExportTraceServiceResponse, RpcBadRequest, RpcStatus } from './schema.ts';
import type { OtlpEncoding } from './decode.ts';

export const CONTENT_TYPES: Record<OtlpEncoding, string> = {
  protobuf: 'application/x-protobuf',
  json: 'application/json',
};

export interface PartialSuccess {
  rejectedSpans: number;
  errorMessage: string;
}

/**
 * ExportTraceServiceResponse (or ExportLogsServiceResponse, byte for byte the same in protobuf). `partial` null (or 0 rejected and no message) → full success:
 * an empty protobuf message (0 bytes) or `{}`; otherwise `partialSuccess` is set — in JSON
 * `rejectedSpans` is an int64 and therefore a decimal string.
 */
export function encodeExportResponse(
  partial: PartialSuccess | null,
  encoding: 'protobuf',
  signal?: 'traces' | 'logs',
): Buffer;
export function encodeExportResponse(
  partial: PartialSuccess | null,
  encoding: 'json',
  signal?: 'traces' | 'logs',
): string;
export function encodeExportResponse(
  partial: PartialSuccess | null,
  encoding: OtlpEncoding,
  signal?: 'traces' | 'logs',
): Buffer | string;
export function encodeExportResponse(
  partial: PartialSuccess | null,
  encoding: OtlpEncoding,
  signal: 'traces' | 'logs' = 'traces',
): Buffer | string {
  const set = partial !== null && (partial.rejectedSpans > 0 || partial.errorMessage !== '');
  if (encoding === 'json') {
    if (!set) return '{}';
    // ExportLogsPartialSuccess names its count rejectedLogRecords; on the wire both are field 1 (int64).
    const count = String(Math.max(0, Math.floor(partial.rejectedSpans)));
    return JSON.stringify({
      partialSuccess: {
        [signal === 'logs' ? 'rejectedLogRecords' : 'rejectedSpans']: count,
        errorMessage: partial.errorMessage,
      },
    });
  }
  if (!set) return Buffer.alloc(0);
  const ps: Record<string, unknown> = {};
  if (partial.rejectedSpans > 0) ps.rejectedSpans = Math.floor(partial.rejectedSpans);
  if (partial.errorMessage !== '') ps.errorMessage = partial.errorMessage;
  return bytes(
    ExportTraceServiceResponse.encode(ExportTraceServiceResponse.fromObject({ partialSuccess: ps })).finish(),
  );
}

/** google.rpc.Code for an HTTP status (for Status.code). */
export function rpcCodeForHttp(httpStatus: number): number {
  switch (httpStatus) {
    case 400:
      return 3; // INVALID_ARGUMENT
    case 401:
      return 16; // UNAUTHENTICATED
    case 403:
      return 7; // PERMISSION_DENIED
    case 404:
      return 5; // NOT_FOUND
    case 405:
      return 12; // UNIMPLEMENTED: the method is not served here
    case 413:
      return 11; // OUT_OF_RANGE
    case 415:
      return 3; // INVALID_ARGUMENT
    case 429:
      return 8; // RESOURCE_EXHAUSTED
    case 501:
      return 12; // UNIMPLEMENTED
    case 503:
      return 14; // UNAVAILABLE
    case 504:
      return 4; // DEADLINE_EXCEEDED
    default:
      return httpStatus >= 500 ? 13 /* INTERNAL */ : 2 /* UNKNOWN */;
  }
}

export interface FieldViolation {
  field: string;
  description: string;
}

/**
 * google.rpc.Status. `code` is a google.rpc.Code (see rpcCodeForHttp). When `violations`
 * are given they travel as a google.rpc.BadRequest in `details` (google.protobuf.Any; in
 * JSON the proto3 Any form `{"@type": …, "fieldViolations": […]}`).
 */
export function encodeStatus(
  code: number,
  message: string,
  encoding: 'protobuf',
  violations?: FieldViolation[],
): Buffer;
export function encodeStatus(code: number, message: string, encoding: 'json', violations?: FieldViolation[]): string;
export function encodeStatus(
  code: number,
  message: string,
  encoding: OtlpEncoding,
  violations?: FieldViolation[],
): Buffer | string;
export function encodeStatus(
  code: number,
  message: string,
  encoding: OtlpEncoding,
  violations?: FieldViolation[],
): Buffer | string {
  const hasDetails = violations !== undefined && violations.length > 0;
  if (encoding === 'json') {
    const o: Record<string, unknown> = { code, message };
    if (hasDetails) o.details = [{ '@type': BAD_REQUEST_TYPE_URL, fieldViolations: violations }];
    return JSON.stringify(o);
  }
  const o: Record<string, unknown> = { message };
  if (code !== 0) o.code = code;
  if (hasDetails) {
    const value = RpcBadRequest.encode(RpcBadRequest.fromObject({ fieldViolations: violations })).finish();
    o.details = [{ typeUrl: BAD_REQUEST_TYPE_URL, value }];
  }
  return bytes(RpcStatus.encode(RpcStatus.fromObject(o)).finish());
}

function bytes(u: Uint8Array): Buffer {
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}
