// Native ingestion: POST /api/traces with a ~600-byte payload, against the bare-Koa ceiling measured in the same run.
import { createKey } from '../collector/workspaces/admin.ts';
import {
  describeCpu,
  fmt,
  freePort,
  load,
  peakRssMb,
  settledCounter,
  startCeiling,
  startForked,
  terminate,
  type LoadResult,
} from './lib.ts';
import { startBenchServer, storedSpans } from './server.ts';

export const NATIVE_BODY = JSON.stringify({
  requestId: 'bench-[<id>]',
  actionName: 'support_reply',
  environment: 'production',
  model: 'gpt-4o-mini',
  provider: 'openai',
  prompt:
    'Customer asks: my order #48213 arrived damaged, the box was crushed and the mug inside is broken. What are my options for a replacement or refund?',
  response:
    'Sorry about the damaged mug! You can choose a free replacement (ships in 2 days) or a full refund to your original payment method. Reply with your choice.',
  metrics: {
    promptTokens: 41,
    completionTokens: 38,
    totalTokens: 79,
    latencyMs: 812,
    estimatedCostUsd: 0.0000289,
    finishReason: 'stop',
  },
  parameters: { trainingPreferred: false },
  metadata: { userId: 'u-1029', channel: 'email' },
});

export interface CaseResult extends LoadResult {
  name: string;
  rssMb: number;
  stored?: number;
  acked?: number;
}

/** What a server case posts: the route, one body (ids replaced per request) and the ingest counter it bumps. */
export interface IngestRoute {
  path: string;
  body: string;
  counter: string;
  /** How long the final flush may take once the load stops. */
  drainMs: number;
}
const NATIVE_ROUTE: IngestRoute = { path: '/api/traces', body: NATIVE_BODY, counter: 'native', drainMs: 60_000 };

export async function runNativeServer(
  name: string,
  env: Record<string, string>,
  seconds: number,
  connections = 50,
  route: IngestRoute = NATIVE_ROUTE,
): Promise<CaseResult> {
  const server = await startBenchServer(env, (storage) => createKey(storage, 'bench'));
  try {
    const pid = server.child.pid!;
    const r = await load({
      url: `${server.url}${route.path}`,
      body: route.body,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${server.made.key}` },
      connections,
      seconds,
      idReplacement: true,
      serverPid: pid,
    });
    const rssMb = peakRssMb(pid);
    // autocannon's 2xx count misses answers still in flight when it stops: the server's counter, once settled.
    const acked = await settledCounter(`${server.url}/metrics`, route.counter, Math.max(1000, 2 * r.p99));
    await terminate(server.child, route.drainMs); // SIGTERM flushes the spool
    const stored = await storedSpans(server.config, server.made.workspaceId);
    return { name, ...r, rssMb, stored, acked };
  } finally {
    await server.close();
  }
}

export async function runNativeCeiling(seconds: number, connections = 50): Promise<CaseResult> {
  const port = await freePort();
  const child = await startCeiling(port);
  try {
    const r = await load({
      url: `http://127.0.0.1:${port}/`,
      body: NATIVE_BODY,
      headers: { 'content-type': 'application/json' },
      connections,
      seconds,
      idReplacement: true,
      serverPid: child.pid!,
    });
    return { name: 'ceiling: bare Koa, parse JSON + reply', ...r, rssMb: peakRssMb(child.pid!) };
  } finally {
    await terminate(child);
  }
}

/**
 * The durable floor (bench/native-floor.ts): the ceiling plus a group-committed fdatasync before each answer and,
 * with `clickhouseUrl`, the rows written once a second with tracegate's ClickHouse schema.
 */
export async function runNativeFloor(seconds: number, clickhouseUrl?: string, connections = 50): Promise<CaseResult> {
  const port = await freePort();
  const child = await startForked('bench/native-floor.ts', { PORT: String(port), STORE: clickhouseUrl ?? '' });
  // Sent once it has stopped (SIGTERM, below).
  const counts = new Promise<{ stored: number; acked: number } | undefined>((resolve) => {
    child.on('message', (m: unknown) => {
      if (typeof m === 'object' && m && 'acked' in m) resolve(m as { stored: number; acked: number });
    });
    child.once('exit', () => resolve(undefined));
  });
  const name = clickhouseUrl ? 'floor: ceiling + fdatasync + ClickHouse' : 'floor: ceiling + fdatasync';
  try {
    const r = await load({
      url: `http://127.0.0.1:${port}/`,
      body: NATIVE_BODY,
      headers: { 'content-type': 'application/json' },
      connections,
      seconds,
      idReplacement: true,
      serverPid: child.pid!,
    });
    const rssMb = peakRssMb(child.pid!);
    await terminate(child, 60_000); // the floor's worker writes what is left
    const n = await counts;
    if (clickhouseUrl && !n)
      throw new Error('the native floor stopped without reporting its counts (its ClickHouse writer failed?)');
    // Counted by the floor itself, the warm-up's bodies included (autocannon misses answers in flight when it stops).
    return { name, ...r, rssMb, ...(clickhouseUrl && n ? { stored: n.stored, acked: n.acked } : {}) };
  } finally {
    await terminate(child);
  }
}

/**
 * One case from runs of it taken in turn with others (the VM's speed drifts over minutes, so cases compared with
 * each other are interleaved): rates over the summed time, the worst p99, the largest RSS, counts summed.
 */
export function combine(runs: CaseResult[]): CaseResult {
  const sum = (f: (r: CaseResult) => number) => runs.reduce((n, r) => n + f(r), 0);
  const ok = sum((r) => r.ok);
  const duration = sum((r) => r.duration);
  const server: Record<string, number> = {};
  const faults: Record<string, number> = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.cpu?.server ?? {})) server[k] = (server[k] ?? 0) + v;
  for (const r of runs) for (const [k, v] of Object.entries(r.cpu?.faults ?? {})) faults[k] = (faults[k] ?? 0) + v;
  const stored = runs.every((r) => r.stored !== undefined) ? sum((r) => r.stored!) : undefined;
  const acked = runs.every((r) => r.acked !== undefined) ? sum((r) => r.acked!) : undefined;
  return {
    name: runs[0]!.name,
    ok,
    duration,
    rps: ok / duration,
    p50: sum((r) => r.p50 * r.ok) / Math.max(1, ok),
    p99: Math.max(...runs.map((r) => r.p99)),
    non2xx: sum((r) => r.non2xx),
    errors: sum((r) => r.errors),
    stealPct: sum((r) => r.stealPct * r.duration) / duration,
    rssMb: Math.max(...runs.map((r) => r.rssMb)),
    cpu: {
      server,
      faults,
      loadGenerator: sum((r) => r.cpu?.loadGenerator ?? 0),
      others: sum((r) => r.cpu?.others ?? 0),
      seconds: sum((r) => r.cpu?.seconds ?? 0),
    },
    ...(stored !== undefined ? { stored } : {}),
    ...(acked !== undefined ? { acked } : {}),
  };
}

export function printNative(rows: CaseResult[], ceiling: CaseResult): void {
  const ceilRate = ceiling.ok / ceiling.duration;
  console.log('\n== native ingestion: POST /api/traces, ~%d-byte payload ==', Buffer.byteLength(NATIVE_BODY));
  console.log(
    'case'.padEnd(44),
    'traces/s'.padStart(10),
    'p50 ms'.padStart(8),
    'p99 ms'.padStart(8),
    'RSS MB'.padStart(8),
    'ratio'.padStart(7),
    'steal %'.padStart(8),
    '  stored/acked',
  );
  for (const r of [ceiling, ...rows]) {
    const rate = r.ok / r.duration;
    const check = r.stored === undefined ? '' : `${r.stored}/${r.acked} ${r.stored === r.acked ? 'OK' : 'MISMATCH'}`;
    console.log(
      r.name.padEnd(44),
      fmt(rate).padStart(10),
      fmt(r.p50, 1).padStart(8),
      fmt(r.p99, 1).padStart(8),
      String(r.rssMb).padStart(8),
      fmt(rate / ceilRate, 2).padStart(7),
      fmt(r.stealPct, 0).padStart(8),
      ' ',
      check,
      r.non2xx || r.errors ? `(non-2xx ${r.non2xx}, errors ${r.errors})` : '',
    );
  }
  // Where the two cores went: the target ratio needs the whole per-trace cost close to the ceiling's.
  for (const r of [ceiling, ...rows]) console.log(`  ${r.name}: ${describeCpu(r.cpu, r.ok, 'trace')}`);
}

/** Issue 2's target: traces/s against the ceiling measured in the same run. */
export const TARGET_RATIO = 0.4;

/**
 * What the target leaves above the floor: at TARGET_RATIO × the ceiling's rate, with the machine as busy as during
 * the floor case, each trace gets so much CPU (server, load generator, ClickHouse); the floor spends part of it.
 */
export function printFloorBudget(floor: CaseResult, ceiling: CaseResult, ours: CaseResult): void {
  const perTrace = (r: CaseResult) => {
    const c = r.cpu!;
    return ((Object.values(c.server).reduce((a, b) => a + b, 0) + c.loadGenerator + c.others) * 1e6) / r.ok;
  };
  if (!floor.cpu || !ours.cpu) return;
  const target = TARGET_RATIO * (ceiling.ok / ceiling.duration);
  const busy = (perTrace(floor) * (floor.ok / floor.duration)) / 1e6; // cores the floor case kept busy
  const budget = (busy * 1e6) / target;
  console.log(
    `  at the target ratio ${TARGET_RATIO} (${fmt(target)} traces/s), the machine as busy as in the floor case (${fmt(busy, 2)} cores) gives ` +
      `${fmt(budget)} µs of CPU per trace; the floor with ClickHouse spends ${fmt(perTrace(floor))}, leaving ${fmt(budget - perTrace(floor))} µs ` +
      `for everything else (auth, rate limit, validation, spool framing, metrics, enrichment); ${ours.name} spends ${fmt(perTrace(ours))}`,
  );
}
