// One error type for every route: rendered as { "error": { "code", "message", "details" } }.
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

export const badRequest = (message: string, details?: unknown) => new HttpError(400, 'invalid_request', message, details);
