// Worker-thread side of WorkerStorage: owns the real backend and the spool-segment reader.
// Runs every storage call off the main thread, so inserts (DuckDB's appender, ClickHouse's
// row encoding) never stall request handling.
import { workerData } from 'node:worker_threads';
import type { Config } from '../config/index.ts';
import { serveRpc } from '../platform/worker-rpc.ts';
import { createStorage } from './index.ts';
import type { Storage } from '../core/ports/storage.ts';
import { insertSpoolFiles } from './spool-files.ts';
import { classifyStorageError } from './errors.ts';
import { STORAGE_METHODS } from '../core/ports/storage.ts';

export interface CallMessage {
  id: number;
  method: string;
  args: unknown[];
}

const storage: Storage = createStorage(workerData as Config);

/** What the main thread may call: the ports' methods and the engine's lifecycle, nothing else of the object. */
const CALLABLE = new Set<string>([...STORAGE_METHODS, 'init', 'close']);

serveRpc<CallMessage>(async (m) => {
  if (m.method === 'insertSpoolFiles') {
    const [paths, maxRows, isolate] = m.args as [string[], number, boolean | undefined];
    try {
      return { value: await insertSpoolFiles(storage, paths, maxRows, isolate === true) };
    } catch (err) {
      throw classifyStorageError(err);
    }
  }
  if (!CALLABLE.has(m.method)) throw new Error(`storage has no method ${m.method}`);
  const fn = (storage as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[m.method]!;
  return { value: await fn.apply(storage, m.args) };
});
