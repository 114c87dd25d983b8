// What receivers see of the pipeline: hand over mapped records, get back once they are durable.
import type { EnrichmentRecord } from '../enrichment-records.ts';
import type { SpanRecord } from '../record.ts';
import type { Segment, SpoolState } from '../../spool/spool.ts';
import type { FieldFinding } from '../../processors/governance/scan.ts';
import type { Decision, PolicyReason } from '../../processors/governance/policy.ts';

export interface IngestResult {
  /** Span records written durably (fsync'd to the spool). */
  accepted: number;
}

/** Who sent a batch and through which route: processors use it (audit, policy), storage does not. */
export interface IngestContext {
  workspaceId: string;
  keyId: string;
  route: string;
  /** Items the route rejected before the pipeline (validation), for the audit record. */
  rejected?: number;
  /** The proxy's governance preflight for one span of the batch: its findings and decision are recorded with it. */
  preflight?: PreflightResult;
}

/** What a preflight found on a request before it was forwarded (the stored span holds the redacted text). */
export interface PreflightResult {
  spanId: string;
  /** Offsets into the request field as sent; `field` is `request:<path>`. */
  findings: FieldFinding[];
  decision: Decision;
  reasons: PolicyReason[];
  /** Fields of the stored span the preflight covered: the processor does not report its own findings there twice. */
  coveredFields: string[];
}

/** The unit processors work on: spans plus the enrichment records produced so far. */
export interface Batch {
  spans: SpanRecord[];
  extra: EnrichmentRecord[];
  /** Run once the batch's records are durable; dropped if they never are (a failed item or spool write). */
  durable?: Array<() => void>;
  /** Run instead when they never are: a processor takes back what it did for records that were lost. */
  lost?: Array<() => void>;
  /** JSON already written for some records (the verification processor's canonical form of each span), which their spool frame reuses. */
  json?: Map<object, string>;
}

export type Processor = (batch: Batch, ctx: IngestContext | null) => Batch | Promise<Batch>;

export interface Ingestor {
  /**
   * Run processors on the records, append them to the spool and resolve once fsync'd.
   * Throws BackpressureError (503) when the spool is over its bound.
   */
  ingest(records: SpanRecord[], ctx?: IngestContext): Promise<IngestResult>;
}

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
