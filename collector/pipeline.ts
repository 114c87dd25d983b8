// The ingest pipeline: processors → durable spool (the 2xx point) → batched writer → storage.
//
// The writer seals the active spool segment every FLUSH_INTERVAL_MS (or once it holds
// FLUSH_MAX_ROWS rows) and sends sealed segments to storage in large inserts, oldest first.
// A segment file is deleted only after storage accepted its rows, so a crash at any point
// replays it on the next start; storage dedups the re-inserted rows.
import { basename, join } from 'node:path';
import type { Config } from '../config/index.ts';
import type { Storage } from '../storage/types.ts';
import { BackpressureError } from './errors.ts';
import type { Batch, IngestContext, IngestResult, Ingestor, Processor } from './pipeline-types.ts';
import type { SpanRecord, StoredRecord } from './record.ts';
import type { EnrichmentRecord } from './enrichment-records.ts';
import { Spool, type Segment, type SpoolLogger } from './spool.ts';
import { insertIsolating, insertRecords, type RefusedRecord, type SpoolFilesResult } from '../storage/spool-files.ts';
import { writeRefused } from './refused.ts';
import { latestPerSpan } from '../storage/codec.ts';

type SpoolFileWriter = (paths: string[], maxRows: number, isolate?: boolean) => Promise<SpoolFilesResult>;

export type { Processor };

export interface PipelineOptions {
  config: Pick<Config, 'DATA_DIR' | 'FLUSH_INTERVAL_MS' | 'FLUSH_MAX_ROWS' | 'SPOOL_MAX_BYTES' | 'SPOOL_FSYNC' | 'ISOLATE_AFTER_FAILURES'>;
  /** Only the write path is used: tests can pass a small double. With insertSpoolFiles (WorkerStorage)
   * the writer hands over segment files instead of keeping their rows in memory. */
  storage: Pick<Storage, 'insertSpans' | 'insertEnrichment' | 'ping'> & { insertSpoolFiles?: SpoolFileWriter };
  logger: SpoolLogger;
  processors?: Processor[];
  /** Runs the processors elsewhere (ProcessorWorker) and returns the encoded spool frame; replaces `processors`. */
  offload?: {
    process(spans: SpanRecord[], ctx: IngestContext | null): Promise<OffloadFrame>;
    /** Told once a frame it produced is fsync'd (in spool order). */
    durable?(out: OffloadFrame): void;
    /** Told when a frame it produced was not appended (write failed, or refused as no longer current). */
    failed?(out: OffloadFrame): void;
    /** False when a frame must not be appended any more: it may link to records of a failed append. */
    current?(frame: Buffer): boolean;
  };
  /** Told once records encoded on this thread are fsync'd (the audit chain heads a restart continues from). */
  onDurable?: (records: ReadonlyArray<object>) => void;
  /** This thread's chained records (audit), as `offload` for the worker's frames: `current` false when they may link
   * to records of a failed append (never written then); `failed` when they were not appended. */
  chain?: { current(records: ReadonlyArray<object>): boolean; failed(records: ReadonlyArray<object>): void };
  /** Called after each successful insert (metrics). */
  onFlush?: (rows: number, ms: number) => void;
  /** Called when records storage refused were set aside in DATA_DIR/refused (metrics). */
  onRefused?: (rows: number) => void;
  /** Bound on rows/bytes kept in memory for the writer; beyond it rows are re-read from the spool. */
  memoryCap?: { rows: number; bytes: number };
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
  storageHealthy: boolean;
  flushedTotal: number;
  spoolSyncs: number;
  spoolAppends: number;
  /** The last spool append failed (disk full, I/O error) then, and none has succeeded since. */
  spoolWriteFailure: { atMs: number; message: string } | null;
}

type OffloadFrame = { frame: Buffer | null; rows: number; accepted: number };
/** One append waiting its turn: `current` is asked right before it is written. */
type Handover = { write(): Promise<void>; current(): boolean; durable(): void; failed(): void; resolve: () => void; reject: (err: unknown) => void };

const DEFAULT_CAP = { rows: 200_000, bytes: 64 * 1024 * 1024 };
const MAX_BACKOFF_MS = 5_000;

export class Pipeline implements Ingestor {
  readonly spool: Spool;
  private readonly opts: PipelineOptions;
  private readonly cap: { rows: number; bytes: number };
  private readonly processors: Processor[];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private failures = 0;
  private retryAt = 0;
  private closing = false;
  private closed: Promise<void> | null = null;
  private healthy = true;
  private lastError: string | null = null;
  private lastRows = 0;
  private lastMs = 0;
  private flushed = 0;
  private readonly ingesting = new Set<Promise<unknown>>();
  private handovers: Handover[] = [];
  private handing = false;

  constructor(opts: PipelineOptions) {
    this.opts = opts;
    this.cap = opts.memoryCap ?? DEFAULT_CAP;
    this.processors = opts.processors ?? [];
    this.spool = new Spool({
      dir: join(opts.config.DATA_DIR, 'spool'), fsync: opts.config.SPOOL_FSYNC, logger: opts.logger,
      // Rows stay in memory only when the writer inserts them from here and they were encoded here.
      keepRecords: !opts.storage.insertSpoolFiles && !opts.offload,
    });
  }

  /** Open the spool and start the writer. Leftover segments replay in the background. */
  async start(): Promise<void> {
    await this.spool.open();
    const recovered = this.spool.sealedSegments().length > 0;
    if (recovered) this.healthy = false; // until the replay reaches storage
    const loop = () => {
      this.timer = setTimeout(() => { if (this.closing) return; this.kick(); loop(); }, this.opts.config.FLUSH_INTERVAL_MS);
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
    const done = () => { this.ingesting.delete(p); };
    p.then(done, done);
    return p;
  }

  private async ingestNow(input: SpanRecord[], ctx?: IngestContext): Promise<IngestResult> {
    if (this.closing) throw new BackpressureError('the collector is shutting down; retry later', 1);
    if (this.spool.totalBytes >= this.opts.config.SPOOL_MAX_BYTES) {
      throw new BackpressureError('storage is behind and the spool is full; retry later', 5);
    }
    // A request repeating a span keeps its last copy, as storage would, so enrichment (verification hashes,
    // rollups) sees exactly what is stored.
    input = latestPerSpan(input);
    // Processors (redaction among them) run before the spool: raw text never reaches disk.
    let accepted: number;
    let append: () => Promise<void>;
    if (this.opts.offload) {
      const out = await this.opts.offload.process(input, ctx ?? null);
      if (!out.frame) return { accepted: 0 };
      accepted = out.accepted;
      append = () => this.handOverFrame(out);
    } else {
      let batch: Batch = { spans: input, extra: [] };
      for (const p of this.processors) batch = await p(batch, ctx ?? null);
      const records: StoredRecord[] = batch.extra.length ? [...batch.spans, ...batch.extra] : batch.spans;
      if (records.length === 0) return { accepted: 0 };
      accepted = batch.spans.length;
      append = () => this.handOverRecords(records);
    }
    try {
      await append();
    } catch (err) {
      throw Object.assign(new BackpressureError('could not write to the spool; retry later', 1), { cause: err });
    }
    if (this.spool.activeRows >= this.opts.config.FLUSH_MAX_ROWS) this.kick();
    // Big records: rotate early so one segment's in-memory copy stays well under the cap; the timer still paces inserts.
    else if (this.spool.activeBytes >= this.cap.bytes / 4) void this.seal().catch((err: unknown) => this.opts.logger.error({ err }, 'pipeline: seal failed'));
    return { accepted };
  }

  /** Durably spool enrichment records produced outside a request's batch (audit of rejected auth, checkpoints). */
  async record(extra: EnrichmentRecord[]): Promise<void> {
    if (extra.length === 0) return;
    if (this.spool.totalBytes >= this.opts.config.SPOOL_MAX_BYTES) throw new BackpressureError('storage is behind and the spool is full; retry later', 5);
    await this.tracked(this.handOverRecords(extra));
  }

  /** Durably spool a frame of records encoded elsewhere (the processor worker's final checkpoints). */
  async recordFrame(frame: Buffer | null, rows: number): Promise<void> {
    if (!frame) return;
    if (this.opts.offload) await this.handOverFrame({ frame, rows, accepted: 0 });
    else await this.spool.appendFrame(frame, rows);
  }

  /**
   * Chained records go to the spool one group at a time, in order, so a failed append is known before any later
   * group is handed over (the spool would still write appends queued behind a failed write). The chains then go
   * back to their durable heads, and records made before that are refused: they may link to lost records.
   */
  private handOverFrame(out: OffloadFrame): Promise<void> {
    const offload = this.opts.offload!;
    return this.handOver({
      write: () => this.spool.appendFrame(out.frame!, out.rows),
      current: () => offload.current?.(out.frame!) !== false,
      durable: () => offload.durable?.(out),
      failed: () => offload.failed?.(out),
    });
  }

  private handOverRecords(records: StoredRecord[]): Promise<void> {
    return this.handOver({
      write: () => this.spool.append(records),
      current: () => this.opts.chain?.current(records) !== false,
      durable: () => this.opts.onDurable?.(records),
      failed: () => this.opts.chain?.failed(records),
    });
  }

  private handOver(h: Omit<Handover, 'resolve' | 'reject'>): Promise<void> {
    return new Promise((resolve, reject) => {
      this.handovers.push({ ...h, resolve, reject });
      if (this.handing) return;
      this.handing = true;
      // setImmediate: appends made in the same event-loop turn go out as one write.
      setImmediate(() => void this.handOverWaiting().catch((err: unknown) => this.opts.logger.error({ err }, 'pipeline: spool handover failed')));
    });
  }

  private async handOverWaiting(): Promise<void> {
    try {
      while (this.handovers.length) {
        const group = this.handovers;
        this.handovers = [];
        const done = await Promise.allSettled(group.map((h) => (h.current() ? h.write() : Promise.reject(new Error('an earlier spool write failed')))));
        group.forEach((h, i) => {
          const d = done[i]!;
          if (d.status === 'fulfilled') { h.durable(); h.resolve(); } else { h.failed(); h.reject(d.reason); }
        });
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
    const limit = new Promise<'timeout'>((r) => { timeout = setTimeout(() => r('timeout'), this.opts.closeTimeoutMs ?? 10_000); });
    // Never rejects: a flush that fails after the timeout must not become an unhandled rejection.
    const done = this.flush().then(() => null, (err: unknown) => err);
    const res = await Promise.race([done, limit]);
    clearTimeout(timeout);
    if (res !== null) {
      const why = res === 'timeout' ? 'timed out' : 'failed';
      this.opts.logger.warn({ err: res === 'timeout' ? undefined : res, pendingRows: this.spool.pendingRows }, `pipeline: final flush ${why}; rows stay spooled for the next start`);
    }
    await this.spool.close();
  }

  stats(): PipelineStats {
    return {
      spoolBytes: this.spool.totalBytes,
      spoolSegments: this.spool.segmentCount,
      pendingRows: this.spool.pendingRows,
      lastFlushRows: this.lastRows,
      lastFlushMs: this.lastMs,
      lastFlushError: this.lastError,
      storageHealthy: this.healthy,
      flushedTotal: this.flushed,
      spoolSyncs: this.spool.counters.syncs,
      spoolAppends: this.spool.counters.appends,
      spoolWriteFailure: this.spool.lastWriteFailure,
    };
  }

  /** Timer / size trigger: seal, then flush unless one is running or we are backing off. */
  private kick(): void {
    void this.tick().catch((err: unknown) => this.opts.logger.error({ err }, 'pipeline: writer tick failed'));
  }

  private async tick(): Promise<void> {
    if (this.closing) return; // close() does the last flush itself
    await this.seal();
    if (this.flushing || Date.now() < this.retryAt) return;
    if (this.spool.sealedSegments().length) {
      await this.runFlush().catch(() => {}); // recorded in stats and logged by runFlush
    } else if (!this.healthy) {
      // Nothing to write, but readiness should notice when storage comes back.
      this.healthy = await this.opts.storage.ping().catch(() => false);
      if (!this.healthy) this.backoff();
    }
  }

  private async seal(): Promise<void> {
    await this.spool.seal();
    this.boundMemory();
  }

  /** Keep the in-memory copies under the cap by dropping the newest (flushed last, so re-read last). */
  private boundMemory(): void {
    const segs = this.spool.sealedSegments();
    let rows = 0;
    let bytes = 0;
    for (const s of segs) if (s.records) { rows += s.records.length; bytes += s.bytes; }
    for (let i = segs.length - 1; i >= 0 && (rows > this.cap.rows || bytes > this.cap.bytes); i--) {
      const s = segs[i]!;
      if (!s.records) continue;
      rows -= s.records.length;
      bytes -= s.bytes;
      s.records = null;
    }
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
      } catch (err) {
        this.healthy = false;
        this.lastError = err instanceof Error ? err.message : String(err);
        const delay = this.backoff();
        this.opts.logger.warn({ err, retryInMs: delay, pendingRows: this.spool.pendingRows }, 'pipeline: flush to storage failed; rows stay spooled');
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
    const file = await writeRefused(join(this.opts.config.DATA_DIR, 'refused'), basename(group[0]!.path).replace(/\.seg$/, ''), refused);
    this.opts.logger.error({ rows: refused.length, file, firstError: refused[0]!.error }, 'pipeline: storage refused records; set aside in DATA_DIR/refused');
    this.opts.onRefused?.(refused.length);
  }

  /** Oldest sealed segments first, grouped into inserts of at most FLUSH_MAX_ROWS rows. */
  private async writeSealed(): Promise<void> {
    const maxRows = this.opts.config.FLUSH_MAX_ROWS;
    for (;;) {
      const segs = this.spool.sealedSegments();
      if (!segs.length) return;
      if (this.opts.storage.insertSpoolFiles) { await this.writeFiles(segs); continue; }
      const group: Segment[] = [];
      let rows: StoredRecord[] = [];
      let bytes = 0;
      for (const seg of segs) {
        if (group.length && (rows.length + seg.rows > maxRows || bytes + seg.bytes > this.cap.bytes)) break;
        const recs = await this.spool.load(seg);
        group.push(seg);
        rows = group.length === 1 ? recs : rows.concat(recs);
        bytes += seg.bytes;
      }
      const refused: RefusedRecord[] = [];
      for (let i = 0; i < rows.length; i += maxRows) {
        const chunk = rows.length <= maxRows ? rows : rows.slice(i, i + maxRows);
        const t0 = performance.now();
        if (this.isolating) refused.push(...await insertIsolating(this.opts.storage, chunk));
        else await insertRecords(this.opts.storage, chunk);
        this.noteFlush(chunk.length, performance.now() - t0);
      }
      await this.setAside(group, refused);
      for (const seg of group) await this.spool.remove(seg);
    }
  }

  /** The worker reads the segment files itself: hand over up to the byte cap at a time. */
  private async writeFiles(segs: readonly Segment[]): Promise<void> {
    const group: Segment[] = [];
    let bytes = 0;
    for (const seg of segs) {
      if (group.length && bytes + seg.bytes > this.cap.bytes) break;
      group.push(seg);
      bytes += seg.bytes;
    }
    const res = await this.opts.storage.insertSpoolFiles!(group.map((s) => s.path), this.opts.config.FLUSH_MAX_ROWS, this.isolating);
    for (const t of res.badTails) this.opts.logger.warn({ segment: t.path, error: t.error }, 'spool: segment has a bad tail or damage');
    await this.setAside(group, res.refused);
    for (const c of res.chunks) this.noteFlush(c.rows, c.ms);
    for (const seg of group) await this.spool.remove(seg);
  }

  private noteFlush(rows: number, ms: number): void {
    this.lastRows = rows;
    this.lastMs = ms;
    this.flushed += rows;
    this.opts.onFlush?.(rows, ms);
  }
}
