// Worker-thread side of ProcessorWorker: runs the processor chain and encodes the spool frame, so the
// CPU-heavy part of ingestion (scanning, hashing, serializing) stays off the thread that answers HTTP.
// Batches are processed one at a time, in arrival order: the audit and verification chains depend on it.
import { workerData } from 'node:worker_threads';
import { serveRpc } from '../collector/worker-rpc.ts';
import type { IngestContext, Batch } from '../collector/pipeline-types.ts';
import type { SpanRecord, StoredRecord } from '../collector/record.ts';
import { encodeFrame } from '../collector/spool.ts';
import { createLogger } from '../collector/logger.ts';
import { DEFAULT_POLICY, type Policy } from './governance/policy.ts';
import type { AlertSettings } from './alerts.ts';
import { createEnrichment } from './index.ts';
import { join } from 'node:path';
import { readChainHeads } from './chain-heads.ts';
import { headsOf, type ChainHead } from './verification.ts';

export interface WorkspaceSettings { policies: Record<string, Policy>; alerts: Record<string, AlertSettings> }
export interface HostItem { spans: SpanRecord[]; ctx: IngestContext | null }
export type HostRequest =
  | { id: number; type: 'process'; items: HostItem[]; settings: WorkspaceSettings }
  | { id: number; type: 'checkpoints'; force: boolean }
  | { id: number; type: 'rewind'; verification: Record<string, ChainHead>; audit: Record<string, ChainHead> }
  | { id: number; type: 'settle'; maxMs: number };
export interface Encoded { frame: Uint8Array | null; rows: number; accepted: number; heads?: { verification: Record<string, ChainHead>; audit: Record<string, ChainHead> } }

const { dataDir, enabled, logLevel, maxFindingsPerSpan, signEachTrace, store } = workerData as { dataDir: string; enabled: boolean; logLevel: string; maxFindingsPerSpan?: number; signEachTrace?: boolean; store: string | null };
const current: WorkspaceSettings = { policies: {}, alerts: {} };
// The main thread resolved each batch's workspace settings (its SettingsStore is the one that sees changes) and sends
// a workspace's again only when they changed: what this thread holds is the latest it was sent.
const settings = {
  policyFor: async (ws: string) => current.policies[ws] ?? DEFAULT_POLICY,
  alertsFor: async (ws: string) => current.alerts[ws] ?? { rules: [] },
};
const keysDir = join(dataDir, 'keys');
const enrichment = createEnrichment({
  dataDir, enabled, settings, log: createLogger(logLevel), maxFindingsPerSpan, signEachTrace,
  previousHeads: readChainHeads(keysDir, 'verification', store), previousAuditHeads: readChainHeads(keysDir, 'audit-ingest', store),
});

function encode(records: StoredRecord[], accepted: number): Encoded {
  // The frame owns its ArrayBuffer (not a slice of the shared pool), so the transfer below moves exactly it.
  const heads = { verification: headsOf(records, 'verification'), audit: headsOf(records, 'audit') };
  const frame = records.length ? encodeFrame(records, true) : null;
  const exact = frame && frame.byteOffset === 0 && frame.buffer.byteLength === frame.length;
  return { frame: frame ? (exact ? new Uint8Array(frame.buffer, 0, frame.length) : new Uint8Array(frame)) : null, rows: records.length, accepted, heads };
}

async function processItem(item: HostItem): Promise<Encoded> {
  let batch: Batch = { spans: item.spans, extra: [] };
  for (const p of enrichment.processors) batch = await p(batch, item.ctx);
  return encode(batch.extra.length ? [...batch.spans, ...batch.extra] : batch.spans, batch.spans.length);
}

/** One answer per item (each request's own frame), in order; an item that fails fails alone. */
async function handle(m: Exclude<HostRequest, { type: 'settle' | 'rewind' }>): Promise<Array<Encoded | { error: string }>> {
  // The chains' heads signed (all of them at shutdown; while idle, those last signed a second ago or more), and the
  // delivery outcomes no batch has carried yet.
  if (m.type === 'checkpoints') return [encode([...enrichment.verification?.checkpoints(Date.now(), m.force) ?? [], ...enrichment.takeAlertOutcomes()], 0)];
  Object.assign(current.policies, m.settings.policies);
  Object.assign(current.alerts, m.settings.alerts);
  const out: Array<Encoded | { error: string }> = [];
  for (const item of m.items) {
    try {
      out.push(await processItem(item));
    } catch (err) {
      out.push({ error: err instanceof Error ? err.message : String(err) });
    }
  }
  return out;
}

// In order: the audit and verification chains depend on it. Frames move to the main thread, not copied.
serveRpc<HostRequest>(async (m) => {
  if (m.type === 'settle') return { value: await enrichment.settleDeliveries(m.maxMs) };
  if (m.type === 'rewind') {
    // Only the chains go back (to what is durable); alert windows and webhook deliveries stay as they are.
    enrichment.verification?.rewind(m.verification, Date.now());
    enrichment.audit.rewind(m.audit);
    return { value: null };
  }
  const value = await handle(m);
  return { value, transfer: value.flatMap((v) => ('frame' in v && v.frame ? [v.frame.buffer as ArrayBuffer] : [])) };
}, true);
