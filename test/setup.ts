// Mocha root hooks: shared throwaway servers for the whole run live here.
import { clusterTests, sharedCluster, startSharedClickHouse, stopSharedClickHouse } from './support/shared.ts';

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
