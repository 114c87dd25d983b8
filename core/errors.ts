// One error type for every route: rendered as { "error": { "code", "message", "details" } }.
import { StorageNotReadyError } from '../storage/startup.ts';

export class HttpError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;
  readonly headers: Record<string, string>;
  /** Items refused by this answer, for the audit record (a request is one item unless it says otherwise). */
  rejectedItems?: number;
  constructor(status: number, code: string, message: string, details?: unknown, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details ?? null;
    this.headers = headers;
  }
}

/** Thrown by the pipeline when the spool is over its bound or storage is failing: 503 + Retry-After. */
export class BackpressureError extends HttpError {
  constructor(message = 'storage is unavailable and the spool is full; retry later', retryAfterSeconds = 5) {
    super(503, 'unavailable', message, null, { 'Retry-After': String(retryAfterSeconds) });
  }
}

/** A spool append failed (disk full, I/O error): nothing of it was acknowledged; the pipeline answers 503. */
export class SpoolWriteError extends Error {
  override readonly name = 'SpoolWriteError';
}

export const badRequest = (message: string, details?: unknown) =>
  new HttpError(400, 'invalid_request', message, details);
/** A bad query parameter, named as the route's own query validation names it. */
export const badQuery = (field: string, message: string) =>
  new HttpError(400, 'invalid_query', `${field}: ${message}`, [{ field, message }]);

/**
 * Storage is down, hung or too slow to answer a read: 503 + Retry-After, with the code ingestion uses for the same
 * outage (`unavailable`), so a client handles both alike.
 */
export class StorageUnavailableError extends HttpError {
  constructor(message = 'storage is unavailable; retry later', retryAfterSeconds = 5) {
    super(503, 'unavailable', message, null, { 'Retry-After': String(retryAfterSeconds) });
  }
}

/** Set on an error by the storage client when the error is an outage (see isStorageOutage), not a fault of the call. */
export const STORAGE_OUTAGE = Symbol.for('tracegate.storageOutage');

/** Network failures on the way to storage, by errno code. */
const OUTAGE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/**
 * The same as they read once they crossed the storage thread (only name and message do): `connect ECONNREFUSED
 * host:port`, `read ECONNRESET`, `socket hang up`, the ClickHouse client's `Timeout error.` (a call that "timed
 * out" otherwise), the storage worker's own failures (`storage worker exited (code 1)`, `storage is closed`), and
 * DuckDB's invalidated database (its FATAL errors, e.g. a checkpoint on a full disk, and storage/duckdb.ts's
 * `DuckDB database unavailable (reopening …)` until it has reopened it).
 */
const OUTAGE_MESSAGE =
  /\b(?:ECONNREFUSED|ECONNRESET|ECONNABORTED|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|EHOSTDOWN|ENOTFOUND|EAI_AGAIN)\b|^socket hang up$|^Timeout error\.$|\btimed out\b|^storage worker exited \(code -?\d+\)$|^storage is closed$|^FATAL Error: |^DuckDB database unavailable \(reopening\b/;

/**
 * Whether `err`, thrown by a storage call, means storage cannot be reached (refused, reset, timed out, its worker
 * gone) rather than a fault of the call: the former is answered 503, the latter stays a 500. HTTP errors keep
 * their own status; a TypeError or a ClickHouse/DuckDB error about the query is never an outage.
 */
export function isStorageOutage(err: unknown): boolean {
  if (!(err instanceof Error) || err instanceof HttpError) return false;
  if ((err as { [STORAGE_OUTAGE]?: boolean })[STORAGE_OUTAGE] === true) return true;
  if (err instanceof StorageNotReadyError) return true; // started while ClickHouse was down, not reachable yet
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && OUTAGE_CODES.has(code)) return true;
  // ClickHouse itself reporting a server it cannot reach (a cluster's shard down): 209 SOCKET_TIMEOUT,
  // 210 NETWORK_ERROR, 279 ALL_CONNECTION_TRIES_FAILED.
  if (err.name === 'ClickHouseError')
    return (
      /^Code: (209|210|279)\b|\b(ALL_CONNECTION_TRIES_FAILED|NETWORK_ERROR|SOCKET_TIMEOUT)\b/.test(err.message) ||
      ['209', '210', '279'].includes(String((err as { code?: unknown }).code))
    );
  if (err.name !== 'Error') return false; // TypeError, RangeError, SyntaxError…: a bug, not an outage
  return OUTAGE_MESSAGE.test(err.message);
}

/**
 * Whether a storage call failed for want of memory at that moment: DuckDB's "Out of Memory Error" (its memory limit
 * reached, other reads and inserts holding the rest) or ClickHouse's MEMORY_LIMIT_EXCEEDED (code 241). Storage is
 * up, so this is not an outage; a read failing so is answered 503 + Retry-After all the same (see ReadGate).
 */
export function isStorageOutOfMemory(err: unknown): boolean {
  if (!(err instanceof Error) || err instanceof HttpError) return false;
  if (err.name !== 'Error' && err.name !== 'ClickHouseError') return false; // TypeError, RangeError…: a bug
  return /^Out of Memory Error\b|^Code: 241\b|\bMEMORY_LIMIT_EXCEEDED\b/.test(err.message);
}

/**
 * For the app's last-resort error handler: an error the storage client has already marked as an outage (or the
 * not-yet-reachable storage of a collector started during one). Unmarked network errors (a webhook, a provider)
 * are not storage's and stay 500s.
 */
export function isMarkedStorageOutage(err: unknown): boolean {
  return (
    err instanceof StorageNotReadyError ||
    (err instanceof Error && (err as { [STORAGE_OUTAGE]?: boolean })[STORAGE_OUTAGE] === true)
  );
}

/** Marks `err` as a storage outage when it is one (see isStorageOutage); returns it. */
export function markStorageOutage<E>(err: E): E {
  if (err instanceof Error && isStorageOutage(err))
    Object.defineProperty(err, STORAGE_OUTAGE, { value: true, enumerable: false });
  return err;
}
