// Mocha root hooks. The shared throwaway ClickHouse and cluster (test/support/shared.ts) start lazily, on first use
// by a suite that needs them; here they are only stopped at the end of the run, if they were started at all.
import { join } from 'node:path';
import { stopSharedClickHouse } from './support/shared.ts';

// Servers the tests start with `tracegate serve` share one compile cache (bin/compile-cache.ts), filled once, rather
// than one in each fresh data dir (test/config/compile-cache.test.ts covers that default).
process.env.NODE_COMPILE_CACHE ??= join(process.cwd(), '.tools', 'compile-cache');

export const mochaHooks = {
  async afterAll(this: Mocha.Context) {
    this.timeout(90_000);
    await stopSharedClickHouse();
  },
};
