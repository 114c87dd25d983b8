/** What went wrong, as the SDK reports it to `onError`. The SDK never throws these into the application. */
export type TracegateErrorCode =
  /** No API key: the client sends nothing. */
  | 'disabled'
  /** A call's arguments could not make a valid item (no target for a vote, a tool call without a name, a cycle). */
  | 'invalid_argument'
  /** The queue was full: the oldest items were dropped (`count` of them). */
  | 'queue_full'
  /** The server could not be reached, or the connection broke. */
  | 'network'
  /** No answer within `timeoutMs`. */
  | 'timeout'
  /** 401 or 403: the key is missing, wrong or revoked. Not retried. */
  | 'unauthorized'
  /** The server refused some items of a batch (validation): `details` holds its per-item answers. Not retried. */
  | 'rejected'
  /** Any other answer that retrying cannot fix (404 on a server without the route, 413 for one item, 415…). */
  | 'http'
  /** A retryable failure (network, 408, 429, 5xx) persisted past `maxRetries`: the batch was dropped. */
  | 'retries_exhausted'
  /** Items still queued when `shutdown()` (or the exit flush) ran out of time were dropped. */
  | 'shutdown'
  /** A wrapped client was wrapped again (the second wrap does nothing). */
  | 'already_wrapped'
  /** A defect in the SDK itself, caught so that it cannot reach the application. */
  | 'internal';

export class TracegateError extends Error {
  readonly code: TracegateErrorCode;
  /** The HTTP status, when the server answered. */
  readonly status: number | undefined;
  /** How many items (traces, votes, tool calls) the error cost. */
  readonly count: number;
  /** The route the items were for. */
  readonly route: string | undefined;
  /** The server's error body or per-item results, when there is one. */
  readonly details: unknown;

  constructor(
    code: TracegateErrorCode,
    message: string,
    extra: { status?: number; count?: number; route?: string; details?: unknown; cause?: unknown } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'TracegateError';
    this.code = code;
    this.status = extra.status;
    this.count = extra.count ?? 0;
    this.route = extra.route;
    this.details = extra.details;
  }
}
