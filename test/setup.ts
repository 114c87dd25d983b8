// Mocha root hooks: shared throwaway servers for the whole run live here.
import { startSharedClickHouse, stopSharedClickHouse } from './support/shared.ts';

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    await startSharedClickHouse();
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    await stopSharedClickHouse();
  },
};
