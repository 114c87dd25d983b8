// Integer settings through `tracegate serve` (a child process): a non-decimal value stops it at once, naming the
// variable. The checks of loadConfig itself are unit tests: test/unit/config/integers.test.ts.
import { expect } from 'chai';
import { cli } from '../support/server.ts';

describe('integer settings', () => {
  it('serve stops at once on TRACEGATE_PORT=0x10 (it used to listen on port 16), naming the variable', async function () {
    this.timeout(90_000);
    const out = await cli(null, ['serve'], {
      TRACEGATE_PORT: '0x10',
      TRACEGATE_DATA_DIR: '/nonexistent/never-created',
    });
    expect(out.code).to.equal(1);
    expect(out.stderr).to.include('TRACEGATE_PORT').and.include('decimal digits');
  });
});
