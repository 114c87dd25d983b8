// The processor chain and the spool together, on one thread (the processor thread, pipeline/processor-thread.ts; in
// tests, the caller's): batches are processed in arrival order and their frames appended to the spool, each batch
// answered only once the write holding it has returned. One write is in flight at a time; what is processed
// meanwhile goes out together in the next one (group commit), so processing never waits for the disk.
// When a write fails, the chains go back to their durable heads before anything else is processed, and every
// batch processed while it was in flight fails with it: those could link to the lost records.
import type { Batch, IngestContext, Processor } from '../core/ports/ingest.ts';
import type { SpanRecord, StoredRecord } from '../core/record.ts';
import { FrameArena, serializeRecords, type Segment, type Spool, type SpoolState } from '../spool/spool.ts';
import type { AuditChain, AuditMark } from '../processors/audit.ts';
import type { ChainHeadStore } from '../processors/chain-heads.ts';
import { headsOf, type VerificationChain, type VerificationMark } from '../processors/verification.ts';
import type { AlertRecord } from '../core/enrichment-records.ts';

export interface HostItem {
  spans: SpanRecord[];
  ctx: IngestContext | null;
  /** Run right before the item is processed (the processor thread applies the settings its message carried). */
  before?: () => void;
}
/** One item's answer: its rows are durable; or why not (`spool`: the append failed, a retryable condition). */
export type ItemResult = { accepted: number; rows: number } | { error: string; spool?: true };
/** A main-thread group of records already encoded there (its own audit chain): appended as it is. */
export interface FrameItem {
  frame: Buffer;
  rows: number;
}
/** What a processed group gets once its write returned: its items' answers, and for each frame null or why it failed. */
export interface GroupAnswer {
  items: ItemResult[];
  frames: Array<string | null>;
}

export interface HostChains {
  verification: VerificationChain | null;
  audit: AuditChain;
  /** Where those chains stand durably (what a rewind, or the next run, continues from). */
  heads: ChainHeadStore;
  auditHeads: ChainHeadStore;
}

type ChainMarks = { audit: AuditMark; verification: VerificationMark | null };

/** Appends up to this size are written on this thread, larger ones through the thread pool (see writeQueued). */
const SYNC_WRITE_BYTES = 64 * 1024;

/** A group's records (each list one frame, encoded when queued) and main-thread frames. */
type Written = { records: StoredRecord[]; json?: string[] };
type Queued = {
  written: Written[];
  frames: Buffer[];
  rows: number;
  appends: number;
  settle: (failure: string | null) => void;
};

/** A batch's durable or lost callbacks: one failing does not keep the others from running (nor fail the answer). */
function runAll(fns: ReadonlyArray<() => void> | undefined): void {
  for (const f of fns ?? []) {
    try {
      f();
    } catch {
      /* its own failure: the notifier and the evaluator do not throw */
    }
  }
}

export class ProcessorHost {
  readonly spool: Spool;
  private readonly processors: Processor[];
  private readonly chains: HostChains | null;
  private readonly takeAlertOutcomes: () => AlertRecord[];
  private readonly putBackAlertOutcomes: (carried: readonly AlertRecord[]) => void;
  private queue: Queued[] = [];
  /** The queued frames' bytes (those of `queue`, in order), in reused memory. */
  private readonly arena = new FrameArena();
  private writing: Promise<void> | null = null;
  /** Bumped when a write fails: a group whose processing began before that is refused (it may link to lost records). */
  private generation = 0;

  constructor(opts: {
    spool: Spool;
    processors: Processor[];
    chains?: HostChains;
    takeAlertOutcomes?: () => AlertRecord[];
    putBackAlertOutcomes?: (carried: readonly AlertRecord[]) => void;
  }) {
    this.spool = opts.spool;
    this.processors = opts.processors;
    this.chains = opts.chains ?? null;
    this.takeAlertOutcomes = opts.takeAlertOutcomes ?? (() => []);
    this.putBackAlertOutcomes = opts.putBackAlertOutcomes ?? (() => {});
  }

  /**
   * Segments a previous process left (sealed, oldest first). For the replacement of a thread that died (`adopt`
   * given), only those it had not handed to the writer yet (see Spool.adopt).
   */
  open(adopt?: readonly string[]): Segment[] {
    return adopt === undefined ? this.spool.open() : this.spool.adopt(adopt);
  }

  /**
   * Process the items in order and queue their frames, and the given main-thread frames, for the next write; resolves
   * once processed (the chains have moved: the next group may be processed), with `answer` settling once the write
   * returned. An item whose processors failed fails alone; when the write fails, every item and frame of it fails.
   */
  async process(items: HostItem[], frames: FrameItem[] = []): Promise<{ answer: Promise<GroupAnswer> }> {
    const generation = this.generation;
    const results: ItemResult[] = [];
    const written: Written[] = [];
    const onDurable: Array<() => void> = [];
    const onLost: Array<() => void> = [];
    let rows = 0;
    let appends = 0;
    for (const item of items) {
      // Where the chains stand before the item: an item failing after the audit or verification processor ran
      // must not leave them linking to records that will never be written (verify would report a gap).
      const mark = this.markChains(item);
      let batch: Batch = { spans: item.spans, extra: item.ctx?.records ? [...item.ctx.records] : [] };
      try {
        item.before?.();
        for (const p of this.processors) batch = await p(batch, item.ctx);
        const records: StoredRecord[] = batch.extra.length ? [...batch.spans, ...batch.extra] : batch.spans;
        // Serialized here, so a record that is not JSON fails its item alone (the frame is encoded when queued).
        const json = serializeRecords(records, batch.json);
        if (records.length) {
          written.push({ records, json });
          rows += records.length;
          appends++;
        }
        if (batch.durable) onDurable.push(...batch.durable);
        if (batch.lost) onLost.push(...batch.lost);
        results.push({ accepted: batch.spans.length, rows: records.length });
      } catch (err) {
        if (mark) this.restoreChains(mark);
        runAll(batch.lost);
        results.push({ error: err instanceof Error ? err.message : String(err) });
      }
    }
    for (const f of frames) {
      rows += f.rows;
      appends++;
    }
    let durable: Promise<string | null>;
    if (generation === this.generation)
      durable = this.enqueue({ written, frames: frames.map((f) => f.frame), rows, appends });
    else {
      // A write failed while this group was being processed: the chains went back, then moved on with the rest of
      // it, which is never written. Back to the durable heads again.
      this.rewind();
      durable = Promise.resolve('an earlier spool write failed');
    }
    const answer = durable.then((failure): GroupAnswer => {
      if (failure !== null) {
        runAll(onLost);
        return {
          items: results.map((r) => ('error' in r ? r : { error: failure, spool: true })),
          frames: frames.map(() => failure),
        };
      }
      runAll(onDurable);
      return { items: results, frames: frames.map(() => null) };
    });
    return { answer };
  }

  /**
   * Signed checkpoints of the chains' heads (all of them with `force`, at shutdown; else those last signed a second
   * ago or more) and the alert delivery outcomes no batch has carried yet, appended; returns their rows.
   */
  async checkpoints(force: boolean): Promise<number> {
    const signed = this.chains?.verification?.checkpoints(Date.now(), force) ?? [];
    const outcomes = this.takeAlertOutcomes(); // after signing, which may throw: taken only for the write below
    const records: StoredRecord[] = [...signed, ...outcomes];
    if (records.length === 0) return 0;
    const failure = await this.enqueue({ written: [{ records }], frames: [], rows: records.length, appends: 1 });
    if (failure) {
      this.putBackAlertOutcomes(outcomes); // for the next batch or checkpoint
      throw new Error(failure);
    }
    return records.length;
  }

  /** Seal the active segment once the writes queued so far have returned. */
  async seal(): Promise<Segment[]> {
    await this.settled();
    return this.spool.seal();
  }

  state(): SpoolState {
    return this.spool.state();
  }

  /** Finish the queued writes, seal the spool and write the chains' durable heads (at shutdown). */
  async close(): Promise<Segment[]> {
    await this.settled();
    const sealed = this.spool.close();
    await this.chains?.heads.flush();
    await this.chains?.auditHeads.flush();
    return sealed;
  }

  private markChains(item: HostItem): ChainMarks | null {
    if (!this.chains) return null;
    const workspaces = item.spans.map((s) => s.workspaceId);
    if (item.ctx) workspaces.push(item.ctx.workspaceId);
    return {
      audit: this.chains.audit.mark(workspaces),
      verification: this.chains.verification?.mark(workspaces) ?? null,
    };
  }

  private restoreChains(mark: ChainMarks): void {
    this.chains?.audit.restore(mark.audit);
    if (mark.verification) this.chains?.verification?.restore(mark.verification);
  }

  /** Records were lost: the chains continue as a new run from what is durable, as after a restart. */
  private rewind(): void {
    if (!this.chains) return;
    this.chains.verification?.rewind(this.chains.heads.current(), Date.now());
    this.chains.audit.rewind(this.chains.auditHeads.current());
  }

  /** Once the writes queued so far have returned (and their durable or lost callbacks have run). */
  async settled(): Promise<void> {
    while (this.writing) await this.writing;
  }

  /** Encodes `q`'s frames after those queued; resolves with null once its bytes are durable, or with why not. */
  private enqueue(q: Omit<Queued, 'settle'>): Promise<string | null> {
    if (q.written.length === 0 && q.frames.length === 0) return Promise.resolve(null);
    const mark = this.arena.size;
    try {
      for (const w of q.written) this.arena.add(w.records, w.json);
      for (const frame of q.frames) this.arena.addFrame(frame);
    } catch (err) {
      // Not JSON (a processor's bug): the chains moved past records that will not be written. As after a failed write.
      this.arena.truncate(mark);
      this.generation++;
      this.rewind();
      return Promise.resolve(`could not encode the records: ${err instanceof Error ? err.message : String(err)}`);
    }
    return new Promise((settle) => {
      this.queue.push({ ...q, settle });
      this.writing ??= this.writeQueued().finally(() => {
        this.writing = null;
      });
    });
  }

  /** One write at a time, of everything queued while the one before was in flight. */
  private async writeQueued(): Promise<void> {
    while (this.queue.length) {
      const group = this.queue;
      this.queue = [];
      const buf = this.arena.take(); // the group's frames, left as they are until the next take()
      let rows = 0;
      let appends = 0;
      for (const q of group) {
        rows += q.rows;
        appends += q.appends;
      }
      try {
        // A small write is made on this thread: its answers save two hops through the thread pool (most of the
        // proxy's added latency at moderate load), and processing a few requests more meanwhile gains little.
        await this.spool.append(buf, rows, appends, buf.length <= SYNC_WRITE_BYTES);
      } catch (err) {
        const failure = `could not write to the spool: ${err instanceof Error ? err.message : String(err)}`;
        // What was processed meanwhile may link to the lost records: it fails too, and the chains continue as a new
        // run from what is durable, as a restart would, before anything else is processed.
        const later = this.queue;
        this.queue = [];
        this.arena.truncate();
        this.generation++;
        this.rewind();
        for (const q of [...group, ...later]) q.settle(failure);
        continue;
      }
      if (this.chains) {
        for (const q of group) {
          for (const { records } of q.written) {
            this.chains.heads.durable(headsOf(records, 'verification'));
            this.chains.auditHeads.durable(headsOf(records, 'audit'));
          }
        }
      }
      for (const q of group) q.settle(null);
    }
  }
}
