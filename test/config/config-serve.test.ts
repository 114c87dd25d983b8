// Configuration validation through `tracegate serve` (a child process): it refuses a bad value at once, naming the
// variable. The checks of loadConfig itself are unit tests: test/unit/config/config.test.ts.
import { expect } from 'chai';
import { cli } from '../support/server.ts';

describe('configuration bounds', () => {
  it('serve stops at once with the message naming the variable', async function () {
    this.timeout(90_000);
    for (const [name, value] of [
      ['TRACEGATE_CLICKHOUSE_URL', 'localhost:8123'],
      ['TRACEGATE_PORT', '70000'],
    ] as const) {
      const started = Date.now();
      const out = await cli(null, ['serve'], { [name]: value, TRACEGATE_DATA_DIR: '/nonexistent/never-created' });
      expect(out.code, name).to.equal(1);
      expect(out.stderr).to.include(name);
      expect(Date.now() - started).to.be.below(15_000);
    }
  });
});
