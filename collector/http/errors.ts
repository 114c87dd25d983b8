// Errors at the HTTP edge: a status per kind, the headers an answer carries, and the three shapes route families
// answer in: the JSON envelope `{ error: { code, message, details } }`, OTLP's google.rpc.Status in the request's
// encoding, and the provider's `{ error: { message, type, param, code } }` on the proxy routes.
import type { Context } from 'koa';
import {
  type ErrorKind,
  isStorageOutage,
  isStorageOutOfMemory,
  StorageUnavailableError,
  TracegateError,
} from '../../core/errors.ts';
import type { Logger } from '../../platform/logger.ts';
import { encodeStatus, type FieldViolation, type OtlpEncoding, rpcCodeForHttp } from '../../protocols/otlp/index.ts';

const STATUS: Readonly<Record<ErrorKind, number>> = {
  invalid: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  timeout: 408,
  conflict: 409,
  too_large: 413,
  unsupported: 415,
  expectation_failed: 417,
  rate_limited: 429,
  internal: 500,
  upstream_failed: 502,
  unavailable: 503,
  upstream_timeout: 504,
};
const KIND_OF_STATUS = new Map(Object.entries(STATUS).map(([kind, status]) => [status, kind as ErrorKind]));

/** An error raised at the HTTP edge, by status, with headers of its own (Allow, WWW-Authenticate, Connection). */
export class HttpError extends TracegateError {
  readonly headers: Record<string, string>;
  constructor(status: number, code: string, message: string, details?: unknown, headers: Record<string, string> = {}) {
    const kind = KIND_OF_STATUS.get(status);
    if (!kind) throw new Error(`no error kind answers HTTP ${status}`);
    super(kind, code, message, { details });
    this.headers = headers;
  }
  get status(): number {
    return STATUS[this.kind];
  }
}

export const statusOf = (err: TracegateError): number => STATUS[err.kind];

/** Retry-After from the error's retry hint, then any headers it was raised with. */
export function headersOf(err: TracegateError): Record<string, string> {
  const own = err instanceof HttpError ? err.headers : {};
  return err.retryAfterSeconds === undefined ? own : { 'Retry-After': String(err.retryAfterSeconds), ...own };
}

/**
 * What a caller may be told: a TracegateError as it is, except storage's own failures, whose messages can quote the
 * data they choked on (the generic 503 instead); anything else is a bug, logged and answered 500 without detail.
 */
export function publicError(err: unknown, log?: Pick<Logger, 'warn' | 'error'>): TracegateError {
  if (isStorageOutage(err) || isStorageOutOfMemory(err)) {
    log?.warn({ err }, 'storage unavailable');
    return new StorageUnavailableError();
  }
  if (err instanceof TracegateError) return err;
  log?.error({ err }, 'unhandled error');
  return new HttpError(500, 'internal', 'internal error');
}

/** The shapes a route family answers its errors in. */
export type ErrorFamily = 'envelope' | 'rpc-status' | 'provider';

function setStatus(ctx: Context, err: TracegateError): void {
  ctx.status = statusOf(err);
  for (const [k, v] of Object.entries(headersOf(err))) ctx.set(k, v);
}

export function renderEnvelope(ctx: Context, err: TracegateError): void {
  setStatus(ctx, err);
  ctx.body = { error: { code: err.code, message: err.message, details: err.details } };
}

/** The encoding OTLP answers in: the request's. */
export function otlpEncodingOf(ctx: Context): OtlpEncoding {
  const type = (ctx.get('content-type') || '').split(';')[0]!.trim().toLowerCase();
  return type === 'application/x-protobuf' || type === 'application/protobuf' ? 'protobuf' : 'json';
}

/** The spec: reply with the Content-Type received (set as a header: ctx.type would add a charset). */
export function otlpReplyType(ctx: Context, enc: OtlpEncoding): string {
  const type = (ctx.get('content-type') || '').split(';')[0]!.trim().toLowerCase();
  if (type === 'application/protobuf') return type;
  return enc === 'protobuf' ? 'application/x-protobuf' : 'application/json';
}

/** Field violations for Status.details (a google.rpc.BadRequest), when the error knows where the problem is. */
function violationsOf(err: TracegateError): FieldViolation[] | undefined {
  const field = (err as { field?: unknown }).field;
  if (field !== undefined) return field !== null ? [{ field: String(field), description: err.message }] : undefined;
  if (!Array.isArray(err.details)) return undefined;
  return (err.details as Array<{ field?: string; message?: string }>).map((d) => ({
    field: String(d.field ?? ''),
    description: String(d.message ?? ''),
  }));
}

export function renderRpcStatus(ctx: Context, err: TracegateError): void {
  const enc = otlpEncodingOf(ctx);
  setStatus(ctx, err);
  ctx.set('Content-Type', otlpReplyType(ctx, enc));
  ctx.body = encodeStatus(rpcCodeForHttp(statusOf(err)), err.message, enc, violationsOf(err));
}

/** The provider's error shape; `details` may name the provider's `type` and `param` and add a `tracegate` object. */
export function renderProvider(ctx: Context, err: TracegateError): void {
  setStatus(ctx, err);
  const extra = (err.details && typeof err.details === 'object' ? err.details : {}) as Record<string, unknown>;
  ctx.body = {
    error: {
      message: err.message,
      type: extra.type ?? 'tracegate_error',
      param: extra.param ?? null,
      code: err.code,
      ...(extra.tracegate ? { tracegate: extra.tracegate } : {}),
    },
  };
}

export const RENDER: Readonly<Record<ErrorFamily, (ctx: Context, err: TracegateError) => void>> = {
  envelope: renderEnvelope,
  'rpc-status': renderRpcStatus,
  provider: renderProvider,
};

/** Middleware rendering every failure after it in a family's shape (a bug as a generic 500 of that shape). */
export function errorsIn(family: ErrorFamily) {
  const render = RENDER[family];
  return async (ctx: Context, next: () => Promise<unknown>): Promise<void> => {
    try {
      await next();
    } catch (caught) {
      render(ctx, publicError(caught, ctx.state.log as Logger | undefined));
    }
  };
}
