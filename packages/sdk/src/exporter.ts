// Sends the queue off the application's path: batches by count (`flushAt`) and by time (`flushIntervalMs`), one
// request at a time, retries with backoff, and `flush()` that waits a bounded time whatever the server does.
import { TracegateError } from './errors.ts';
import { BoundedQueue, type Item, LANES, type Lane } from './queue.ts';
import { onBeforeExit, unref, utf8Length } from './runtime.ts';
import { batchBody, postBatch, ROUTES, retryDelayMs } from './transport.ts';

export interface ExporterOptions {
  baseUrl: string;
  apiKey: string;
  headers: Record<string, string>;
  fetch: typeof fetch;
  flushAt: number;
  flushIntervalMs: number;
  maxQueueSize: number;
  maxBatchSize: number;
  maxBatchBytes: number;
  timeoutMs: number;
  maxRetries: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
  flushTimeoutMs: number;
  immediate: boolean;
  flushOnExit: boolean;
  report: (err: TracegateError) => void;
}

export interface Stats {
  /** Items waiting or being sent. */
  queued: number;
  /** Items the server accepted. */
  sent: number;
  /** Items dropped because the queue was full (the oldest go first). */
  dropped: number;
  /** Items given up: refused by the server, retries exhausted, or unsent at shutdown. */
  failed: number;
  /** Retried requests. */
  retries: number;
}

export class Exporter {
  private readonly queue: BoundedQueue;
  private seq = 0;
  private running = false;
  private kicked = false;
  /** Every item up to this sequence number goes out now, whatever `flushAt` says (flush, immediate mode). */
  private urgentUpTo = 0;
  /** The interval fired: everything queued goes out. */
  private tick = false;
  private inFlight: Item[] = [];
  private waiters: Array<{ seq: number; done: () => void }> = [];
  private stop = new AbortController();
  private wake: (() => void) | undefined;
  private droppedUnreported = 0;
  private closed = false;
  private readonly interval: ReturnType<typeof setInterval>;
  private readonly removeExitHook: () => void;
  private exiting = false;
  private readonly counts = { sent: 0, dropped: 0, failed: 0, retries: 0 };

  private readonly o: ExporterOptions;

  constructor(o: ExporterOptions) {
    this.o = o;
    this.queue = new BoundedQueue(o.maxQueueSize);
    this.interval = setInterval(() => {
      this.tick = true;
      this.kick();
    }, o.flushIntervalMs);
    unref(this.interval);
    this.removeExitHook = o.flushOnExit ? onBeforeExit(() => this.onBeforeExit()) : () => {};
  }

  get stats(): Stats {
    return { queued: this.queue.size + this.inFlight.length, ...this.counts };
  }

  enqueue(lane: Lane, json: string): void {
    if (this.closed) {
      this.counts.failed++;
      this.o.report(new TracegateError('shutdown', 'the client is shut down: item not sent', { count: 1 }));
      return;
    }
    const item: Item = { lane, seq: ++this.seq, json, bytes: utf8Length(json) };
    if (this.queue.push(item)) this.dropped();
    if (this.o.immediate) this.urgentUpTo = item.seq;
    this.kick();
  }

  /** Resolves once everything queued before the call is sent or given up, or after `timeoutMs`. Never rejects. */
  flush(timeoutMs = this.o.flushTimeoutMs): Promise<void> {
    const target = this.seq;
    if (this.settledUpTo(target)) return Promise.resolve();
    this.urgentUpTo = Math.max(this.urgentUpTo, target);
    this.kick();
    return new Promise<void>((resolve) => {
      const waiter = {
        seq: target,
        done: () => {
          clearTimeout(timer);
          this.waiters = this.waiters.filter((w) => w !== waiter);
          resolve();
        },
      };
      // Not unref'd: a caller awaiting flush() wants the process to wait for it.
      const timer = setTimeout(waiter.done, Math.max(0, timeoutMs));
      this.waiters.push(waiter);
    });
  }

  /** flush(), then stop: what is still unsent after `timeoutMs` is dropped and the timers are gone. */
  async shutdown(timeoutMs = this.o.flushTimeoutMs): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.interval);
    this.removeExitHook();
    await this.flush(timeoutMs);
    this.abandon();
  }

  /**
   * Node empties its event loop: send what is queued. The flush keeps the process alive until it is done or
   * `flushTimeoutMs` has passed; what is left then is dropped so the process can exit.
   */
  private onBeforeExit(): void {
    if (this.exiting || this.settledUpTo(this.seq)) return;
    this.exiting = true;
    void this.flush().then(() => {
      if (!this.settledUpTo(this.seq)) this.abandon();
      this.exiting = false;
    });
  }

  /** Gives up everything queued or in flight (counted and reported); the exporter stays usable afterwards. */
  private abandon(): void {
    const stop = this.stop;
    this.stop = new AbortController();
    stop.abort();
    this.wake?.();
    const left = this.queue.drain();
    if (left.length) this.give(left, new TracegateError('shutdown', `${left.length} items unsent at shutdown`));
  }

  /** Starts the sender after the caller's own code (never inside `trace()`), unless it is already running. */
  private kick(): void {
    if (this.running || this.kicked) return;
    this.kicked = true;
    queueMicrotask(() => {
      this.kicked = false;
      if (!this.running) void this.run();
    });
  }

  private settledUpTo(seq: number): boolean {
    const queued = this.queue.oldestSeq();
    const flying = this.inFlight[0]?.seq;
    return (queued === undefined || queued > seq) && (flying === undefined || flying > seq);
  }

  private settled(): void {
    for (const w of [...this.waiters]) if (this.settledUpTo(w.seq)) w.done();
  }

  /** The lane to send next: of those due, the one holding the oldest item. */
  private nextLane(): Lane | undefined {
    let best: { lane: Lane; seq: number } | undefined;
    for (const lane of LANES) {
      const seq = this.queue.headSeq(lane);
      if (seq === undefined) continue;
      const due = this.tick || seq <= this.urgentUpTo || this.queue.sizeOf(lane) >= this.o.flushAt;
      if (due && (!best || seq < best.seq)) best = { lane, seq };
    }
    return best?.lane;
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      for (let lane = this.nextLane(); lane; lane = this.nextLane()) {
        this.inFlight = this.queue.take(lane, this.o.maxBatchSize, this.o.maxBatchBytes);
        await this.deliver(lane, this.inFlight, this.stop.signal);
        this.inFlight = [];
        this.settled();
      }
      this.tick = false;
    } catch (err) {
      this.o.report(new TracegateError('internal', `tracegate SDK defect: ${String(err)}`, { cause: err }));
    } finally {
      this.inFlight = [];
      this.running = false;
      this.settled();
    }
  }

  /** Sends one batch until it is sent or given up; `stop` is the shutdown signal in force when it was taken. */
  private async deliver(lane: Lane, batch: Item[], stop: AbortSignal): Promise<void> {
    const route = ROUTES[lane];
    const headers = {
      ...this.o.headers,
      authorization: `Bearer ${this.o.apiKey}`,
      'content-type': 'application/json',
    };
    const body = batchBody(
      lane,
      batch.map((i) => i.json),
    );
    for (let attempt = 0; ; attempt++) {
      if (stop.aborted) return this.give(batch, new TracegateError('shutdown', 'shut down before sending'));
      const out = await postBatch({
        fetch: this.o.fetch,
        url: this.o.baseUrl + route,
        route,
        headers,
        body,
        items: batch.length,
        timeoutMs: this.o.timeoutMs,
        stop,
      });
      if (out.kind === 'sent') {
        const refused = out.rejected?.count ?? 0;
        this.counts.sent += batch.length - refused;
        if (out.rejected) {
          this.counts.failed += refused;
          this.o.report(out.rejected);
        }
        return;
      }
      if (out.kind === 'split') {
        // 413: the batch is larger than the server takes; halves until one item alone is refused.
        const half = Math.ceil(batch.length / 2);
        await this.deliver(lane, batch.slice(0, half), stop);
        await this.deliver(lane, batch.slice(half), stop);
        return;
      }
      if (out.kind === 'fail') return this.give(batch, out.error);
      if (attempt >= this.o.maxRetries) {
        const e = out.error;
        const message = `${e.message}; gave up after ${attempt + 1} attempts`;
        const extra = { status: e.status, route, count: batch.length, details: e.details, cause: e };
        return this.give(batch, new TracegateError('retries_exhausted', message, extra));
      }
      this.counts.retries++;
      await this.sleep(retryDelayMs(attempt, out.retryAfterMs, this.o.retryBaseDelayMs, this.o.retryMaxDelayMs), stop);
    }
  }

  private give(items: Item[], err: TracegateError): void {
    this.counts.failed += items.length;
    const counted =
      err.count === items.length
        ? err
        : new TracegateError(err.code, err.message, {
            status: err.status,
            route: err.route,
            details: err.details,
            count: items.length,
            cause: err.cause,
          });
    this.o.report(counted);
  }

  /** A backoff wait that does not hold the process open, and that shutdown cuts short. */
  private sleep(ms: number, stop: AbortSignal): Promise<void> {
    if (stop.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      unref(timer);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }

  /** Drops are reported once per burst (a full queue drops on every call), not once per item. */
  private dropped(): void {
    this.counts.dropped++;
    if (this.droppedUnreported++ > 0) return;
    queueMicrotask(() => {
      const n = this.droppedUnreported;
      this.droppedUnreported = 0;
      this.o.report(
        new TracegateError('queue_full', `queue full (${this.o.maxQueueSize}): dropped the ${n} oldest items`, {
          count: n,
        }),
      );
      this.settled();
    });
  }
}
