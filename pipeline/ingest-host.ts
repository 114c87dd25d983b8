// Where batches are processed and spooled: the processor thread (pipeline/processor-worker.ts), or the calling
// thread (pipeline/local-host.ts, for tests).
import type { IngestContext } from '../core/ports/ingest.ts';
import type { SpanRecord } from '../core/record.ts';
import type { Segment, SpoolState } from '../spool/spool.ts';

/**
 * Where batches are processed and spooled: the processor thread (pipeline/processor-worker.ts), or this thread
 * (pipeline/local-host.ts, for tests). The pipeline keeps the sealed segments and writes them to storage.
 */
export interface IngestHost {
  /** Take over the segments a previous process left (sealed, oldest first). */
  open(): Promise<Segment[]>;
  /** Processors, then the spool: resolves once the batch's records are durable; SpoolWriteError when they are not. */
  process(spans: SpanRecord[], ctx: IngestContext | null): Promise<{ accepted: number; rows: number }>;
  /** Append a frame encoded by the caller (its own audit chain's records); resolves once durable. */
  append(frame: Buffer, rows: number): Promise<void>;
  /** Seal the active segment; every segment sealed since the last call, oldest first. */
  seal(): Promise<Segment[]>;
  /** Seal and stop; later calls fail with SpoolWriteError. What is left in the spool replays at the next start. */
  close(): Promise<void>;
  /** The spool as last reported. */
  readonly state: SpoolState;
}
