// Shared benchmark plumbing: child servers, autocannon runs, peak RSS.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { freePort, sleep, terminate } from '../test/support/process.ts';

export { freePort, sleep, terminate };

export function peakRssMb(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

export async function startChild(
  script: string,
  args: string[],
  env: Record<string, string>,
  readyUrl: string,
): Promise<ChildProcess> {
  const child = spawn(process.execPath, [script, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`${script} exited with ${child.exitCode}`);
    if (
      await fetch(readyUrl).then(
        (r) => r.ok,
        () => false,
      )
    )
      return child;
    await sleep(50);
  }
  throw new Error(`${script} did not become ready`);
}

/** A bench server script forked with `env`, once its first message says it listens. */
export async function startForked(script: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = fork(script, [], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (c) => reject(new Error(`${script} exited ${c}`)));
  });
  return child;
}

export function startCeiling(port: number): Promise<ChildProcess> {
  return startForked('bench/ceiling.ts', { PORT: String(port) });
}

/**
 * Share of CPU time the hypervisor gave to other guests while a case ran (/proc/stat "steal"). On this shared VM it
 * swings from 0 to over 30% between runs: printed next to each case so a figure can be read for what it is.
 */
export function stealMeter(): () => number {
  // user nice system idle iowait irq softirq steal; guest time is already inside user and nice.
  const read = () => readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  const a = read();
  return () => {
    const d = read().map((v, i) => v - (a[i] ?? 0));
    const total = d.reduce((x, y) => x + y, 0);
    return total > 0 ? (100 * (d[7] ?? 0)) / total : 0;
  };
}

/** CPU seconds (user + system) in a /proc …/stat file: a whole process, or one of its threads. */
function statCpuSeconds(path: string): { comm: string; seconds: number; faults: number } {
  const st = readFileSync(path, 'utf8');
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
  // ticks of 10 ms; minor page faults (on this kind of VM each costs µs: fresh memory is not free)
  return {
    comm: st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')),
    seconds: (Number(f[11]) + Number(f[12])) / 100,
    faults: Number(f[7]),
  };
}

/** CPU seconds used so far by a process, its ended threads included. */
export function processCpuSeconds(pid: number): number {
  return statCpuSeconds(`/proc/${pid}/stat`).seconds;
}

/** CPU seconds (or minor page faults) so far of each thread name of a process (threads that ended are not counted). */
export function threadCpuSeconds(pid: number, what: 'seconds' | 'faults' = 'seconds'): Record<string, number> {
  const out: Record<string, number> = {};
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const st = statCpuSeconds(`/proc/${pid}/task/${tid}/stat`);
      out[st.comm] = (out[st.comm] ?? 0) + st[what];
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

/**
 * Where the CPU went during a case, in CPU seconds: the server's threads, the load generator (this process), and
 * everything else the machine ran (ClickHouse, the kernel's own work), from /proc/stat's busy time.
 */
export interface CpuSplit {
  server: Record<string, number>;
  faults: Record<string, number>;
  loadGenerator: number;
  others: number;
  seconds: number;
}

const machineBusySeconds = () => {
  const [user, nice, system, , , irq, softirq] = readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]!
    .trim()
    .split(/\s+/)
    .slice(1, 8)
    .map(Number);
  return (user! + nice! + system! + irq! + softirq!) / 100;
};

export function cpuMeter(serverPid?: number): () => CpuSplit {
  const s0 = serverPid ? threadCpuSeconds(serverPid) : {};
  const f0 = serverPid ? threadCpuSeconds(serverPid, 'faults') : {};
  const l0 = process.cpuUsage();
  const m0 = machineBusySeconds();
  const t0 = performance.now();
  return () => {
    const s1 = serverPid ? threadCpuSeconds(serverPid) : {};
    const server: Record<string, number> = {};
    for (const [k, v] of Object.entries(s1)) if (v - (s0[k] ?? 0) > 0) server[k] = v - (s0[k] ?? 0);
    const faults: Record<string, number> = {};
    for (const [k, v] of Object.entries(serverPid ? threadCpuSeconds(serverPid, 'faults') : {}))
      if (v - (f0[k] ?? 0) > 0) faults[k] = v - (f0[k] ?? 0);
    const l = process.cpuUsage(l0);
    const loadGenerator = (l.user + l.system) / 1e6;
    const serverTotal = Object.values(server).reduce((a, b) => a + b, 0);
    const others = Math.max(0, machineBusySeconds() - m0 - serverTotal - loadGenerator);
    return { server, faults, loadGenerator, others, seconds: (performance.now() - t0) / 1000 };
  };
}

/** "total 512 µs: MainThread 201, WorkerThread 180, …; load generator 95 µs" per unit of work. */
export function describeCpu(cpu: CpuSplit | undefined, units: number, unit: string): string {
  if (!cpu || units <= 0) return '';
  const per = (s: number) => fmt((s * 1e6) / units);
  const parts = Object.entries(cpu.server)
    .sort((a, b) => b[1] - a[1])
    .filter(([, v]) => (v * 1e6) / units >= 1);
  const total = Object.values(cpu.server).reduce((a, b) => a + b, 0);
  const busy = total + cpu.loadGenerator + cpu.others;
  return (
    `CPU µs per ${unit}: server ${per(total)} (${parts.map(([k, v]) => `${k} ${per(v)}`).join(', ')}); load generator ${per(cpu.loadGenerator)}; ` +
    `other processes ${per(cpu.others)}; machine ${fmt((100 * busy) / (2 * cpu.seconds))}% busy of 2 cores` +
    describeFaults(cpu.faults, units, unit)
  );
}

/** "; page faults per span: MainThread 1.2, …" (threads with at least 0.1). */
function describeFaults(faults: Record<string, number>, units: number, unit: string): string {
  const parts = Object.entries(faults)
    .sort((a, b) => b[1] - a[1])
    .filter(([, v]) => v / units >= 0.1);
  return parts.length
    ? `; page faults per ${unit}: ${parts.map(([k, v]) => `${k} ${fmt(v / units, 1)}`).join(', ')}`
    : '';
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  non2xx: number;
  errors: number;
  duration: number;
  stealPct: number;
  cpu?: CpuSplit;
}

/**
 * Seconds of the same load each native and OTLP server case gets before it is measured (BENCH_WARMUP_SECONDS, default 5): a fresh process
 * spends its first seconds compiling hot code (V8's optimizing compiler ran at 80-100 µs of CPU per trace in a 10 s
 * native run from a cold start, 21 µs over 30 s), which a collector running for days does not. Requests made during
 * the warm-up are acknowledged and stored like the others (the stored/acknowledged checks count them).
 */
export const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 5);
if (!(WARMUP_SECONDS >= 0))
  throw new Error(`BENCH_WARMUP_SECONDS must be a number of seconds ≥ 0, not ${process.env.BENCH_WARMUP_SECONDS}`);

/** Says so when a warm-up had failures (they are not in the measured figures, but they mean something is wrong). */
export function reportWarmup(r: { non2xx: number; errors: number; timeouts: number }, what: string): void {
  if (r.non2xx || r.errors || r.timeouts)
    console.log(`  warm-up of ${what}: non-2xx ${r.non2xx}, errors ${r.errors}, timeouts ${r.timeouts}`);
}

export async function load(opts: {
  url: string;
  body: string | Buffer;
  headers: Record<string, string>;
  connections: number;
  seconds: number;
  idReplacement?: boolean;
  serverPid?: number;
  /** Each request's own body and extra headers (a signature over its body), made by the load generator. */
  request?: () => { body: string; headers?: Record<string, string> };
}): Promise<LoadResult> {
  const make = opts.request;
  const options = {
    url: opts.url,
    method: 'POST' as const,
    body: opts.body,
    headers: opts.headers,
    connections: opts.connections,
    idReplacement: opts.idReplacement ?? false,
    ...(make
      ? {
          requests: [
            {
              setupRequest: (req: autocannon.Request) => {
                const r = make();
                return { ...req, body: r.body, headers: { ...opts.headers, ...r.headers } };
              },
            },
          ],
        }
      : {}),
  };
  if (WARMUP_SECONDS > 0) reportWarmup(await autocannon({ ...options, duration: WARMUP_SECONDS }), opts.url);
  const steal = stealMeter();
  const cpu = cpuMeter(opts.serverPid);
  const r = await autocannon({ ...options, duration: opts.seconds });
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    ok: r['2xx'],
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    duration: r.duration,
    stealPct: steal(),
    cpu: cpu(),
  };
}

export const fmt = (n: number, d = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

/** tracegate_records_ingested_total{source} once it has not moved for `quietMs`: answers still in flight when the load stops land first. */
export async function settledCounter(url: string, source: string, quietMs: number): Promise<number> {
  const read = async () => {
    const text = await (await fetch(url)).text();
    const m = new RegExp(`^tracegate_records_ingested_total\\{source="${source}"\\} (\\d+)`, 'm').exec(text);
    return m ? Number(m[1]) : 0;
  };
  let last = await read();
  let since = performance.now();
  for (;;) {
    await sleep(250);
    const now = await read();
    if (now !== last) {
      last = now;
      since = performance.now();
    } else if (performance.now() - since >= quietMs) return now;
  }
}
