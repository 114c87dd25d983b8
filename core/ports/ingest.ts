// What receivers see of the pipeline: hand over mapped records, get back once they are durable.
import type { EnrichmentRecord } from '../enrichment-records.ts';
import type { SpanRecord } from '../record.ts';
import type { Decision, FieldFinding, PolicyReason } from '../governance.ts';

export interface IngestResult {
  /** Span records written durably (fsync'd to the spool). */
  accepted: number;
}

/** Who is calling, as an authentication strategy established it. */
export interface Caller {
  workspaceId: string;
  /** The credential's public id: rate limits count per it, audit records name it as the actor. */
  keyId: string;
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
  /**
   * The source's own records other than spans (feedback votes, security alerts, trace metadata): processed and
   * spooled with the batch, atomically with its spans and its audit record, and counted as accepted items.
   */
  records?: EnrichmentRecord[];
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
