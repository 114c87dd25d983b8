// Runs the processor chain on a worker thread (processors/worker-host.ts). The pipeline hands over mapped
// spans and gets back the encoded spool frame; settings are resolved here, on the main thread.
import { WorkerRpc } from '../collector/worker-rpc.ts';
import type { IngestContext } from '../collector/pipeline-types.ts';
import type { SpanRecord } from '../collector/record.ts';
import type { PolicySource } from './governance-processor.ts';
import type { AlertSource } from './alerts.ts';
import type { Encoded, HostRequest, WorkspaceSettings } from './worker-host.ts';

export interface ProcessedFrame { frame: Buffer | null; rows: number; accepted: number }

type Request = Omit<Extract<HostRequest, { type: 'process' }>, 'id'> | Omit<Extract<HostRequest, { type: 'checkpoints' }>, 'id'>;
type Options = { dataDir: string; enabled: boolean; logLevel: string; maxFindingsPerSpan?: number; settings: PolicySource & AlertSource };

export class ProcessorWorker {
  private readonly settings: PolicySource & AlertSource;
  private readonly rpc: WorkerRpc;

  constructor(opts: Options) {
    this.settings = opts.settings;
    const { dataDir, enabled, logLevel, maxFindingsPerSpan } = opts;
    // A worker that dies fails its batches (never acknowledged); the next batch starts a fresh one.
    this.rpc = new WorkerRpc(new URL('./worker-host.ts', import.meta.url), { dataDir, enabled, logLevel, maxFindingsPerSpan }, 'processor');
  }

  /** Processors over one batch; resolves with the spool frame of spans plus enrichment records. */
  async process(spans: SpanRecord[], ctx: IngestContext | null): Promise<ProcessedFrame> {
    const settings: WorkspaceSettings = { policies: {}, alerts: {} };
    for (const ws of new Set(spans.map((s) => s.workspaceId))) {
      settings.policies[ws] = await this.settings.policyFor(ws);
      settings.alerts[ws] = await this.settings.alertsFor(ws);
    }
    return this.send({ type: 'process', spans, ctx, settings });
  }

  /** Start the thread now rather than on the first batch. */
  async start(): Promise<void> { await this.process([], null); }

  /** Signed checkpoints of every chain head (at shutdown). */
  checkpoints(): Promise<ProcessedFrame> { return this.send({ type: 'checkpoints' }); }

  close(): Promise<void> { return this.rpc.close(); }

  private async send(req: Request): Promise<ProcessedFrame> {
    const e = await this.rpc.call<Encoded>(req);
    return { frame: e.frame ? Buffer.from(e.frame.buffer, e.frame.byteOffset, e.frame.byteLength) : null, rows: e.rows, accepted: e.accepted };
  }
}
