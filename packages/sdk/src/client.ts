// The Tracegate client: what the application calls. Every public method returns at once and never throws: items
// are queued for the exporter, and anything that goes wrong reaches `onError`.
import { TracegateError } from './errors.ts';
import { Exporter, type Stats } from './exporter.ts';
import { type Recorder, type WrapOptions, wrapClient } from './openai.ts';
import {
  type FeedbackInput,
  feedbackPayload,
  fromSpecCall,
  isPlainObject,
  type TraceInput,
  type TraceOptions,
  type ToolCallInput,
  toolCallPayload,
  tracePayload,
} from './payloads.ts';
import type { Lane } from './queue.ts';
import { envVar, newSpanId, newTraceId } from './runtime.ts';

export interface TracegateOptions {
  /** A workspace key (`tg_…`). Default: `TRACEGATE_API_KEY`. Without one the client sends nothing (one warning). */
  apiKey?: string;
  /** Default: `TRACEGATE_BASE_URL`, else `http://localhost:4318`. */
  baseUrl?: string;
  /** Send once this many items are queued (default 20). */
  flushAt?: number;
  /** …or this often, whatever is queued (default 1000 ms). */
  flushIntervalMs?: number;
  /** Past this many queued items the oldest are dropped and counted (default 10 000). */
  maxQueueSize?: number;
  /** Items per request (default 100; the server takes up to 1000). */
  maxBatchSize?: number;
  /** Bytes per request, approximately (default 1 MiB; one larger item goes alone). */
  maxBatchBytes?: number;
  /** Per request (default 10 000 ms). */
  timeoutMs?: number;
  /** Retries of a batch after a network error, 408, 425, 429 or 5xx (default 5). */
  maxRetries?: number;
  /** First backoff (default 500 ms), doubled per retry, half of it random. */
  retryBaseDelayMs?: number;
  /** Longest wait between retries, `Retry-After` included (default 30 000 ms). */
  retryMaxDelayMs?: number;
  /** How long `flush()`, `shutdown()` and the exit flush wait at most (default 10 000 ms). */
  flushTimeoutMs?: number;
  /** `immediate`: send each item as it comes (serverless: then `await flush()` before the handler returns). */
  exportMode?: 'batched' | 'immediate';
  /** Flush when a Node process is about to exit (`beforeExit`; default true). */
  flushOnExit?: boolean;
  /** Defaults for every trace. */
  actionName?: string;
  environment?: string;
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** Where errors go (default: a console warning, at most one per kind a minute). Never throws into the app. */
  onError?: (error: TracegateError) => void;
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof fetch;
}

const DEFAULTS = {
  baseUrl: 'http://localhost:4318',
  flushAt: 20,
  flushIntervalMs: 1000,
  maxQueueSize: 10_000,
  maxBatchSize: 100,
  maxBatchBytes: 1024 * 1024,
  timeoutMs: 10_000,
  maxRetries: 5,
  retryBaseDelayMs: 500,
  retryMaxDelayMs: 30_000,
  flushTimeoutMs: 10_000,
};
type Numeric = Exclude<keyof typeof DEFAULTS, 'baseUrl'>;
/** Options that may be 0. */
const ZERO_OK: ReadonlySet<Numeric> = new Set(['maxRetries', 'retryBaseDelayMs']);

/** A console warning per kind of error at most once a minute: an outage must not flood the application's log. */
function defaultOnError(): (e: TracegateError) => void {
  const last = new Map<string, number>();
  return (e) => {
    const now = Date.now();
    if (now - (last.get(e.code) ?? Number.NEGATIVE_INFINITY) < 60_000) return;
    last.set(e.code, now);
    console.warn(`[tracegate] ${e.code}: ${e.message}`);
  };
}

export class Tracegate {
  /** Whether the client sends anything (false without an API key or with an unusable base URL). */
  readonly enabled: boolean;
  readonly baseUrl: string;
  private readonly exporter: Exporter | undefined;
  private readonly onError: (e: TracegateError) => void;
  private readonly defaults: { actionName?: string; environment?: string };
  private readonly traceIds = new WeakMap<object, string>();

  constructor(options: TracegateOptions = {}) {
    const o: TracegateOptions = isPlainObject(options) ? options : {};
    const onError = typeof o.onError === 'function' ? o.onError : defaultOnError();
    this.onError = (e) => {
      try {
        onError(e);
      } catch {
        /* the application's handler must not break the SDK either */
      }
    };
    this.defaults = { actionName: o.actionName, environment: o.environment };
    this.baseUrl = (o.baseUrl ?? envVar('TRACEGATE_BASE_URL') ?? DEFAULTS.baseUrl).replace(/\/+$/, '');
    const apiKey = o.apiKey ?? envVar('TRACEGATE_API_KEY');
    this.exporter = this.start(o, apiKey);
    this.enabled = this.exporter !== undefined;
  }

  private start(o: TracegateOptions, apiKey: string | undefined): Exporter | undefined {
    try {
      if (!apiKey) {
        this.onError(new TracegateError('disabled', 'no API key (apiKey or TRACEGATE_API_KEY): nothing is sent'));
        return undefined;
      }
      if (!/^https?:$/.test(new URL(this.baseUrl).protocol)) throw new Error('not http(s)');
      const fetchFn = o.fetch ?? globalThis.fetch;
      if (typeof fetchFn !== 'function') throw new Error('no fetch in this runtime');
      return new Exporter({
        ...this.numbers(o),
        baseUrl: this.baseUrl,
        apiKey,
        headers: isPlainObject(o.headers) ? (o.headers as Record<string, string>) : {},
        fetch: fetchFn.bind(globalThis),
        immediate: o.exportMode === 'immediate',
        flushOnExit: o.flushOnExit !== false,
        report: this.onError,
      });
    } catch (err) {
      const message = `cannot send to ${JSON.stringify(this.baseUrl)}: ${(err as Error).message}; nothing is sent`;
      this.onError(new TracegateError('disabled', message, { cause: err }));
      return undefined;
    }
  }

  /** The numeric options, each a positive finite number (0 where that makes sense) or its default. */
  private numbers(o: TracegateOptions): Record<Numeric, number> {
    const out = {} as Record<Numeric, number>;
    for (const k of Object.keys(DEFAULTS) as Array<keyof typeof DEFAULTS>) {
      if (k === 'baseUrl') continue;
      const v = o[k];
      const ok = typeof v === 'number' && Number.isFinite(v) && (v > 0 || (v === 0 && ZERO_OK.has(k)));
      if (v !== undefined && !ok)
        this.onError(new TracegateError('invalid_argument', `${k} must be a positive number; using ${DEFAULTS[k]}`));
      out[k] = ok ? v : DEFAULTS[k];
    }
    return out;
  }

  /**
   * Records one completion. `trace(model, input, metadata)` is the spec's call: `input` the prompt, `metadata` a
   * free-form map whose `response` and `metrics` fill those fields. Or `trace({ model, prompt, response, … })`.
   * Returns the trace id (also the native `requestId`): give it to `feedback()` and `toolCall()`.
   */
  trace(model: string, input: unknown, metadata?: Record<string, unknown>): string;
  trace(options: TraceOptions): string;
  trace(a: unknown, b?: unknown, c?: unknown): string {
    let requestId = '';
    try {
      const t: TraceOptions = isPlainObject(a) && b === undefined && c === undefined ? a : fromSpecCall(a, b, c);
      requestId = typeof t.requestId === 'string' && t.requestId ? t.requestId : newTraceId();
      this.record({ ...t, requestId });
    } catch (err) {
      this.internal('trace', err);
    }
    return requestId || newTraceId();
  }

  /** A thumbs-up/down (or retraction) about a trace, span, provider response or request. */
  feedback(vote: FeedbackInput): void {
    try {
      const body = feedbackPayload(vote, { newId: newTraceId, nowMs: Date.now() });
      if (typeof body === 'string') return this.onError(new TracegateError('invalid_argument', body, { count: 1 }));
      this.send('feedback', body);
    } catch (err) {
      this.internal('feedback', err);
    }
  }

  /** A tool the application ran. Returns the ids it will be stored under (`traceId` absent when linked by `traceparent` or `responseId`). */
  toolCall(call: ToolCallInput): { traceId: string | undefined; spanId: string } {
    try {
      const out = toolCallPayload(call, { newTraceId, newSpanId });
      if (typeof out === 'string') {
        this.onError(new TracegateError('invalid_argument', out, { count: 1 }));
        return { traceId: undefined, spanId: '' };
      }
      this.send('toolCalls', out.body);
      return { traceId: out.traceId, spanId: out.spanId };
    } catch (err) {
      this.internal('toolCall', err);
      return { traceId: undefined, spanId: '' };
    }
  }

  /**
   * Traces every `responses.create` and `chat.completions.create` of an `openai` client (JSON and streamed), and
   * returns the same client. Wrapping it twice does nothing more.
   */
  wrapOpenAI<T extends object>(client: T, options: WrapOptions = {}): T {
    try {
      return wrapClient(client, this.recorder(), isPlainObject(options) ? options : {});
    } catch (err) {
      this.internal('wrapOpenAI', err);
      return client;
    }
  }

  /** The trace id of a wrapped client's answer (a response, a completion, a stream, or the error it threw). */
  traceIdOf(result: unknown): string | undefined {
    return typeof result === 'object' && result !== null ? this.traceIds.get(result) : undefined;
  }

  /** Resolves once everything queued so far is sent or given up, or after `timeoutMs`. Never rejects. */
  async flush(timeoutMs?: number): Promise<void> {
    try {
      await this.exporter?.flush(timeoutMs);
    } catch (err) {
      this.internal('flush', err);
    }
  }

  /** flush(), then stop the timers and the exit hook; what is still unsent after `timeoutMs` is dropped. */
  async shutdown(timeoutMs?: number): Promise<void> {
    try {
      await this.exporter?.shutdown(timeoutMs);
    } catch (err) {
      this.internal('shutdown', err);
    }
  }

  get stats(): Stats {
    return this.exporter?.stats ?? { queued: 0, sent: 0, dropped: 0, failed: 0, retries: 0 };
  }

  private record(t: TraceInput): void {
    this.send('traces', tracePayload(t, this.defaults));
  }

  private send(lane: Lane, body: unknown): void {
    if (!this.exporter) return;
    let json: string;
    try {
      json = JSON.stringify(body);
    } catch (err) {
      const message = `not serialisable as JSON: ${(err as Error).message}`;
      return this.onError(new TracegateError('invalid_argument', message, { count: 1, cause: err }));
    }
    this.exporter.enqueue(lane, json);
  }

  private internal(where: string, err: unknown): void {
    this.onError(new TracegateError('internal', `tracegate SDK defect in ${where}: ${String(err)}`, { cause: err }));
  }

  private recorder(): Recorder {
    return {
      record: (t) => {
        try {
          this.record(t);
        } catch (err) {
          this.internal('wrapOpenAI', err);
        }
      },
      remember: (result, traceId) => {
        if (typeof result === 'object' && result !== null) this.traceIds.set(result, traceId);
      },
      newTraceId,
      internal: (where, err) => this.internal(where, err),
      alreadyWrapped: () =>
        this.onError(new TracegateError('already_wrapped', 'this client is already wrapped: left as it was')),
    };
  }
}

let shared: Tracegate | undefined;

/** The client `wrapOpenAI(client)` uses when given none, made from the environment on first use. */
export function defaultTracegate(): Tracegate {
  shared ??= new Tracegate();
  return shared;
}

/**
 * `wrapOpenAI(client)`: the same as `tracegate.wrapOpenAI(client)`, with the client given in `options.tracegate`
 * or else `defaultTracegate()` (from `TRACEGATE_API_KEY`, `TRACEGATE_BASE_URL`; flush it with `defaultTracegate().flush()`).
 */
export function wrapOpenAI<T extends object>(client: T, options: WrapOptions & { tracegate?: Tracegate } = {}): T {
  const given: WrapOptions & { tracegate?: Tracegate } = isPlainObject(options) ? options : {};
  const { tracegate, ...rest } = given;
  const tg = tracegate ?? defaultTracegate();
  return tg.wrapOpenAI(client, rest);
}
