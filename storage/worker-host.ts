// Worker-thread side of WorkerStorage: owns the real backend and the spool-segment reader.
// Runs every storage call off the main thread, so inserts (DuckDB's appender, ClickHouse's
// row encoding) never stall request handling.
import { workerData } from 'node:worker_threads';
import type { Config } from '../config/index.ts';
import { serveRpc } from '../platform/worker-rpc.ts';
import { createStorage } from './index.ts';
import type { Storage } from '../core/ports/storage.ts';
import { insertSpoolFiles } from './spool-files.ts';

export interface CallMessage {
  id: number;
  method: string;
  args: unknown[];
}

const storage: Storage = createStorage(workerData as Config);

serveRpc<CallMessage>(async (m) => {
  if (m.method === 'insertSpoolFiles') {
    const [paths, maxRows, isolate] = m.args as [string[], number, boolean | undefined];
    return { value: await insertSpoolFiles(storage, paths, maxRows, isolate === true) };
  }
  const fn = (storage as unknown as Record<string, unknown>)[m.method];
  if (typeof fn !== 'function') throw new Error(`storage has no method ${m.method}`);
  return { value: await (fn as (...a: unknown[]) => Promise<unknown>).apply(storage, m.args) };
});
