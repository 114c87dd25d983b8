// Runs the processor chain and the spool on a worker thread (pipeline/processor-thread.ts). The pipeline hands over
// mapped spans and is answered once their records are durable; settings are resolved here, on the main thread.
import { WorkerRpc } from '../platform/worker-rpc.ts';
import type { IngestContext } from '../core/ports/ingest.ts';
import type { IngestHost } from './ingest-host.ts';
import type { SpanRecord } from '../core/record.ts';
import type { Segment, SpoolState } from '../spool/spool.ts';
import { SpoolWriteError } from '../core/errors.ts';
import type { PolicySource } from '../processors/governance-processor.ts';
import type { AlertSettings, AlertSource } from '../processors/alerts.ts';
import type { Policy } from '../processors/governance/policy.ts';
import type { HostData, HostItem, HostReply, HostRequest, ItemResult, WorkspaceSettings } from './processor-thread.ts';

type NoId<T> = T extends unknown ? Omit<T, 'id'> : never;
type Options = Omit<HostData, 'store'> & {
  store?: string | null;
  settings: PolicySource & AlertSource;
  youngGenMb?: number;
};
type Waiting = { item: HostItem; resolve: (r: { accepted: number; rows: number }) => void; reject: (e: Error) => void };

const EMPTY_STATE: SpoolState = {
  unsealed: [],
  activeBytes: 0,
  activeRows: 0,
  counters: { appends: 0, writes: 0, syncs: 0, bytesWritten: 0 },
  lastWriteFailure: null,
};

export class ProcessorWorker implements IngestHost {
  private readonly settings: PolicySource & AlertSource;
  private readonly rpc: WorkerRpc;
  // Requests arriving in the same turn of the event loop share one message each way (each message costs
  // main-thread time); each still gets its own answer.
  private waiting: Waiting[] = [];
  private pendingSettings: WorkspaceSettings = { policies: {}, alerts: {} };
  /**
   * The settings the current thread holds, per workspace: a batch carries a workspace's settings only when they
   * changed (cloning a policy into every message cost this thread time on every batch). `thread` is the
   * WorkerRpc spawn count they were sent to: a replacement thread starts with none.
   */
  private held = { thread: 0, policies: new Map<string, Policy>(), alerts: new Map<string, AlertSettings>() };
  /** The spool as of the current thread's last answer. */
  private last: SpoolState = EMPTY_STATE;
  /** What threads that died had counted, and a write failure one reported (until its replacement writes). */
  private before: { counters: SpoolState['counters']; failure: SpoolState['lastWriteFailure'] } = {
    counters: { ...EMPTY_STATE.counters },
    failure: null,
  };
  /** The thread the spool was opened on (WorkerRpc spawn count); 0 before open(). */
  private openedOn = 0;
  private reopening: Promise<void> | null = null;
  /** After close(), calls fail (503) rather than start a new thread on a spool the collector has let go of. */
  private closed = false;
  /** Segments taken over from a thread that died, for the next seal() to hand to the writer. */
  private adopted: Segment[] = [];

  constructor(opts: Options) {
    this.settings = opts.settings;
    const { dataDir, enabled, fsync, logLevel, maxFindingsPerSpan, signEachTrace } = opts;
    const data: HostData = {
      dataDir,
      enabled,
      fsync,
      logLevel,
      maxFindingsPerSpan,
      signEachTrace,
      store: opts.store ?? null,
    };
    // A thread that dies fails its calls (nothing in them was acknowledged); the next call starts a fresh one, which
    // continues the chains from their durable heads and the spool in a new segment.
    this.rpc = new WorkerRpc(
      new URL('./processor-thread.ts', import.meta.url),
      data,
      'processor',
      opts.youngGenMb ?? 0,
    );
  }

  /** The spool as last reported, counted across the threads that held it. */
  get state(): SpoolState {
    const s = this.last;
    const c = this.before.counters;
    return {
      ...s,
      counters: {
        appends: c.appends + s.counters.appends,
        writes: c.writes + s.counters.writes,
        syncs: c.syncs + s.counters.syncs,
        bytesWritten: c.bytesWritten + s.counters.bytesWritten,
      },
      lastWriteFailure: s.lastWriteFailure ?? (s.counters.writes === 0 ? this.before.failure : null),
    };
  }

  /** Start the thread and take over the segments a previous process left (oldest first). */
  async open(): Promise<Segment[]> {
    const reply = await this.rpc.call<HostReply>({ type: 'open' } satisfies NoId<HostRequest>);
    this.openedOn = this.rpc.spawned;
    this.last = reply.state;
    return this.sealedFrom(reply);
  }

  /** Processors over one batch, then the spool; resolves once its records are durable. */
  async process(spans: SpanRecord[], ctx: IngestContext | null): Promise<{ accepted: number; rows: number }> {
    const policies: WorkspaceSettings['policies'] = {};
    const alerts: WorkspaceSettings['alerts'] = {};
    const workspaces = new Set(spans.map((s) => s.workspaceId));
    if (ctx) workspaces.add(ctx.workspaceId);
    for (const ws of workspaces) {
      policies[ws] = await this.settings.policyFor(ws);
      alerts[ws] = await this.settings.alertsFor(ws);
    }
    Object.assign(this.pendingSettings.policies, policies);
    Object.assign(this.pendingSettings.alerts, alerts);
    return new Promise((resolve, reject) => {
      if (this.waiting.push({ item: { spans, ctx }, resolve, reject }) === 1) setImmediate(() => this.sendWaiting());
    });
  }

  /** Append a frame of records encoded on this thread (its own audit chain); resolves once it is durable. */
  async append(frame: Buffer, rows: number): Promise<void> {
    const r = (await this.call({ type: 'append', frame, rows })) as { error: string | null };
    if (r.error) throw new SpoolWriteError(r.error);
  }

  /** Signed checkpoints of every chain head with unsigned records (`force`, at shutdown), or of those last signed a second ago or more, appended. */
  async checkpoints(force = true): Promise<number> {
    return ((await this.call({ type: 'checkpoints', force })) as { rows: number }).rows;
  }

  /** Seal the active segment: every segment sealed since the last call (and any taken over from a thread that died). */
  async seal(): Promise<Segment[]> {
    const sealed = this.sealedFrom(await this.call({ type: 'seal' }));
    if (!this.adopted.length) return sealed;
    const out = [...this.adopted, ...sealed];
    this.adopted = [];
    return out;
  }

  /** At shutdown: let alert webhook deliveries under way finish (up to maxMs); the ids left undelivered are logged there. */
  async settleDeliveries(maxMs: number): Promise<string[]> {
    if (!this.rpc.running) return [];
    return this.rpc.call<string[]>({ type: 'settle', maxMs } satisfies NoId<HostRequest>);
  }

  /** Seal the spool, write the chains' durable heads, and stop the thread; returns the segments sealed last. */
  async close(): Promise<void> {
    if (this.closed) return;
    try {
      if (this.rpc.running) await this.call({ type: 'close' });
    } finally {
      this.closed = true;
      await this.rpc.close();
    }
  }

  private async call(m: NoId<HostRequest>): Promise<HostReply> {
    if (this.closed) throw new SpoolWriteError('the spool is closed: the collector is shutting down');
    // A thread that died left a segment it was appending to (acknowledged records): its replacement takes it over first.
    while (this.openedOn && (!this.rpc.running || this.rpc.spawned !== this.openedOn))
      await (this.reopening ??= this.reopen());
    let reply: HostReply;
    try {
      reply = await this.rpc.call<HostReply>(m);
    } catch (err) {
      // The thread died with the call (or it could not be sent): nothing in it was acknowledged; retryable.
      throw err instanceof SpoolWriteError
        ? err
        : new SpoolWriteError(`the processor thread failed: ${(err as Error).message}`);
    }
    this.last = reply.state;
    return reply;
  }

  private async reopen(): Promise<void> {
    try {
      // The dead thread's counts carry over, and its last write failure until the replacement has written.
      const { counters, lastWriteFailure } = this.state;
      this.before = { counters, failure: lastWriteFailure };
      const unsealed = this.last.unsealed;
      this.last = { ...EMPTY_STATE, counters: { ...EMPTY_STATE.counters } };
      await this.rpc.stopped(); // nothing of the old thread still lands in what the new one takes over
      const reply = await this.rpc.call<HostReply>({ type: 'open', adopt: unsealed } satisfies NoId<HostRequest>);
      this.openedOn = this.rpc.spawned;
      this.last = reply.state;
      this.adopted.push(...this.sealedFrom(reply));
    } finally {
      this.reopening = null;
    }
  }

  private sealedFrom(r: HostReply): Segment[] {
    return (r as { sealed: Segment[] }).sealed;
  }

  /** The part of `s` the thread does not hold yet (all of it for a thread that is not running or was replaced). */
  private changedSettings(s: WorkspaceSettings): WorkspaceSettings {
    if (!this.rpc.running || this.held.thread !== this.rpc.spawned) {
      // The next call starts a new thread (spawned + 1 once it runs): it holds what this message carries.
      this.held = {
        thread: this.rpc.running ? this.rpc.spawned : this.rpc.spawned + 1,
        policies: new Map(),
        alerts: new Map(),
      };
    }
    const out: WorkspaceSettings = { policies: {}, alerts: {} };
    for (const [ws, p] of Object.entries(s.policies)) {
      if (this.held.policies.get(ws) !== p) {
        out.policies[ws] = p;
        this.held.policies.set(ws, p);
      }
    }
    for (const [ws, a] of Object.entries(s.alerts)) {
      const h = this.held.alerts.get(ws);
      if (!h || h.rules !== a.rules || h.webhookUrl !== a.webhookUrl || h.webhookSecret !== a.webhookSecret) {
        out.alerts[ws] = a;
        this.held.alerts.set(ws, a);
      }
    }
    return out;
  }

  private sendWaiting(): void {
    const batch = this.waiting;
    const settings = this.changedSettings(this.pendingSettings);
    this.waiting = [];
    this.pendingSettings = { policies: {}, alerts: {} };
    this.call({ type: 'process', items: batch.map((w) => w.item), settings }).then(
      (reply) => {
        const answers = (reply as { items: ItemResult[] }).items;
        batch.forEach((w, i) => {
          const a = answers[i];
          if (a && 'accepted' in a) w.resolve(a);
          else if (a?.spool) w.reject(new SpoolWriteError(a.error));
          else w.reject(new Error(a?.error ?? 'processor worker gave no answer'));
        });
      },
      (err: Error) => {
        // Not delivered (or the thread died): the settings may not have arrived, so the next batch carries all again.
        this.held.thread = -1;
        for (const w of batch) w.reject(err);
      },
    );
  }
}
