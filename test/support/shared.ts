// The ClickHouse servers shared by a mocha run: each starts on first use by a suite that needs it (every later user
// waits for the same start), and the root hooks (test/setup.ts) stop whichever started when the run ends. A run of
// unit tests only (make test-unit) starts none; test/support/unit-guard.ts makes sure of it.
import {
  startClickHouse,
  startClickHouseCluster,
  type TestClickHouse,
  type TestClickHouseCluster,
} from './clickhouse.ts';

let shared: Promise<TestClickHouse> | null = null;
let started: TestClickHouse | null = null;
let cluster: Promise<TestClickHouseCluster> | null = null;
let forbidden: string | null = null;

/** False with TRACEGATE_TEST_CLICKHOUSE_URL: the tests then use that server and start none of their own. */
export const clusterTests = !process.env.TRACEGATE_TEST_CLICKHOUSE_URL;

/** From then on, starting a shared server throws `reason` (the unit run: test/support/unit-guard.ts). */
export function forbidSharedServers(reason: string): void {
  forbidden = reason;
}

/**
 * The shared ClickHouse 18.16 (or TRACEGATE_TEST_CLICKHOUSE_URL), started on first call; resolves to its base URL.
 * A failed start is kept: every suite that needs the server then fails at once with the same error.
 */
export function sharedClickHouse(): Promise<string> {
  if (forbidden) return Promise.reject(new Error(`shared ClickHouse: ${forbidden}`));
  shared ??= startClickHouse().then((ch) => (started = ch));
  return shared.then((ch) => ch.url);
}

/** Registers a `before` hook that starts (or waits for) the shared ClickHouse, for suites that call clickhouseUrl(). */
export function useSharedClickHouse(): void {
  before(async function () {
    this.timeout(120_000);
    await sharedClickHouse();
  });
}

/** A two-shard cluster of 18.16 servers, started on first use and shared by the rest of the run. */
export function sharedCluster(): Promise<TestClickHouseCluster> {
  if (forbidden) return Promise.reject(new Error(`shared ClickHouse cluster: ${forbidden}`));
  cluster ??= startClickHouseCluster(2);
  return cluster;
}

/** Stops whatever shared server was started (the root hooks' afterAll); nothing if none was. */
export async function stopSharedClickHouse(): Promise<void> {
  const s = shared;
  const c = cluster;
  shared = null;
  started = null;
  cluster = null;
  await (await s?.catch(() => null))?.dispose();
  await (await c?.catch(() => null))?.dispose();
}

/** Base URL of the shared test server, once started: `await sharedClickHouse()` (or useSharedClickHouse()) first. */
export function clickhouseUrl(): string {
  if (!started) {
    throw new Error(
      'shared ClickHouse is not started: call useSharedClickHouse() in the suite (or await sharedClickHouse()) first',
    );
  }
  return started.url;
}

/** Unique database name so runs and suites never see each other's tables. */
export function uniqueDatabase(prefix = 'tg_test'): string {
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
}
