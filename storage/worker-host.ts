// Worker-thread side of WorkerStorage: owns the real backend and the spool-segment reader.
// Runs every storage call off the main thread, so inserts (DuckDB's appender, ClickHouse's
// row encoding) never stall request handling.
import { parentPort, workerData } from 'node:worker_threads';
import type { Config } from '../config/index.ts';
import { createStorage } from './index.ts';
import type { Storage } from './types.ts';
import { insertSpoolFiles } from './spool-files.ts';
import { HttpError } from '../collector/errors.ts';

export interface CallMessage { id: number; method: string; args: unknown[] }
export type ReplyMessage =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: { name: string; message: string; status?: number; code?: string; details?: unknown } };

const storage: Storage = createStorage(workerData as Config);
const port = parentPort!;

async function call(m: CallMessage): Promise<unknown> {
  if (m.method === 'insertSpoolFiles') {
    const [paths, maxRows] = m.args as [string[], number];
    return insertSpoolFiles(storage, paths, maxRows);
  }
  const fn = (storage as unknown as Record<string, unknown>)[m.method];
  if (typeof fn !== 'function') throw new Error(`storage has no method ${m.method}`);
  return (fn as (...a: unknown[]) => Promise<unknown>).apply(storage, m.args);
}

port.on('message', (m: CallMessage) => {
  call(m).then(
    (value) => port.postMessage({ id: m.id, ok: true, value } satisfies ReplyMessage),
    (err: unknown) => {
      const e = err instanceof Error ? err : new Error(String(err));
      const http = e instanceof HttpError ? { status: e.status, code: e.code, details: e.details } : {};
      port.postMessage({ id: m.id, ok: false, error: { name: e.name, message: e.message, ...http } } satisfies ReplyMessage);
    },
  );
});
