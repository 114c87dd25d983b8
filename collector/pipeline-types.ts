// What receivers see of the pipeline: hand over mapped records, get back once they are durable.
import type { EnrichmentRecord } from './enrichment-records.ts';
import type { SpanRecord } from './record.ts';

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
}

/** The unit processors work on: spans plus the enrichment records produced so far. */
export interface Batch {
  spans: SpanRecord[];
  extra: EnrichmentRecord[];
}

export type Processor = (batch: Batch, ctx: IngestContext | null) => Batch | Promise<Batch>;

export interface Ingestor {
  /**
   * Run processors on the records, append them to the spool and resolve once fsync'd.
   * Throws BackpressureError (503) when the spool is over its bound.
   */
  ingest(records: SpanRecord[], ctx?: IngestContext): Promise<IngestResult>;
}
