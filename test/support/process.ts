// Helpers shared by the throwaway test servers: free ports, readiness polling, stopping a child.
import { createServer } from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';

/** A port the OS considers free right now (bind 0, read it, release it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('could not pick a free port'))));
    });
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Resolves when the child exits (immediately if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/**
 * Poll `probe` until it returns true. Fails fast when the child dies (with the tail of
 * its log, which is where the reason is), or after timeoutMs.
 */
export async function waitReady(
  child: ChildProcess,
  probe: () => Promise<boolean>,
  what: string,
  logFile: string,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `${what} exited during startup (code ${child.exitCode}, signal ${child.signalCode})\n${await tail(logFile)}`,
      );
    }
    if (await probe().catch(() => false)) return;
    await sleep(50);
  }
  throw new Error(`${what} not ready after ${timeoutMs} ms\n${await tail(logFile)}`);
}

async function tail(file: string, lines = 20): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.split('\n').slice(-lines).join('\n');
}

/** SIGTERM, then SIGKILL if it lingers; resolves once the child is gone. */
export async function terminate(child: ChildProcess, graceMs = 20_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const done = exited(child);
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await done;
  clearTimeout(timer);
}

export async function killNow(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const done = exited(child);
  child.kill('SIGKILL');
  await done;
}
