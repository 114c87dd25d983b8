// The read routes' storage calls (GET /api/traces, /api/audit, …): a deadline, and storage outages answered 503.
import { isStorageOutage, isStorageOutOfMemory, StorageUnavailableError } from '../../core/errors.ts';
import { classifyStorageError } from '../../storage/errors.ts';
import { LOOKUP_DEADLINE_MS, SingleFlight, within } from '../../platform/slow-storage.ts';

/**
 * How long a read route waits for storage. A read on a big workspace may take a few seconds; past this the caller
 * gets a retryable 503 instead of waiting for the ClickHouse client's own 30 s timeout.
 */
export const READ_DEADLINE_MS = 12_000;

/**
 * ClickHouse: a read still running after this long makes the gate ask whether storage answers at all (one shared
 * ping, itself bounded by LOOKUP_DEADLINE_MS): a hung server is answered 503 within about 4 s, a merely slow read
 * keeps its READ_DEADLINE_MS. Not for DuckDB, whose one connection runs calls in turn: its ping waits behind the
 * slow read and would call it hung.
 */
export const READ_LIVENESS_AFTER_MS = 2_000;

/**
 * The liveness ping is skipped while this many reads run: the ClickHouse client has 10 sockets, and with them all
 * busy a ping waits for one like a query does, so it would call a busy server hung. Those reads get the deadline.
 */
export const LIVENESS_MAX_IN_FLIGHT = 8;

/**
 * Reads given up on but still running in storage (a hung ClickHouse holds each one until its client times out).
 * Past this many, further reads are answered 503 at once rather than added to the pile.
 */
export const MAX_ABANDONED_READS = 16;

/** Retry-After of a read answered 503. */
export const READ_RETRY_AFTER_SECONDS = 5;

/**
 * Runs the storage reads of the read routes (GET /api/traces, /api/audit, …) under a deadline, and turns storage
 * outages into StorageUnavailableError (503 + Retry-After, code `unavailable`, as ingestion answers them):
 * - a read failing with an outage (connection refused or reset, a timeout, the storage worker gone: see
 *   isStorageOutage) is answered 503 at once, and so is one storage had no memory for (isStorageOutOfMemory);
 *   any other failure is a bug and stays a 500;
 * - with `livenessAfterMs` (ClickHouse), a read still running after it is answered 503 unless a ping answers
 *   within LOOKUP_DEADLINE_MS; every read is answered 503 after READ_DEADLINE_MS;
 * - once storage has failed that way, each read first checks the shared ping (no new work for a storage that
 *   does not answer; one ping in flight however many requests ask, and a ping already unanswered for
 *   LOOKUP_DEADLINE_MS answers no at once) until a ping or a read succeeds again;
 * - a read given up on keeps running in storage; with MAX_ABANDONED_READS of them still running, new reads are
 *   refused at once, so a hung storage does not collect a pile of queries to run when it wakes up.
 */
export class ReadGate {
  private readonly ping: () => Promise<boolean>;
  private readonly deadlineMs: number;
  private readonly livenessAfterMs: number;
  private readonly pingDeadlineMs: number;
  private readonly pings = new SingleFlight<boolean>();
  private abandoned = 0;
  private inFlight = 0;
  /** When the ping in flight started (null: none in flight). */
  private pingSince: number | null = null;
  /** Storage failed or hung on the last read: the next ones check it answers before asking it anything. */
  private suspect = false;

  /** `livenessAfterMs`: when to ask a slow read's storage whether it answers at all (default: never). */
  constructor(
    ping: () => Promise<boolean>,
    opts: { deadlineMs?: number; livenessAfterMs?: number; pingDeadlineMs?: number } = {},
  ) {
    this.ping = ping;
    this.deadlineMs = opts.deadlineMs ?? READ_DEADLINE_MS;
    this.livenessAfterMs = Math.min(opts.livenessAfterMs ?? Infinity, this.deadlineMs);
    this.pingDeadlineMs = opts.pingDeadlineMs ?? LOOKUP_DEADLINE_MS;
  }

  /** Reads given up on that storage is still running. */
  get pending(): number {
    return this.abandoned;
  }
  /** Reads storage is running (given up on or not). */
  get running(): number {
    return this.inFlight;
  }

  async run<T>(read: () => Promise<T>): Promise<T> {
    if (this.abandoned >= MAX_ABANDONED_READS) throw unavailable('storage is not answering reads; retry later');
    if (this.suspect && !(await this.alive())) throw unavailable('storage is unreachable; retry later');
    const started = performance.now();
    let p: Promise<T>;
    try {
      p = read();
    } catch (err) {
      throw this.failed(err);
    }
    this.inFlight++;
    const settled = () => {
      this.inFlight--;
    };
    p.then(settled, settled);
    let got: { value: T } | null;
    try {
      got = await within(p, this.livenessAfterMs);
      if (!got && this.livenessAfterMs < this.deadlineMs) {
        // Too many reads running for a fair ping: those wait out the deadline.
        if (this.inFlight <= LIVENESS_MAX_IN_FLIGHT && !(await this.alive()))
          return this.abandon(p, 'storage is not answering; retry later');
        got = await within(p, Math.max(0, this.deadlineMs - (performance.now() - started)));
      }
    } catch (err) {
      throw this.failed(err);
    }
    if (!got)
      return this.abandon(p, `storage did not answer within ${+(this.deadlineMs / 1000).toFixed(3)} s; retry later`);
    this.suspect = false;
    return got.value;
  }

  /**
   * Does storage answer a ping within LOOKUP_DEADLINE_MS? Callers asking meanwhile share one ping; while one has
   * gone unanswered for longer than that, the answer is no at once (a hung storage: nobody waits for it again).
   */
  private async alive(): Promise<boolean> {
    if (this.pingSince !== null && performance.now() - this.pingSince >= this.pingDeadlineMs) return false;
    const ping = this.pings.run('ping', async () => {
      this.pingSince = performance.now();
      try {
        return await this.ping();
      } finally {
        this.pingSince = null;
      }
    });
    const ok = await within(ping, this.pingDeadlineMs).then(
      (got) => got?.value === true,
      () => false,
    );
    if (ok) this.suspect = false;
    return ok;
  }

  private failed(raw: unknown): unknown {
    // Engines classify their failures (storage/errors.ts); a raw one from a store used directly is classified here.
    const err = classifyStorageError(raw);
    // Storage answers, but not this read for now: 503 without suspecting it (the next reads go ahead as usual).
    if (isStorageOutOfMemory(err))
      return Object.assign(unavailable('storage has not enough memory for this read now; retry later'), { cause: raw });
    if (!isStorageOutage(err)) return raw;
    this.suspect = true;
    return Object.assign(unavailable('storage is unreachable; retry later'), { cause: raw });
  }

  private abandon(p: Promise<unknown>, message: string): never {
    this.suspect = true;
    this.abandoned++;
    p.then(
      () => {
        this.abandoned--;
      },
      () => {
        this.abandoned--;
      },
    ); // also never an unhandled rejection
    throw unavailable(message);
  }
}

const unavailable = (message: string) => new StorageUnavailableError(message, READ_RETRY_AFTER_SECONDS);
