// Runs the processor chain on a worker thread (processors/worker-host.ts). The pipeline hands over mapped
// spans and gets back the encoded spool frame; settings are resolved here, on the main thread.
import { join } from 'node:path';
import { WorkerRpc } from '../collector/worker-rpc.ts';
import { ChainHeadStore } from './chain-heads.ts';
import type { ChainHead } from './verification.ts';
import type { IngestContext } from '../collector/pipeline-types.ts';
import type { SpanRecord } from '../collector/record.ts';
import type { PolicySource } from './governance-processor.ts';
import type { AlertSettings, AlertSource } from './alerts.ts';
import type { Policy } from './governance/policy.ts';
import type { Encoded, HostItem, HostRequest, WorkspaceSettings } from './worker-host.ts';

export interface ProcessedFrame { frame: Buffer | null; rows: number; accepted: number; heads?: { verification: Record<string, ChainHead>; audit: Record<string, ChainHead> } }

type NoId<T> = T extends unknown ? Omit<T, 'id'> : never;
type Options = { dataDir: string; enabled: boolean; logLevel: string; maxFindingsPerSpan?: number; signEachTrace?: boolean; store?: string | null; settings: PolicySource & AlertSource; youngGenMb?: number };
type Waiting = { item: HostItem; resolve: (f: ProcessedFrame) => void; reject: (e: Error) => void };

const frameOf = (e: Encoded): ProcessedFrame =>
  ({ frame: e.frame ? Buffer.from(e.frame.buffer, e.frame.byteOffset, e.frame.byteLength) : null, rows: e.rows, accepted: e.accepted, ...e.heads ? { heads: e.heads } : {} });

export class ProcessorWorker {
  private readonly settings: PolicySource & AlertSource;
  private readonly rpc: WorkerRpc;
  // Requests arriving in the same turn of the event loop share one message each way (a message costs
  // ~35 µs of main-thread time at 50 concurrent requests); each still gets its own frame.
  private waiting: Waiting[] = [];
  private pendingSettings: WorkspaceSettings = { policies: {}, alerts: {} };
  /**
   * The settings the current thread holds, per workspace: a batch carries a workspace's settings only when they
   * changed (cloning a policy into every message cost ~9 µs of this thread's time per batch). `thread` is the
   * WorkerRpc spawn count they were sent to: a replacement thread starts with none.
   */
  private held = { thread: 0, policies: new Map<string, Policy>(), alerts: new Map<string, AlertSettings>() };

  private readonly heads: ChainHeadStore;
  private readonly auditHeads: ChainHeadStore;
  /** Bumped at each rewind; frames remember the one their batch was sent in. */
  private gen = 0;
  private readonly genOf = new WeakMap<Buffer, number>();

  constructor(opts: Options) {
    this.settings = opts.settings;
    this.heads = new ChainHeadStore(join(opts.dataDir, 'keys'), 'verification', opts.store ?? null);
    this.auditHeads = new ChainHeadStore(join(opts.dataDir, 'keys'), 'audit-ingest', opts.store ?? null);
    const { dataDir, enabled, logLevel, maxFindingsPerSpan, signEachTrace } = opts;
    const store = opts.store ?? null;
    // A worker that dies fails its batches (never acknowledged); the next batch starts a fresh one.
    this.rpc = new WorkerRpc(new URL('./worker-host.ts', import.meta.url), { dataDir, enabled, logLevel, maxFindingsPerSpan, signEachTrace, store }, 'processor', opts.youngGenMb ?? 0);
  }

  /** Processors over one batch; resolves with the spool frame of spans plus enrichment records. */
  async process(spans: SpanRecord[], ctx: IngestContext | null): Promise<ProcessedFrame> {
    const policies: WorkspaceSettings['policies'] = {};
    const alerts: WorkspaceSettings['alerts'] = {};
    for (const ws of new Set(spans.map((s) => s.workspaceId))) {
      policies[ws] = await this.settings.policyFor(ws);
      alerts[ws] = await this.settings.alertsFor(ws);
    }
    Object.assign(this.pendingSettings.policies, policies);
    Object.assign(this.pendingSettings.alerts, alerts);
    return new Promise<ProcessedFrame>((resolve, reject) => {
      if (this.waiting.push({ item: { spans, ctx }, resolve, reject }) === 1) setImmediate(() => this.sendWaiting());
    });
  }

  /** Start the thread now rather than on the first batch. */
  async start(): Promise<void> { await this.process([], null); }

  /** Signed checkpoints of every chain head with unsigned records (`force`, at shutdown), or of those last signed a second ago or more. */
  async checkpoints(force = true): Promise<ProcessedFrame> {
    const gen = this.gen;
    const [e] = await this.rpc.call<Encoded[]>({ type: 'checkpoints', force } satisfies NoId<HostRequest>);
    return this.made(frameOf(e!), gen);
  }

  /** At shutdown: let alert webhook deliveries under way finish (up to maxMs); the ids left undelivered are logged there. */
  async settleDeliveries(maxMs: number): Promise<string[]> {
    if (!this.rpc.running) return [];
    return this.rpc.call<string[]>({ type: 'settle', maxMs } satisfies NoId<HostRequest>);
  }

  /** The pipeline calls this once a processed frame is fsync'd: its chain heads may now be linked to. */
  durable(out: ProcessedFrame): void { this.heads.durable(out.heads?.verification); this.auditHeads.durable(out.heads?.audit); }

  /**
   * The pipeline calls this when a frame could not be appended: its records are lost. The worker's chains go back
   * to the durable heads (a new run, as after a restart), and frames made before that are no longer current.
   */
  failed(out: ProcessedFrame): void {
    if (!out.frame || !this.current(out.frame)) return; // an earlier rewind already covers it
    this.gen++;
    // Sent after every batch already sent, so the worker rewinds right after making the frames now stale. Should
    // it fail, the worker died: its successor starts new runs anyway.
    const m = { type: 'rewind', verification: this.heads.current(), audit: this.auditHeads.current() } satisfies NoId<HostRequest>;
    this.rpc.call(m).catch(() => {});
  }

  /** False for a frame made before a rewind: it may link to (or sign) records that were never stored. */
  current(frame: Buffer): boolean { return (this.genOf.get(frame) ?? this.gen) === this.gen; }

  async close(): Promise<void> { await this.heads.flush(); await this.auditHeads.flush(); await this.rpc.close(); }

  private made(f: ProcessedFrame, gen: number): ProcessedFrame {
    if (f.frame) this.genOf.set(f.frame, gen);
    return f;
  }

  /** The part of `s` the thread does not hold yet (all of it for a thread that is not running or was replaced). */
  private changedSettings(s: WorkspaceSettings): WorkspaceSettings {
    if (!this.rpc.running || this.held.thread !== this.rpc.spawned) {
      // The next call starts a new thread (spawned + 1 once it runs): it holds what this message carries.
      this.held = { thread: this.rpc.running ? this.rpc.spawned : this.rpc.spawned + 1, policies: new Map(), alerts: new Map() };
    }
    const out: WorkspaceSettings = { policies: {}, alerts: {} };
    for (const [ws, p] of Object.entries(s.policies)) {
      if (this.held.policies.get(ws) !== p) { out.policies[ws] = p; this.held.policies.set(ws, p); }
    }
    for (const [ws, a] of Object.entries(s.alerts)) {
      const h = this.held.alerts.get(ws);
      if (!h || h.rules !== a.rules || h.webhookUrl !== a.webhookUrl || h.webhookSecret !== a.webhookSecret) { out.alerts[ws] = a; this.held.alerts.set(ws, a); }
    }
    return out;
  }

  private sendWaiting(): void {
    const batch = this.waiting;
    const settings = this.changedSettings(this.pendingSettings);
    this.waiting = [];
    this.pendingSettings = { policies: {}, alerts: {} };
    const gen = this.gen;
    const req = { type: 'process', items: batch.map((w) => w.item), settings } satisfies NoId<HostRequest>;
    this.rpc.call<Array<Encoded | { error: string }>>(req).then(
      (answers) => batch.forEach((w, i) => {
        const a = answers[i];
        if (a && 'frame' in a) w.resolve(this.made(frameOf(a), gen));
        else w.reject(new Error(a?.error ?? 'processor worker gave no answer'));
      }),
      (err: Error) => {
        // Not delivered (or the thread died): the settings may not have arrived, so the next batch carries all again.
        this.held.thread = -1;
        for (const w of batch) w.reject(err);
      },
    );
  }
}
