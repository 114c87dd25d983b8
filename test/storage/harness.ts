// Storage factories for the contract suite: a fresh, isolated store per backend.
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createChdbConnection } from 'chdb/connection';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClickHouseStorage } from '../../storage/clickhouse.ts';
import { DuckDbStorage } from '../../storage/duckdb.ts';
import { WorkerStorage } from '../../storage/worker-storage.ts';
import { loadConfig } from '../../config/index.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { clickhouseUrl, clusterTests, sharedCluster, uniqueDatabase } from '../support/shared.ts';

export interface StoreHarness {
  storage: Storage;
  /** Close and open a new instance on the same data (a collector restart). */
  reopen(): Promise<Storage>;
  /** Close and delete everything. */
  destroy(): Promise<void>;
}

export type StoreFactory = () => Promise<StoreHarness>;

/** A harness over `create` (called again on reopen); destroy() closes the store, then runs `cleanup`. */
async function harness(create: () => Storage, cleanup: () => Promise<unknown>): Promise<StoreHarness> {
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

export const clickhouseFactory: StoreFactory = () => {
  const url = clickhouseUrl();
  const database = uniqueDatabase();
  return harness(
    () => new ClickHouseStorage({ url, database }),
    () => fetch(url, { method: 'POST', body: `DROP DATABASE IF EXISTS ${database}` }),
  );
};

/** Two 18.16 shards (TRACEGATE_CLICKHOUSE_CLUSTER): the collector talks to the first node, the data is spread over both. */
export const clusterFactory: StoreFactory = async () => {
  const c = await sharedCluster();
  const database = uniqueDatabase();
  const drop = (url: string, db: string) => fetch(url, { method: 'POST', body: `DROP DATABASE IF EXISTS ${db}` });
  return harness(
    () =>
      new ClickHouseStorage({
        url: c.nodes[0]!.url,
        database,
        cluster: { name: c.name, nodeUrls: c.nodes.map((n) => n.url) },
      }),
    () =>
      Promise.all(
        c.nodes.map(async (n) => {
          await drop(n.url, database);
          await drop(n.url, `${database}_local`);
        }),
      ),
  );
};

/**
 * Current ClickHouse (26.x), in-process through chDB, behind the same @clickhouse/client calls: the schema and
 * queries must work there as well as on the 18.16 server. libchdb binds one data directory per process, so every
 * store shares one connection (closed only at exit) and gets a database of its own, as on a server.
 */
let chdbShared: ReturnType<typeof createChdbConnection> | null = null;
export function chdbConnection(): ReturnType<typeof createChdbConnection> {
  if (!chdbShared) {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-chdb-'));
    chdbShared = createChdbConnection({ path: dir });
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  const shared = chdbShared;
  // A store's close() must not close the process-wide connection.
  return new Proxy(shared, {
    get: (t, k) =>
      k === 'close'
        ? async () => {}
        : typeof Reflect.get(t, k) === 'function'
          ? (Reflect.get(t, k) as (...a: unknown[]) => unknown).bind(t)
          : Reflect.get(t, k),
  });
}

export const chdbFactory: StoreFactory = () => {
  const database = uniqueDatabase();
  return harness(
    () => new ClickHouseStorage({ url: 'http://chdb.invalid', database, connection: chdbConnection() as never }),
    () => chdbConnection().command({ query: `DROP DATABASE IF EXISTS ${database}` } as never),
  );
};

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

export const BACKENDS: ReadonlyArray<[string, StoreFactory]> = [
  ['clickhouse', clickhouseFactory],
  ['duckdb', duckdbFactory],
];

/** The server's arrangement: DuckDB behind WorkerStorage, every call crossing to a worker thread. */
export const workerFactory = tempDirFactory(
  'tracegate-worker-',
  (dir) => new WorkerStorage(loadConfig({ TRACEGATE_DATA_DIR: dir })),
);

/** The ClickHouse server of the tests (Debian's 18.16), current ClickHouse through chDB, and a two-shard 18.16 cluster. */
export const CLICKHOUSES: ReadonlyArray<[string, StoreFactory]> = [
  ['clickhouse', clickhouseFactory],
  ['clickhouse 26 (chDB)', chdbFactory],
  ...(clusterTests ? [['clickhouse cluster (2 shards)', clusterFactory] as [string, StoreFactory]] : []),
];

/** Backends for the contract suites: both implementations (ClickHouse as 18.16, 26 and a cluster), and DuckDB through the worker thread. */
export const CONTRACT_BACKENDS: ReadonlyArray<[string, StoreFactory]> = [
  ...BACKENDS,
  ...CLICKHOUSES.slice(1),
  ['duckdb on a worker thread', workerFactory],
];
