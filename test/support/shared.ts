// The one ClickHouse server shared by the whole mocha run (started by the root hooks in test/setup.ts).
import { startClickHouse, type TestClickHouse } from './clickhouse.ts';

let shared: TestClickHouse | null = null;

export async function startSharedClickHouse(): Promise<void> {
  shared ??= await startClickHouse();
}

export async function stopSharedClickHouse(): Promise<void> {
  const s = shared;
  shared = null;
  await s?.dispose();
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
