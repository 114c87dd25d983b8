// Mocha root hooks: shared throwaway servers for the whole run live here.
import { join } from 'node:path';
import { clusterTests, sharedCluster, startSharedClickHouse, stopSharedClickHouse } from './support/shared.ts';

// Servers the tests start with `tracegate serve` share one compile cache (bin/compile-cache.ts), filled once, rather
// than one in each fresh data dir (test/config/compile-cache.test.ts covers that default).
process.env.NODE_COMPILE_CACHE ??= join(process.cwd(), '.tools', 'compile-cache');

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(120_000);
    // The two-shard cluster starts in the background; the storage suites that use it wait for it.
    if (clusterTests) void sharedCluster().catch(() => {});
    await startSharedClickHouse();
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(90_000);
    await stopSharedClickHouse();
  },
};
