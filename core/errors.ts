// What went wrong, told apart by kind, not by transport or wording. Each route family renders a kind in its own shape
// and status (collector/http/errors.ts); an error crosses a worker thread as its fields (toWire, fromWire), so an
// outage is still recognised by its kind on the other side.

/** Every kind of failure a caller is told about; collector/http/errors.ts gives each one HTTP status. */
export const ERROR_KINDS = [
  'invalid', // the request is malformed or breaks a rule: fix it, do not retry
  'unauthenticated', // no valid credential
  'forbidden', // a valid credential that may not do this (or a policy blocks it)
  'not_found',
  'method_not_allowed',
  'timeout', // the client was too slow sending its request
  'conflict', // already done (a replayed delivery), or raced another change
  'too_large', // over a size limit
  'unsupported', // a content type, charset or encoding not accepted
  'expectation_failed',
  'rate_limited',
  'internal', // a bug: never retried, never detailed
  'upstream_failed', // a provider or model server answered wrongly or not at all
  'unavailable', // storage, the spool or the server cannot take it now
  'upstream_timeout',
] as const;
export type ErrorKind = (typeof ERROR_KINDS)[number];

/** Kinds worth retrying as they are (after Retry-After when given). */
const RETRYABLE: ReadonlySet<ErrorKind> = new Set([
  'timeout',
  'rate_limited',
  'upstream_failed',
  'unavailable',
  'upstream_timeout',
]);

export interface ErrorOptions {
  details?: unknown;
  /** Seconds the caller should wait before retrying (rendered as Retry-After). */
  retryAfterSeconds?: number;
  /** The failing dependency's own code: a system error's (ECONNREFUSED), ClickHouse's number. Never shown as text. */
  dependencyCode?: string;
  cause?: unknown;
}

export class TracegateError extends Error {
  readonly kind: ErrorKind;
  /** Stable machine-readable code within the kind (`payload_too_large`, `storage_unreachable`). */
  readonly code: string;
  readonly details: unknown;
  readonly retryAfterSeconds: number | undefined;
  readonly dependencyCode: string | undefined;
  /** Items refused by this answer, for the audit record (a request is one item unless it says otherwise). */
  rejectedItems?: number;
  constructor(kind: ErrorKind, code: string, message: string, opts: ErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.kind = kind;
    this.code = code;
    this.details = opts.details ?? null;
    this.retryAfterSeconds = opts.retryAfterSeconds;
    this.dependencyCode = opts.dependencyCode;
  }

  get retryable(): boolean {
    return RETRYABLE.has(this.kind);
  }
}

/** The pipeline is over its spool bound or storage is failing: retry later. */
export class BackpressureError extends TracegateError {
  constructor(message = 'storage is unavailable and the spool is full; retry later', retryAfterSeconds = 5) {
    super('unavailable', 'unavailable', message, { retryAfterSeconds });
  }
}

/** Storage is down, hung or too slow to answer a read; the code ingestion uses for the same outage. */
export class StorageUnavailableError extends TracegateError {
  constructor(message = 'storage is unavailable; retry later', retryAfterSeconds = 5) {
    super('unavailable', 'unavailable', message, { retryAfterSeconds });
  }
}

/** A spool append failed (disk full, I/O error): nothing of it was acknowledged; the pipeline answers 503. */
export class SpoolWriteError extends Error {
  override readonly name = 'SpoolWriteError';
}

/**
 * Storage is reachable but configured wrongly (a ClickHouse cluster that does not match the settings): the start
 * stops with the message rather than retrying. Matched by name, since it crosses the storage thread.
 */
export class StorageConfigError extends Error {
  override name = 'StorageConfigError';
}

export const badRequest = (message: string, details?: unknown) =>
  new TracegateError('invalid', 'invalid_request', message, { details });
/** A bad query parameter, named as the route's own query validation names it. */
export const badQuery = (field: string, message: string) =>
  new TracegateError('invalid', 'invalid_query', `${field}: ${message}`, { details: [{ field, message }] });

/** Codes storage failures carry once classified where they happen (storage/errors.ts). */
export const STORAGE_UNREACHABLE = 'storage_unreachable';
export const STORAGE_OUT_OF_MEMORY = 'storage_out_of_memory';

/** Storage cannot be reached (refused, reset, timed out, its worker gone, not started yet): answered 503, not 500. */
export const storageUnreachable = (message: string, opts: Omit<ErrorOptions, 'details'> = {}) =>
  new TracegateError('unavailable', STORAGE_UNREACHABLE, message, { retryAfterSeconds: 5, ...opts });

/** Storage is up but had no memory for this call now: 503 too, without taking storage for down. */
export const storageOutOfMemory = (message: string, opts: Omit<ErrorOptions, 'details'> = {}) =>
  new TracegateError('unavailable', STORAGE_OUT_OF_MEMORY, message, { retryAfterSeconds: 5, ...opts });

export function isStorageOutage(err: unknown): boolean {
  return err instanceof TracegateError && err.code === STORAGE_UNREACHABLE;
}

export function isStorageOutOfMemory(err: unknown): boolean {
  return err instanceof TracegateError && err.code === STORAGE_OUT_OF_MEMORY;
}

/** An error as a message between threads carries it (structured clone keeps plain fields only). */
export interface WireError {
  name: string;
  message: string;
  kind?: ErrorKind;
  code?: string;
  details?: unknown;
  retryAfterSeconds?: number;
  dependencyCode?: string;
  rejectedItems?: number;
}

export function toWire(err: unknown): WireError {
  const e = err instanceof Error ? err : new Error(String(err));
  if (e instanceof TracegateError) {
    return {
      name: e.name,
      message: e.message,
      kind: e.kind,
      code: e.code,
      details: e.details,
      ...(e.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: e.retryAfterSeconds }),
      ...(e.dependencyCode === undefined ? {} : { dependencyCode: e.dependencyCode }),
      ...(e.rejectedItems === undefined ? {} : { rejectedItems: e.rejectedItems }),
    };
  }
  // A system error's code (ECONNREFUSED) or ClickHouse's ('27') says what failed without quoting any data.
  const code = (e as { code?: unknown }).code;
  return { name: e.name, message: e.message, ...(typeof code === 'string' ? { code } : {}) };
}

const BUILTIN_ERRORS: Record<string, ErrorConstructor> = { RangeError, TypeError, SyntaxError };

/** The error as the other thread threw it, as far as a message can carry it: its kind, or a built-in class. */
export function fromWire(w: WireError): Error {
  if (w.kind) {
    const err = new TracegateError(w.kind, w.code ?? w.kind, w.message, {
      details: w.details,
      retryAfterSeconds: w.retryAfterSeconds,
      dependencyCode: w.dependencyCode,
    });
    if (w.rejectedItems !== undefined) err.rejectedItems = w.rejectedItems;
    return err;
  }
  const Ctor = BUILTIN_ERRORS[w.name];
  const err = Ctor ? new Ctor(w.message) : Object.assign(new Error(w.message), { name: w.name });
  return w.code === undefined ? err : Object.assign(err, { code: w.code });
}
