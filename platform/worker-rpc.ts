// One request/reply channel to a worker thread, shared by the storage and processor threads.
// Calls are matched by id; a worker that dies fails the calls in flight and is replaced on the next call.
import { parentPort, Worker, type Transferable } from 'node:worker_threads';
import { fromWire, toWire, type WireError } from '../core/errors.ts';

type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: WireError };
type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void };
/** Reply id of "a message could not be read": the worker cannot tell which call it was. */
const UNREADABLE = 0;

export class WorkerRpc {
  private readonly url: URL;
  private readonly workerData: unknown;
  private readonly name: string;
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  /**
   * Young-generation cap of the thread's heap in MB (0: V8's default, which grows to 64 MB per isolate under load).
   * A cap holds RSS lower without costing throughput, unless it is so small that OTLP's large batches pay for it.
   */
  private readonly youngGenMb: number;

  constructor(url: URL, workerData: unknown, name: string, youngGenMb = 0) {
    this.url = url;
    this.youngGenMb = youngGenMb;
    this.workerData = workerData;
    this.name = name;
  }

  /** False before the first call and after the worker died (the next call starts a fresh one). */
  get running(): boolean {
    return this.worker !== null;
  }

  /** Counts the threads started: a caller keeping state in the thread knows a new one has none of it. */
  spawned = 0;
  private exiting: Promise<void> = Promise.resolve();

  /** Resolves once the last thread that failed has exited (its replacement may then take over what it held). */
  stopped(): Promise<void> {
    return this.exiting;
  }

  call<T>(message: object, transfer: readonly Transferable[] = []): Promise<T> {
    const w = (this.worker ??= this.spawn());
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      try {
        w.postMessage({ ...message, id }, transfer);
      } catch (err) {
        this.pending.delete(id); // not serializable (e.g. too deep): this call fails, the worker is fine
        reject(err as Error);
      }
    });
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    await w?.terminate();
  }

  private failPending(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  private spawn(): Worker {
    this.spawned++;
    // The OS thread name (top -H, /proc/<pid>/task/*/comm; 15 characters at most) tells the threads apart.
    const w = new Worker(this.url, {
      name: `tg-${this.name}`,
      workerData: this.workerData,
      ...(this.youngGenMb ? { resourceLimits: { maxYoungGenerationSizeMb: this.youngGenMb } } : {}),
    });
    w.on('message', (m: Reply) => {
      if (m.id === UNREADABLE) return fail(fromWire((m as { error: WireError }).error));
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(fromWire(m.error));
    });
    const fail = (err: Error) => {
      if (this.worker !== w) return;
      this.worker = null;
      this.failPending(err);
      this.exiting = w.terminate().then(
        () => {},
        () => {},
      );
    };
    // A message that cannot be deserialized names no call. Fail every call in flight rather than leave one
    // hanging, and replace the worker: it may still be running them (its chains would then have gaps).
    w.on('messageerror', (err) => fail(err));
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`${this.name} worker exited (code ${code})`)));
    return w;
  }
}

/**
 * The worker side: answer each message with handle's result. `inOrder` runs one message at a time,
 * in arrival order. handle may return transferables to move with the answer.
 */
export function serveRpc<M extends { id: number }>(
  handle: (m: M) => Promise<{ value: unknown; transfer?: Transferable[] }>,
  inOrder = false,
): void {
  const port = parentPort!;
  let queue: Promise<void> = Promise.resolve();
  port.on('message', (m: M) => {
    const fail = (err: unknown) => port.postMessage({ id: m.id, ok: false, error: toWire(err) } satisfies Reply);
    const run = () =>
      handle(m).then(({ value, transfer }) => {
        try {
          port.postMessage({ id: m.id, ok: true, value } satisfies Reply, transfer ?? []);
        } catch (err) {
          fail(err); // an answer that cannot be serialized still answers the call
        }
      }, fail);
    if (inOrder) queue = queue.then(run);
    else void run();
  });
  port.on('messageerror', (err) => port.postMessage({ id: UNREADABLE, ok: false, error: toWire(err) } satisfies Reply));
}
