// Runs the processor chain on a worker thread (processors/worker-host.ts). The pipeline hands over mapped
// spans and gets back the encoded spool frame; settings are resolved here, on the main thread.
import { Worker } from 'node:worker_threads';
import type { IngestContext } from '../collector/pipeline-types.ts';
import type { SpanRecord } from '../collector/record.ts';
import type { PolicySource } from './governance-processor.ts';
import type { AlertSource } from './alerts.ts';
import type { Encoded, HostReply, HostRequest, WorkspaceSettings } from './worker-host.ts';

export interface ProcessedFrame { frame: Buffer | null; rows: number; accepted: number }

type Pending = { resolve: (v: ProcessedFrame) => void; reject: (e: Error) => void };
type Request = { type: 'process'; spans: SpanRecord[]; ctx: IngestContext | null; settings: WorkspaceSettings } | { type: 'checkpoints' };

export class ProcessorWorker {
  private readonly opts: { dataDir: string; enabled: boolean; logLevel: string; settings: PolicySource & AlertSource };
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(opts: { dataDir: string; enabled: boolean; logLevel: string; settings: PolicySource & AlertSource }) {
    this.opts = opts;
  }

  /** Processors over one batch; resolves with the spool frame of spans plus enrichment records. */
  async process(spans: SpanRecord[], ctx: IngestContext | null): Promise<ProcessedFrame> {
    const settings: WorkspaceSettings = { policies: {}, alerts: {} };
    for (const ws of new Set(spans.map((s) => s.workspaceId))) {
      settings.policies[ws] = await this.opts.settings.policyFor(ws);
      settings.alerts[ws] = await this.opts.settings.alertsFor(ws);
    }
    return this.send({ type: 'process', spans, ctx, settings });
  }

  /** Start the thread now rather than on the first batch. */
  async start(): Promise<void> { await this.process([], null); }

  /** Signed checkpoints of every chain head (at shutdown). */
  checkpoints(): Promise<ProcessedFrame> { return this.send({ type: 'checkpoints' }); }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    await w?.terminate();
  }

  private send(req: Request): Promise<ProcessedFrame> {
    const w = (this.worker ??= this.spawn());
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      w.postMessage({ id, ...req } as HostRequest);
    });
  }

  private spawn(): Worker {
    const { dataDir, enabled, logLevel } = this.opts;
    const w = new Worker(new URL('./worker-host.ts', import.meta.url), { workerData: { dataDir, enabled, logLevel } });
    w.on('message', (m: HostReply) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) p.resolve(toBuffer(m.value));
      else p.reject(new Error(`processing failed: ${m.message}`));
    });
    // A crashed worker fails its batches (never acknowledged); the next batch starts a fresh one.
    const fail = (err: Error) => {
      if (this.worker !== w) return;
      this.worker = null;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`processor worker exited (code ${code})`)));
    return w;
  }
}

function toBuffer(e: Encoded): ProcessedFrame {
  return { frame: e.frame ? Buffer.from(e.frame.buffer, e.frame.byteOffset, e.frame.byteLength) : null, rows: e.rows, accepted: e.accepted };
}
