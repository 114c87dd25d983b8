// Stores for tests that need no server: DuckDB in a temp folder, on this thread or behind WorkerStorage (the
// server's arrangement). The ClickHouse ones (a server, a cluster, chDB) are in test/storage/harness.ts.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../config/index.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { DuckDbStorage } from '../../storage/duckdb.ts';
import { WorkerStorage } from '../../storage/worker-storage.ts';

export interface StoreHarness {
  storage: Storage;
  /** Close and open a new instance on the same data (a collector restart). */
  reopen(): Promise<Storage>;
  /** Close and delete everything. */
  destroy(): Promise<void>;
}

export type StoreFactory = () => Promise<StoreHarness>;

/** A harness over `create` (called again on reopen); destroy() closes the store, then runs `cleanup`. */
export async function harness(create: () => Storage, cleanup: () => Promise<unknown>): Promise<StoreHarness> {
  const open = async () => {
    const s = create();
    await s.init();
    return s;
  };
  const h: StoreHarness = {
    storage: await open(),
    reopen: async () => {
      await h.storage.close();
      h.storage = await open();
      return h.storage;
    },
    destroy: async () => {
      await h.storage.close();
      await cleanup();
    },
  };
  return h;
}

/** A store kept in a fresh temp folder, deleted by destroy(). */
function tempDirFactory(prefix: string, create: (dir: string) => Storage): StoreFactory {
  return async () => {
    const dir = await mkdtemp(join(tmpdir(), prefix));
    return harness(
      () => create(dir),
      () => rm(dir, { recursive: true, force: true }),
    );
  };
}

export const duckdbFactory = tempDirFactory(
  'tracegate-duckdb-',
  (dir) =>
    new DuckDbStorage(join(dir, 'nested', 'tracegate.duckdb'), { writeThreads: 1 }) /* as createStorage sets it */,
);

/** The server's arrangement: DuckDB behind WorkerStorage, every call crossing to a worker thread. */
export const workerFactory = tempDirFactory(
  'tracegate-worker-',
  (dir) => new WorkerStorage(loadConfig({ TRACEGATE_DATA_DIR: dir })),
);
