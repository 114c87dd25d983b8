// The ingest pipeline: processors → durable spool (the 2xx point) → batched writer → storage.
//
// Processors and spool run where the host says (the processor thread in the server). The writer, here, has the
// active spool segment sealed every FLUSH_INTERVAL_MS (or once it holds FLUSH_MAX_ROWS rows) and sends sealed
// segments to storage in large inserts, oldest first.
// A segment file is deleted only after storage accepted its rows, so a crash at any point
// replays it on the next start; storage dedups the re-inserted rows.
import { unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Config } from '../config/index.ts';
import type { Storage } from '../core/ports/storage.ts';
import { BackpressureError, SpoolWriteError, TracegateError } from '../core/errors.ts';
import type { IngestContext, IngestResult, Ingestor, Processor } from '../core/ports/ingest.ts';
import type { IngestHost } from './ingest-host.ts';
import type { SpanRecord, StoredRecord } from '../core/record.ts';
import type { EnrichmentRecord } from '../core/enrichment-records.ts';
import { encodeFrame, loadSegment, type Segment, type SpoolLogger } from '../spool/spool.ts';
import { LocalHost } from './local-host.ts';
import { insertIsolating, insertRecords, type RefusedRecord, type SpoolFilesResult } from '../storage/spool-files.ts';
import { writeRefused } from './refused.ts';
import { latestPerSpan } from '../storage/codec.ts';

type SpoolFileWriter = (paths: string[], maxRows: number, isolate?: boolean) => Promise<SpoolFilesResult>;

export type { Processor };

export interface PipelineOptions {
  config: Pick<
    Config,
    'DATA_DIR' | 'FLUSH_INTERVAL_MS' | 'FLUSH_MAX_ROWS' | 'SPOOL_MAX_BYTES' | 'SPOOL_FSYNC' | 'ISOLATE_AFTER_FAILURES'
  >;
  /** Only the write path is used: tests can pass a small double. With insertSpoolFiles (WorkerStorage)
   * the writer hands over segment files instead of reading their rows here. */
  storage: Pick<Storage, 'insertSpans' | 'insertEnrichment' | 'ping'> & { insertSpoolFiles?: SpoolFileWriter };
  logger: SpoolLogger;
  /**
   * Where batches are processed and spooled: the processor thread (ProcessorWorker). Without one, `processors` and
   * the spool run on this thread (LocalHost: tests).
   */
  host?: IngestHost;
  processors?: Processor[];
  /** Told once records encoded on this thread are durable (the audit chain heads a restart continues from). */
  onDurable?: (records: ReadonlyArray<object>) => void;
  /** This thread's chained records (audit): `current` false when they may link to records of a failed append (never
   * written then); `failed` when they were not appended. */
  chain?: { current(records: ReadonlyArray<object>): boolean; failed(records: ReadonlyArray<object>): void };
  /** Called after each successful insert (metrics). */
  onFlush?: (rows: number, ms: number) => void;
  /** Called when records storage refused were set aside in DATA_DIR/refused (metrics). */
  onRefused?: (rows: number) => void;
  /** Bytes of sealed segments handed to storage per call; a segment is sealed early at a quarter of it. */
  maxBatchBytes?: number;
  /** Longest wait for the final flush in close(). */
  closeTimeoutMs?: number;
}

export interface PipelineStats {
  spoolBytes: number;
  spoolSegments: number;
  pendingRows: number;
  lastFlushRows: number;
  lastFlushMs: number;
  lastFlushError: string | null;
  lastFlushErrorCode: string | null;
  storageHealthy: boolean;
  flushedTotal: number;
  spoolSyncs: number;
  spoolAppends: number;
  /** The last spool append failed (disk full, I/O error) then, and none has succeeded since. */
  spoolWriteFailure: { atMs: number; message: string } | null;
}

/** One group of this thread's records waiting its turn: `current` is asked right before it is written. */
type Handover = { records: StoredRecord[]; resolve: () => void; reject: (err: unknown) => void };

const DEFAULT_BATCH_BYTES = 64 * 1024 * 1024;
const MAX_BACKOFF_MS = 5_000;

export class Pipeline implements Ingestor {
  readonly host: IngestHost;
  private readonly opts: PipelineOptions;
  private readonly batchBytes: number;
  /** Sealed segments not yet in storage, oldest first. */
  private sealed: Segment[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private failures = 0;
  private retryAt = 0;
  private closing = false;
  private closed: Promise<void> | null = null;
  private healthy = true;
  private lastError: string | null = null;
  /** The last flush error's code, when it had one (a system error's, or ClickHouse's number): see /readyz. */
  private lastErrorCode: string | null = null;
  private lastRows = 0;
  private lastMs = 0;
  private flushed = 0;
  private readonly ingesting = new Set<Promise<unknown>>();
  private handovers: Handover[] = [];
  private handing = false;
  private sealing: Promise<void> = Promise.resolve();
  private sealQueued: Promise<void> | null = null;

  constructor(opts: PipelineOptions) {
    this.opts = opts;
    this.batchBytes = opts.maxBatchBytes ?? DEFAULT_BATCH_BYTES;
    this.host =
      opts.host ??
      new LocalHost({
        dir: join(opts.config.DATA_DIR, 'spool'),
        fsync: opts.config.SPOOL_FSYNC,
        logger: opts.logger,
        processors: opts.processors,
      });
  }

  /** Take over the spool and start the writer. Leftover segments replay in the background. */
  async start(): Promise<void> {
    this.sealed = await this.host.open();
    const recovered = this.sealed.length > 0;
    if (recovered) this.healthy = false; // until the replay reaches storage
    const loop = () => {
      this.timer = setTimeout(() => {
        if (this.closing) return;
        this.kick();
        loop();
      }, this.opts.config.FLUSH_INTERVAL_MS);
      this.timer.unref();
    };
    loop();
    if (recovered) this.kick();
  }

  ingest(input: SpanRecord[], ctx?: IngestContext): Promise<IngestResult> {
    return this.tracked(this.ingestNow(input, ctx));
  }

  /** flush() waits for appends under way. */
  private tracked<T>(p: Promise<T>): Promise<T> {
    this.ingesting.add(p);
    const done = () => {
      this.ingesting.delete(p);
    };
    p.then(done, done);
    return p;
  }

  private async ingestNow(input: SpanRecord[], ctx?: IngestContext): Promise<IngestResult> {
    if (this.closing) throw new BackpressureError('the collector is shutting down; retry later', 1);
    if (this.spoolBytes() >= this.opts.config.SPOOL_MAX_BYTES) {
      throw new BackpressureError('storage is behind and the spool is full; retry later', 5);
    }
    // A request repeating a span keeps its last copy, as storage would, so enrichment (verification hashes,
    // rollups) sees exactly what is stored.
    input = latestPerSpan(input);
    // Processors (redaction among them) run before the spool: raw text never reaches disk.
    let out: { accepted: number; rows: number };
    try {
      out = await this.host.process(input, ctx ?? null);
    } catch (err) {
      if (!(err instanceof SpoolWriteError)) throw err;
      throw Object.assign(new BackpressureError('could not write to the spool; retry later', 1), { cause: err });
    }
    if (out.rows === 0) return { accepted: 0 };
    const state = this.host.state;
    if (state.activeRows >= this.opts.config.FLUSH_MAX_ROWS) this.kick();
    // Big records: rotate early so the writer reads a bounded amount at a time; the timer still paces inserts.
    else if (state.activeBytes >= this.batchBytes / 4)
      void this.seal().catch((err: unknown) => this.opts.logger.error({ err }, 'pipeline: seal failed'));
    return { accepted: out.accepted };
  }

  /** Durably spool enrichment records produced outside a request's batch (audit of rejected auth, admin changes). */
  async record(extra: EnrichmentRecord[]): Promise<void> {
    if (extra.length === 0) return;
    if (this.closing) throw new BackpressureError('the collector is shutting down; retry later', 1);
    if (this.spoolBytes() >= this.opts.config.SPOOL_MAX_BYTES)
      throw new BackpressureError('storage is behind and the spool is full; retry later', 5);
    await this.tracked(this.handOver(extra));
  }

  /**
   * This thread's chained records go to the spool one group at a time, in order, so a failed append is known
   * before any later group is handed over. The chain then goes back to its durable heads, and records made before
   * that are refused: they may link to lost records.
   */
  private handOver(records: StoredRecord[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.handovers.push({ records, resolve, reject });
      if (this.handing) return;
      this.handing = true;
      // setImmediate: records made in the same event-loop turn go out as one frame.
      setImmediate(
        () =>
          void this.handOverWaiting().catch((err: unknown) =>
            this.opts.logger.error({ err }, 'pipeline: spool handover failed'),
          ),
      );
    });
  }

  private async handOverWaiting(): Promise<void> {
    try {
      while (this.handovers.length) {
        const group = this.handovers;
        this.handovers = [];
        const ok = group.filter((h) => this.opts.chain?.current(h.records) !== false);
        for (const h of group) if (!ok.includes(h)) h.reject(new Error('an earlier spool write failed'));
        if (!ok.length) continue;
        const records = ok.flatMap((h) => h.records);
        try {
          await this.host.append(encodeFrame(records), records.length);
        } catch (err) {
          this.opts.chain?.failed(records);
          for (const h of ok)
            h.reject(
              err instanceof SpoolWriteError
                ? Object.assign(new BackpressureError('could not write to the spool; retry later', 1), { cause: err })
                : err,
            );
          continue;
        }
        this.opts.onDurable?.(records);
        for (const h of ok) h.resolve();
      }
    } finally {
      this.handing = false;
    }
  }

  /** Seal what is spooled and write it all to storage now; rejects if storage fails. */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.ingesting]); // appends under way (e.g. a batch still in the processor worker)
    await this.seal();
    while (this.flushing) await this.flushing.catch(() => {});
    await this.runFlush();
  }

  /** Refuse new records (503) and wait for those under way: what is appended after this is only the caller's own. */
  async stopIngesting(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.ingesting]);
  }

  /** Stop accepting, flush what we can within the timeout, close the spool. Unflushed data replays on next start. */
  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  private async shutdown(): Promise<void> {
    this.closing = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    let timeout: NodeJS.Timeout | undefined;
    const limit = new Promise<'timeout'>((r) => {
      timeout = setTimeout(() => r('timeout'), this.opts.closeTimeoutMs ?? 10_000);
    });
    // Never rejects: a flush that fails after the timeout must not become an unhandled rejection.
    const done = this.flush().then(
      () => null,
      (err: unknown) => err,
    );
    const res = await Promise.race([done, limit]);
    clearTimeout(timeout);
    if (res !== null) {
      const why = res === 'timeout' ? 'timed out' : 'failed';
      this.opts.logger.warn(
        { err: res === 'timeout' ? undefined : res, pendingRows: this.stats().pendingRows },
        `pipeline: final flush ${why}; rows stay spooled for the next start`,
      );
    }
    // An unflushed segment stays on disk; the next start replays it.
    await this.host
      .close()
      .catch((err: unknown) =>
        this.opts.logger.warn({ err }, 'pipeline: closing the spool failed; the next start replays what it holds'),
      );
  }

  /** Bytes spooled and not yet in storage: sealed segments plus the active one. */
  private spoolBytes(): number {
    let n = this.host.state.activeBytes;
    for (const s of this.sealed) n += s.bytes;
    return n;
  }

  stats(): PipelineStats {
    const state = this.host.state;
    let rows = state.activeRows;
    for (const s of this.sealed) rows += s.rows;
    return {
      spoolBytes: this.spoolBytes(),
      spoolSegments: this.sealed.length + (state.activeBytes > 0 ? 1 : 0),
      pendingRows: rows,
      lastFlushRows: this.lastRows,
      lastFlushMs: this.lastMs,
      lastFlushError: this.lastError,
      lastFlushErrorCode: this.lastErrorCode,
      storageHealthy: this.healthy,
      flushedTotal: this.flushed,
      spoolSyncs: state.counters.syncs,
      spoolAppends: state.counters.appends,
      spoolWriteFailure: state.lastWriteFailure,
    };
  }

  /** Sealed segments not yet in storage, oldest first. */
  sealedSegments(): readonly Segment[] {
    return this.sealed;
  }

  /** Timer / size trigger: seal, then flush unless one is running or we are backing off. */
  private kick(): void {
    void this.tick().catch((err: unknown) => this.opts.logger.error({ err }, 'pipeline: writer tick failed'));
  }

  private async tick(): Promise<void> {
    if (this.closing) return; // close() does the last flush itself
    await this.seal();
    if (this.flushing || Date.now() < this.retryAt) return;
    if (this.sealed.length) {
      await this.runFlush().catch(() => {}); // recorded in stats and logged by runFlush
    } else if (!this.healthy) {
      // Nothing to write, but readiness should notice when storage comes back.
      this.healthy = await this.opts.storage.ping().catch(() => false);
      if (!this.healthy) this.backoff();
    }
  }

  /**
   * One seal at a time, so segments join the list in the order they were sealed; callers while one waits its turn
   * share it (a burst over FLUSH_MAX_ROWS asks for one on every request).
   */
  private seal(): Promise<void> {
    if (this.sealQueued) return this.sealQueued;
    const next = this.sealing.then(async () => {
      this.sealQueued = null;
      const segs = await this.host.seal();
      for (const s of segs) this.sealed.push(s);
    });
    this.sealQueued = next;
    this.sealing = next.catch(() => {});
    return next;
  }

  /** Delete a sealed segment once storage has its rows. */
  private async remove(seg: Segment): Promise<void> {
    await unlink(seg.path).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
    });
    const i = this.sealed.indexOf(seg);
    if (i >= 0) this.sealed.splice(i, 1);
  }

  /** The single flush in flight; callers must check `this.flushing` first. */
  private runFlush(): Promise<void> {
    const run = (async () => {
      try {
        await this.writeSealed();
        this.failures = 0;
        this.retryAt = 0;
        this.healthy = true;
        this.lastError = null;
        this.lastErrorCode = null;
      } catch (err) {
        this.healthy = false;
        this.lastError = err instanceof Error ? err.message : String(err);
        // A classified storage error keeps its dependency's code apart from its own (core/errors.ts).
        const e = err as { code?: unknown; dependencyCode?: unknown } | null;
        const code = e instanceof TracegateError ? e.dependencyCode : e?.code;
        this.lastErrorCode = typeof code === 'string' || typeof code === 'number' ? String(code) : null;
        const delay = this.backoff();
        this.opts.logger.warn(
          { err, retryInMs: delay, pendingRows: this.stats().pendingRows },
          'pipeline: flush to storage failed; rows stay spooled',
        );
        throw err;
      } finally {
        this.flushing = null;
      }
    })();
    this.flushing = run;
    return run;
  }

  private backoff(): number {
    this.failures++;
    const delay = Math.min(MAX_BACKOFF_MS, 100 * 2 ** Math.min(this.failures, 10)) * (0.75 + Math.random() / 2);
    this.retryAt = Date.now() + delay;
    return delay;
  }

  /**
   * After this many failed attempts in a row with storage still answering, the writer looks for the records
   * storage refuses and sets them aside, so one bad record cannot hold up everyone's data forever.
   */
  private get isolating(): boolean {
    return this.failures >= this.opts.config.ISOLATE_AFTER_FAILURES;
  }

  /** Refused records go to DATA_DIR/refused (durably, before their segments are removed): set aside, never lost. */
  private async setAside(group: readonly Segment[], refused: RefusedRecord[]): Promise<void> {
    if (!refused.length) return;
    const file = await writeRefused(
      join(this.opts.config.DATA_DIR, 'refused'),
      basename(group[0]!.path).replace(/\.seg$/, ''),
      refused,
    );
    this.opts.logger.error(
      { rows: refused.length, file, firstError: refused[0]!.error },
      'pipeline: storage refused records; set aside in DATA_DIR/refused',
    );
    this.opts.onRefused?.(refused.length);
  }

  /** Oldest sealed segments first, grouped into inserts of at most FLUSH_MAX_ROWS rows. */
  private async writeSealed(): Promise<void> {
    const maxRows = this.opts.config.FLUSH_MAX_ROWS;
    for (;;) {
      const segs = this.sealed;
      if (!segs.length) return;
      if (this.opts.storage.insertSpoolFiles) {
        await this.writeFiles(segs);
        continue;
      }
      const group: Segment[] = [];
      let rows: StoredRecord[] = [];
      let bytes = 0;
      for (const seg of segs) {
        if (group.length && (rows.length + seg.rows > maxRows || bytes + seg.bytes > this.batchBytes)) break;
        const recs = await loadSegment(seg, this.opts.logger);
        group.push(seg);
        rows = group.length === 1 ? recs : rows.concat(recs);
        bytes += seg.bytes;
      }
      const refused: RefusedRecord[] = [];
      for (let i = 0; i < rows.length; i += maxRows) {
        const chunk = rows.length <= maxRows ? rows : rows.slice(i, i + maxRows);
        const t0 = performance.now();
        if (this.isolating) refused.push(...(await insertIsolating(this.opts.storage, chunk)));
        else await insertRecords(this.opts.storage, chunk);
        this.noteFlush(chunk.length, performance.now() - t0);
      }
      await this.setAside(group, refused);
      for (const seg of group) await this.remove(seg);
    }
  }

  /** The worker reads the segment files itself: hand over up to the byte cap at a time. */
  private async writeFiles(segs: readonly Segment[]): Promise<void> {
    const group: Segment[] = [];
    let bytes = 0;
    for (const seg of segs) {
      if (group.length && bytes + seg.bytes > this.batchBytes) break;
      group.push(seg);
      bytes += seg.bytes;
    }
    const res = await this.opts.storage.insertSpoolFiles!(
      group.map((s) => s.path),
      this.opts.config.FLUSH_MAX_ROWS,
      this.isolating,
    );
    for (const t of res.badTails)
      this.opts.logger.warn({ segment: t.path, error: t.error }, 'spool: segment has a bad tail or damage');
    await this.setAside(group, res.refused);
    for (const c of res.chunks) this.noteFlush(c.rows, c.ms);
    for (const seg of group) await this.remove(seg);
  }

  private noteFlush(rows: number, ms: number): void {
    this.lastRows = rows;
    this.lastMs = ms;
    this.flushed += rows;
    this.opts.onFlush?.(rows, ms);
  }
}
