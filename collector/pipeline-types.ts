// What receivers see of the pipeline: hand over mapped records, get back once they are durable.
import type { SpanRecord } from './record.ts';

export interface IngestResult {
  /** Records written durably (fsync'd to the spool). */
  accepted: number;
}

export interface Ingestor {
  /**
   * Run processors on the records, append them to the spool and resolve once fsync'd.
   * Throws BackpressureError (503) when the spool is over its bound.
   */
  ingest(records: SpanRecord[]): Promise<IngestResult>;
}
