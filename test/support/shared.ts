// The one ClickHouse server shared by the whole mocha run (started by the root hooks in test/setup.ts).
import {
  startClickHouse,
  startClickHouseCluster,
  type TestClickHouse,
  type TestClickHouseCluster,
} from './clickhouse.ts';

let shared: TestClickHouse | null = null;
let cluster: Promise<TestClickHouseCluster> | null = null;

/** False with TRACEGATE_TEST_CLICKHOUSE_URL: the tests then use that server and start none of their own. */
export const clusterTests = !process.env.TRACEGATE_TEST_CLICKHOUSE_URL;

/** A two-shard cluster of 18.16 servers, started on first use and shared by the rest of the run. */
export function sharedCluster(): Promise<TestClickHouseCluster> {
  cluster ??= startClickHouseCluster(2);
  return cluster;
}

export async function startSharedClickHouse(): Promise<void> {
  shared ??= await startClickHouse();
}

export async function stopSharedClickHouse(): Promise<void> {
  const s = shared;
  const c = cluster;
  shared = null;
  cluster = null;
  await s?.dispose();
  await (await c?.catch(() => null))?.dispose();
}

/** Base URL of the shared test server; only valid while the suite runs. */
export function clickhouseUrl(): string {
  if (!shared) throw new Error('shared ClickHouse is not running (root hooks in test/setup.ts start it)');
  return shared.url;
}

/** Unique database name so runs and suites never see each other's tables. */
export function uniqueDatabase(prefix = 'tg_test'): string {
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
}
