// The processor chain and the spool together, on one thread (the processor thread, processors/worker-host.ts; in
// tests, the caller's): batches are processed in arrival order, their frames appended to the spool in one write per
// group, and each answered only once that write has returned. A failed write is known before the next batch is
// processed, so the chains go back to their durable heads at once and nothing later links to the lost records.
import type { Batch, IngestContext, Processor } from '../collector/pipeline-types.ts';
import type { SpanRecord, StoredRecord } from '../collector/record.ts';
import { encodeFrame, type Segment, type Spool, type SpoolState } from '../collector/spool.ts';
import type { AuditChain } from './audit.ts';
import type { ChainHeadStore } from './chain-heads.ts';
import { headsOf, type VerificationChain } from './verification.ts';
import type { AlertRecord } from '../collector/enrichment-records.ts';

export interface HostItem { spans: SpanRecord[]; ctx: IngestContext | null }
/** One item's answer: its rows are durable; or why not (`spool`: the append failed, a retryable condition). */
export type ItemResult = { accepted: number; rows: number } | { error: string; spool?: true };
/** A main-thread group of records already encoded there (its own audit chain): appended as it is. */
export interface FrameItem { frame: Buffer; rows: number }

export interface HostChains {
  verification: VerificationChain | null;
  audit: AuditChain;
  /** Where those chains stand durably (what a rewind, or the next run, continues from). */
  heads: ChainHeadStore;
  auditHeads: ChainHeadStore;
}

export class ProcessorHost {
  readonly spool: Spool;
  private readonly processors: Processor[];
  private readonly chains: HostChains | null;
  private readonly takeAlertOutcomes: () => AlertRecord[];

  constructor(opts: { spool: Spool; processors: Processor[]; chains?: HostChains; takeAlertOutcomes?: () => AlertRecord[] }) {
    this.spool = opts.spool;
    this.processors = opts.processors;
    this.chains = opts.chains ?? null;
    this.takeAlertOutcomes = opts.takeAlertOutcomes ?? (() => []);
  }

  /**
   * Segments a previous process left (sealed, oldest first). For the replacement of a thread that died (`adopt`
   * given), only the segment it was appending to: its sealed ones are known to the writer already.
   */
  open(adopt?: string | null): Segment[] {
    if (adopt === undefined) return this.spool.open();
    const seg = this.spool.adopt(adopt);
    return seg ? [seg] : [];
  }

  /**
   * Process the items in order and append all their frames, and the given main-thread frames, as one group. An
   * item whose processors failed fails alone; when the append fails, every item and frame of the group fails.
   */
  async process(items: HostItem[], frames: FrameItem[] = []): Promise<{ items: ItemResult[]; frames: Array<string | null> }> {
    const results: ItemResult[] = [];
    const parts: Buffer[] = [];
    const written: StoredRecord[][] = [];
    let rows = 0;
    let appends = 0;
    for (const item of items) {
      try {
        let batch: Batch = { spans: item.spans, extra: [] };
        for (const p of this.processors) batch = await p(batch, item.ctx);
        const records: StoredRecord[] = batch.extra.length ? [...batch.spans, ...batch.extra] : batch.spans;
        if (records.length) { parts.push(encodeFrame(records)); written.push(records); rows += records.length; appends++; }
        results.push({ accepted: batch.spans.length, rows: records.length });
      } catch (err) {
        results.push({ error: err instanceof Error ? err.message : String(err) });
      }
    }
    for (const f of frames) { parts.push(f.frame); rows += f.rows; appends++; }
    const failure = this.append(parts, rows, appends, written);
    if (!failure) return { items: results, frames: frames.map(() => null) };
    return { items: results.map((r) => ('error' in r ? r : { error: failure, spool: true })), frames: frames.map(() => failure) };
  }

  /**
   * Signed checkpoints of the chains' heads (all of them with `force`, at shutdown; else those last signed a second
   * ago or more) and the alert delivery outcomes no batch has carried yet, appended; returns their rows.
   */
  checkpoints(force: boolean): number {
    const records: StoredRecord[] = [...this.chains?.verification?.checkpoints(Date.now(), force) ?? [], ...this.takeAlertOutcomes()];
    if (records.length === 0) return 0;
    const failure = this.append([encodeFrame(records)], records.length, 1, [records]);
    if (failure) throw new Error(failure);
    return records.length;
  }

  seal(): Segment[] { return this.spool.seal(); }
  state(): SpoolState { return this.spool.state(); }

  /** Seal the spool and write the chains' durable heads (at shutdown). */
  async close(): Promise<Segment[]> {
    const sealed = this.spool.close();
    await this.chains?.heads.flush();
    await this.chains?.auditHeads.flush();
    return sealed;
  }

  /** One write for the group; null when it is durable, else why not (the chains are back at their durable heads). */
  private append(parts: Buffer[], rows: number, appends: number, written: StoredRecord[][]): string | null {
    if (parts.length === 0) return null;
    try {
      this.spool.append(parts.length === 1 ? parts[0]! : Buffer.concat(parts), rows, appends);
    } catch (err) {
      if (this.chains) {
        // The lost records may be linked to: continue as a new run from what is durable, as a restart would.
        this.chains.verification?.rewind(this.chains.heads.current(), Date.now());
        this.chains.audit.rewind(this.chains.auditHeads.current());
      }
      return `could not write to the spool: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (this.chains) {
      for (const records of written) {
        this.chains.heads.durable(headsOf(records, 'verification'));
        this.chains.auditHeads.durable(headsOf(records, 'audit'));
      }
    }
    return null;
  }
}
