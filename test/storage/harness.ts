// Storage factories for the contract suite: a fresh, isolated store per backend. The ClickHouse ones need the shared
// servers (test/support/shared.ts) or chDB; the DuckDB ones come from test/support/stores.ts, which the unit tests use.
import { mkdtempSync, rmSync } from 'node:fs';
import { createChdbConnection } from 'chdb/connection';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClickHouseStorage } from '../../storage/clickhouse.ts';
import { duckdbFactory, harness, workerFactory, type StoreFactory } from '../support/stores.ts';
import { clusterTests, sharedClickHouse, sharedCluster, uniqueDatabase } from '../support/shared.ts';

export { duckdbFactory, workerFactory, type StoreFactory, type StoreHarness } from '../support/stores.ts';

export const clickhouseFactory: StoreFactory = async () => {
  const url = await sharedClickHouse();
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

export const BACKENDS: ReadonlyArray<[string, StoreFactory]> = [
  ['clickhouse', clickhouseFactory],
  ['duckdb', duckdbFactory],
];

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
