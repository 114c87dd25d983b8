// Shared benchmark plumbing: child servers, autocannon runs, peak RSS.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { freePort, sleep, terminate } from '../test/support/process.ts';

export { freePort, sleep, terminate };

export function peakRssMb(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

export async function startChild(script: string, args: string[], env: Record<string, string>, readyUrl: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`${script} exited with ${child.exitCode}`);
    if (await fetch(readyUrl).then((r) => r.ok, () => false)) return child;
    await sleep(50);
  }
  throw new Error(`${script} did not become ready`);
}

export async function startCeiling(port: number): Promise<ChildProcess> {
  const child = fork('bench/ceiling.ts', [], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  await new Promise<void>((resolve, reject) => { child.once('message', () => resolve()); child.once('exit', (c) => reject(new Error(`ceiling exited ${c}`))); });
  return child;
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

export interface LoadResult { rps: number; p50: number; p99: number; ok: number; non2xx: number; errors: number; duration: number; stealPct: number }

export async function load(opts: { url: string; body: string | Buffer; headers: Record<string, string>; connections: number; seconds: number; idReplacement?: boolean }): Promise<LoadResult> {
  const steal = stealMeter();
  const r = await autocannon({
    url: opts.url, method: 'POST', body: opts.body, headers: opts.headers,
    connections: opts.connections, duration: opts.seconds, idReplacement: opts.idReplacement ?? false,
  });
  return {
    rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99,
    ok: r['2xx'], non2xx: r.non2xx, errors: r.errors + r.timeouts, duration: r.duration, stealPct: steal(),
  };
}

export const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
