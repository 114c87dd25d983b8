// Worker-thread side of ProcessorWorker: the processor chain and the spool (pipeline/processor-host.ts), so the CPU-heavy part
// of ingestion (scanning, hashing, serializing) and the disk writes stay off the thread that answers HTTP.
// Messages are handled in arrival order: the audit and verification chains depend on it. Batches and frames that
// arrive together are processed as one group; groups processed while a spool write is in flight share the next one.
import { workerData } from 'node:worker_threads';
import { join } from 'node:path';
import { serveRpc } from '../platform/worker-rpc.ts';
import { Spool, type Segment, type SpoolState } from '../spool/spool.ts';
import { createLogger } from '../platform/logger.ts';
import { DEFAULT_POLICY, type Policy } from '../processors/governance/policy.ts';
import type { AlertSettings } from '../processors/alerts.ts';
import { createEnrichment } from '../processors/index.ts';
import { ChainHeadStore } from '../processors/chain-heads.ts';
import { alertFiresFile, readAlertFires } from '../processors/alert-fires.ts';
import { ProcessorHost, type FrameItem, type GroupAnswer, type HostItem, type ItemResult } from './processor-host.ts';

export type { HostItem, ItemResult };
export interface WorkspaceSettings {
  policies: Record<string, Policy>;
  alerts: Record<string, AlertSettings>;
}
export interface HostData {
  dataDir: string;
  enabled: boolean;
  fsync: boolean;
  logLevel: string;
  maxFindingsPerSpan?: number;
  signEachTrace?: boolean;
  store: string | null;
}
export type HostRequest =
  | { id: number; type: 'open'; adopt?: string[] }
  | { id: number; type: 'process'; items: HostItem[]; settings: WorkspaceSettings }
  | { id: number; type: 'append'; frame: Uint8Array; rows: number }
  | { id: number; type: 'checkpoints'; force: boolean }
  | { id: number; type: 'seal' }
  | { id: number; type: 'close' }
  | { id: number; type: 'settle'; maxMs: number };
/** Every answer but settle's carries the spool's state, which the HTTP thread reads for limits and metrics. */
export type HostReply =
  | { state: SpoolState; sealed: Segment[] }
  | { state: SpoolState; items: ItemResult[] }
  | { state: SpoolState; error: string | null }
  | { state: SpoolState; rows: number };

const { dataDir, enabled, fsync, logLevel, maxFindingsPerSpan, signEachTrace, store } = workerData as HostData;
const current: WorkspaceSettings = { policies: {}, alerts: {} };
// The main thread resolved each batch's workspace settings (its SettingsStore is the one that sees changes) and sends
// a workspace's again only when they changed: what this thread holds is the latest it was sent.
const settings = {
  policyFor: async (ws: string) => current.policies[ws] ?? DEFAULT_POLICY,
  alertsFor: async (ws: string) => current.alerts[ws] ?? { rules: [] },
};
const log = createLogger(logLevel);
const keysDir = join(dataDir, 'keys');
const heads = new ChainHeadStore(keysDir, 'verification', store);
const auditHeads = new ChainHeadStore(keysDir, 'audit-ingest', store);
const fires = alertFiresFile(dataDir, () => enrichment.alertFires());
const enrichment = createEnrichment({
  dataDir,
  enabled,
  settings,
  log,
  maxFindingsPerSpan,
  signEachTrace,
  previousHeads: heads.current(),
  previousAuditHeads: auditHeads.current(),
  previousAlertFires: enabled ? readAlertFires(dataDir) : {},
  onAlertFired: () => fires.changed(),
});
const host = new ProcessorHost({
  spool: new Spool({ dir: join(dataDir, 'spool'), fsync, logger: log }),
  processors: enrichment.processors,
  chains: { verification: enrichment.verification, audit: enrichment.audit, heads, auditHeads },
  takeAlertOutcomes: () => enrichment.takeAlertOutcomes(),
  putBackAlertOutcomes: (carried) => enrichment.putBackAlertOutcomes(carried),
});

type Queued = { m: HostRequest; resolve: (v: { value: unknown }) => void; reject: (e: unknown) => void };
let queue: Queued[] = [];
let draining = false;

/** Batches and frames waiting at the head of the queue go out as one group; anything else runs on its own, in order. */
async function drain(): Promise<void> {
  while (queue.length) {
    const first = queue[0]!;
    if (first.m.type === 'process' || first.m.type === 'append') {
      let n = 0;
      while (n < queue.length && (queue[n]!.m.type === 'process' || queue[n]!.m.type === 'append')) n++;
      const group = queue.slice(0, n);
      queue = queue.slice(n);
      await runGroup(group);
      continue;
    }
    queue.shift();
    try {
      first.resolve({ value: await runOne(first.m) });
    } catch (err) {
      first.reject(err);
    }
  }
}

/** Processes the group now; its answers go out once the write holding it has returned (the next group meanwhile). */
async function runGroup(group: Queued[]): Promise<void> {
  const items: HostItem[] = [];
  const frames: FrameItem[] = [];
  for (const { m } of group) {
    if (m.type === 'process') {
      // Each message's items are processed with the settings as of that message, not a later one's of the group.
      const apply = () => {
        Object.assign(current.policies, m.settings.policies);
        Object.assign(current.alerts, m.settings.alerts);
      };
      m.items.forEach((item, i) => {
        items.push(i === 0 ? { ...item, before: apply } : item);
      });
      if (m.items.length === 0) apply();
    } else if (m.type === 'append') {
      frames.push({ frame: Buffer.from(m.frame.buffer, m.frame.byteOffset, m.frame.byteLength), rows: m.rows });
    }
  }
  let answer: Promise<GroupAnswer>;
  try {
    ({ answer } = await host.process(items, frames));
  } catch (err) {
    for (const q of group) q.reject(err);
    return;
  }
  void answer.then(
    (out) => {
      const state = host.state();
      let i = 0;
      let f = 0;
      for (const { m, resolve } of group) {
        if (m.type === 'process') {
          resolve({ value: { state, items: out.items.slice(i, i + m.items.length) } satisfies HostReply });
          i += m.items.length;
        } else {
          resolve({ value: { state, error: out.frames[f++] ?? null } satisfies HostReply });
        }
      }
    },
    (err: unknown) => {
      for (const q of group) q.reject(err);
    },
  );
}

async function runOne(m: HostRequest): Promise<HostReply | string[]> {
  switch (m.type) {
    case 'open': {
      const sealed = host.open(m.adopt);
      return { state: host.state(), sealed };
    }
    case 'checkpoints': {
      const rows = await host.checkpoints(m.force);
      return { rows, state: host.state() };
    }
    case 'seal': {
      const sealed = await host.seal();
      return { sealed, state: host.state() };
    }
    case 'close': {
      const sealed = await host.close();
      await fires.flush();
      return { sealed, state: host.state() };
    }
    // Webhooks go out once their alert's write returned: the writes under way first, or their deliveries would be
    // abandoned before they began.
    case 'settle': {
      const until = Date.now() + m.maxMs;
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          host.settled(),
          new Promise<void>((r) => {
            timer = setTimeout(r, m.maxMs);
          }),
        ]);
      } finally {
        clearTimeout(timer);
      }
      return enrichment.settleDeliveries(Math.max(0, until - Date.now()));
    }
    default:
      throw new Error(`unexpected message ${m.type}`);
  }
}

serveRpc<HostRequest>(
  (m) =>
    new Promise((resolve, reject) => {
      queue.push({ m, resolve, reject });
      if (draining) return;
      draining = true;
      // setImmediate: the messages that arrived in this turn join the first group.
      setImmediate(
        () =>
          void drain().finally(() => {
            draining = false;
          }),
      );
    }),
);
