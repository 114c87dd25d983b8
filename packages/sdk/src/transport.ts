// One POST of one batch, and what its answer means for the batch: sent, retry later, or give up.
import { TracegateError } from './errors.ts';
import type { Lane } from './queue.ts';

export const ROUTES: Record<Lane, string> = {
  traces: '/api/traces',
  feedback: '/api/ingest/feedback',
  toolCalls: '/api/ingest/tool-calls',
};

/** The body of a batch: the native route takes a JSON array; the signal routes a named list. */
export function batchBody(lane: Lane, jsonItems: readonly string[]): string {
  const list = `[${jsonItems.join(',')}]`;
  if (lane === 'traces') return list;
  return lane === 'feedback' ? `{"feedback":${list}}` : `{"tool_calls":${list}}`;
}

export type Outcome =
  /** 2xx. `rejected`: items the server refused inside an accepted batch (207, or a 200 naming some). */
  | { kind: 'sent'; rejected?: TracegateError }
  | { kind: 'retry'; error: TracegateError; retryAfterMs: number | undefined }
  | { kind: 'split' }
  | { kind: 'fail'; error: TracegateError };

export interface PostArgs {
  fetch: typeof fetch;
  url: string;
  route: string;
  headers: Record<string, string>;
  body: string;
  items: number;
  timeoutMs: number;
  /** Aborted by shutdown: the request ends at once and the batch is given up. */
  stop: AbortSignal;
}

/** Statuses a later attempt can succeed on. */
const RETRYABLE = new Set([408, 425, 429]);

export async function postBatch(a: PostArgs): Promise<Outcome> {
  const ctl = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort();
  }, a.timeoutMs);
  const onStop = () => ctl.abort();
  a.stop.addEventListener('abort', onStop);
  const extra = { route: a.route, count: a.items };
  try {
    const res = await a.fetch(a.url, { method: 'POST', headers: a.headers, body: a.body, signal: ctl.signal });
    const text = await res.text();
    return classify(res.status, text, res.headers.get('retry-after'), extra);
  } catch (err) {
    if (a.stop.aborted) {
      return {
        kind: 'fail',
        error: new TracegateError('shutdown', 'shut down while sending', { ...extra, cause: err }),
      };
    }
    const error = timedOut
      ? new TracegateError('timeout', `no answer from ${a.route} within ${a.timeoutMs} ms`, { ...extra, cause: err })
      : new TracegateError('network', `could not reach ${a.route}: ${describe(err)}`, { ...extra, cause: err });
    return { kind: 'retry', error, retryAfterMs: undefined };
  } finally {
    clearTimeout(timer);
    a.stop.removeEventListener('abort', onStop);
  }
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } } | undefined;
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text || undefined;
  }
}

/** The server's own words about an error, from `{"error":{"code","message"}}`. */
function serverMessage(body: unknown): string {
  const e = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (e && typeof e.message === 'string') return typeof e.code === 'string' ? `${e.code}: ${e.message}` : e.message;
  return typeof body === 'string' ? body.slice(0, 200) : '';
}

/** Items refused inside a batch: the native route's per-item results, or a `rejected` count. */
function refusedItems(body: unknown): { count: number; details: unknown } | undefined {
  const b = body as { rejected?: unknown; results?: unknown } | undefined;
  if (!b || typeof b !== 'object') return undefined;
  const failed = Array.isArray(b.results) ? b.results.filter((r) => r && typeof r === 'object' && 'error' in r) : [];
  const count = typeof b.rejected === 'number' ? b.rejected : failed.length;
  return count > 0 ? { count, details: failed.length ? failed : body } : undefined;
}

export function classify(
  status: number,
  text: string,
  retryAfter: string | null,
  extra: { route: string; count: number },
): Outcome {
  const body = parse(text);
  if (status >= 200 && status < 300) {
    const refused = refusedItems(body);
    if (!refused) return { kind: 'sent' };
    const rejected = new TracegateError('rejected', `${extra.route} refused ${refused.count} of ${extra.count} items`, {
      status,
      route: extra.route,
      count: refused.count,
      details: refused.details,
    });
    return { kind: 'sent', rejected };
  }
  const said = serverMessage(body);
  const message = `${extra.route} answered ${status}${said ? ` (${said})` : ''}`;
  const details = body;
  if (RETRYABLE.has(status) || status >= 500) {
    const error = new TracegateError('http', message, { status, details, ...extra });
    return { kind: 'retry', error, retryAfterMs: retryAfterMs(retryAfter) };
  }
  if (status === 413 && extra.count > 1) return { kind: 'split' };
  const code = status === 401 || status === 403 ? 'unauthorized' : status === 400 ? 'rejected' : 'http';
  return { kind: 'fail', error: new TracegateError(code, message, { status, details, ...extra }) };
}

/** `Retry-After` as milliseconds from now: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, nowMs = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/**
 * How long to wait before retry `attempt` (0-based): the server's `Retry-After` when it gave one (never earlier,
 * plus up to 10 % so that clients told the same second do not return together), else exponential backoff with
 * jitter (half fixed, half random); both capped at `maxMs`.
 */
export function retryDelayMs(
  attempt: number,
  retryAfter: number | undefined,
  baseMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  if (retryAfter !== undefined) return Math.min(maxMs, retryAfter + retryAfter * 0.1 * random());
  const exp = Math.min(maxMs, baseMs * 2 ** attempt);
  return exp / 2 + (exp / 2) * random();
}
