// `tracegate serve` as a child process on a fresh data dir, looked at from outside (/proc) while it runs, then stopped.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from './process.ts';

export interface ServeChild {
  /** The server's pid (from DATA_DIR/server.json) and the pid spawned: equal when serve replaced itself in place. */
  pid: number;
  childPid: number;
  dataDir: string;
  /** Its command line and environment as the server's process image started. */
  args: string[];
  environ: Record<string, string>;
  rssMb: number;
  stderr: string;
  /** Its threads' names (/proc/<pid>/task/<tid>/comm). */
  threads: string[];
}

/**
 * Starts `node [nodeArgs] bin/tracegate.ts serve` with `env` over the suite's environment (minus the variables in
 * `unset`), waits until it is up (plus `idleMs`), hands it to `inspect`, and stops it (SIGTERM) and removes its data dir.
 */
export async function withServeChild<T>(
  opts: { env?: Record<string, string>; unset?: string[]; nodeArgs?: string[]; idleMs?: number },
  inspect: (s: ServeChild) => T,
): Promise<T> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-serve-'));
  const base = { ...process.env };
  for (const k of opts.unset ?? []) delete base[k];
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), 'bin/tracegate.ts', 'serve'], {
    env: {
      ...base,
      TRACEGATE_DATA_DIR: dataDir,
      TRACEGATE_PORT: '0',
      TRACEGATE_HOST: '127.0.0.1',
      TRACEGATE_LOG_LEVEL: 'silent',
      ...opts.env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  try {
    const file = join(dataDir, 'server.json');
    for (let i = 0; i < 600 && !existsSync(file); i++) await sleep(50);
    const { pid } = JSON.parse(readFileSync(file, 'utf8')) as { pid: number };
    if (opts.idleMs) await sleep(opts.idleMs);
    const proc = (f: string) => readFileSync(`/proc/${pid}/${f}`, 'utf8');
    const args = proc('cmdline').split('\0').filter(Boolean);
    const environ = Object.fromEntries(
      proc('environ')
        .split('\0')
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    );
    const rssMb = Number(/VmRSS:\s+(\d+)/.exec(proc('status'))![1]) / 1024;
    const threads = readdirSync(`/proc/${pid}/task`).map((tid) => proc(`task/${tid}/comm`).trim());
    return inspect({ pid, childPid: child.pid!, dataDir, args, environ, rssMb, stderr, threads });
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}
