// Storage on a worker thread: the same ports, each call a message to storage/worker-host.ts, forwarded by name
// from the ports' method lists (core/ports/storage.ts). The server uses it so that inserts and queries run beside
// request handling, not inside it; the writer hands over spool segment paths, so records are never copied between
// threads.
import type { Config } from '../config/index.ts';
import { storageUnreachable } from '../core/errors.ts';
import { STORAGE_METHODS, type Storage } from '../core/ports/storage.ts';
import { WorkerRpc } from '../platform/worker-rpc.ts';
import type { SpoolFilesResult } from './spool-files.ts';
import type { CallMessage } from './worker-host.ts';

class StorageThread {
  readonly kind: Storage['kind'];
  private readonly rpc: WorkerRpc;
  private initialized = false;
  private closing = false;

  constructor(config: Config) {
    this.kind = config.CLICKHOUSE_URL ? 'clickhouse' : 'duckdb';
    this.rpc = new WorkerRpc(
      new URL('./worker-host.ts', import.meta.url),
      config,
      'storage',
      config.WORKER_YOUNG_GEN_MB,
    );
  }

  /**
   * Errors arrive classified by the storage thread (an outage keeps its kind); the thread itself gone, or storage
   * closed, is an outage too.
   */
  async call<T>(method: string, ...args: unknown[]): Promise<T> {
    if (!this.rpc.running) {
      if (this.closing) throw storageUnreachable('storage is closed');
      // A replacement for a worker that died must open the backend again first.
      if (this.initialized && method !== 'init') await this.send('init', []);
    }
    return this.send<T>(method, args);
  }

  private async send<T>(method: string, args: unknown[]): Promise<T> {
    try {
      return await this.rpc.call<T>({ method, args } satisfies Omit<CallMessage, 'id'>);
    } catch (err) {
      if (!this.rpc.running) throw storageUnreachable((err as Error).message, { cause: err });
      throw err;
    }
  }

  async init(): Promise<void> {
    await this.call('init');
    this.initialized = true;
  }

  async close(): Promise<void> {
    this.closing = true;
    if (!this.rpc.running) return;
    try {
      await this.call('close');
    } finally {
      await this.rpc.close();
    }
  }

  /** Insert sealed spool segments, read by the worker from disk (see storage/spool-files.ts). */
  insertSpoolFiles(paths: string[], maxRows: number, isolate = false): Promise<SpoolFilesResult> {
    return this.call('insertSpoolFiles', paths, maxRows, isolate);
  }
}

for (const method of STORAGE_METHODS) {
  Object.defineProperty(StorageThread.prototype, method, {
    writable: true, // tests stand in for a method on one instance
    configurable: true,
    value(this: StorageThread, ...args: unknown[]) {
      return this.call(method, ...args);
    },
  });
}

/** Storage on its own thread: every port method, plus the writer's insertSpoolFiles. */
export type WorkerStorage = StorageThread & Storage;
export const WorkerStorage = StorageThread as unknown as new (config: Config) => WorkerStorage;
