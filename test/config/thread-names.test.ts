// The server's worker threads carry names the OS shows (top -H, ps -L, /proc/<pid>/task/*/comm), so that a look at
// a busy server tells which part is busy.
import { expect } from 'chai';
import { withServeChild } from '../support/serve-child.ts';

describe('serve: named threads', function () {
  this.timeout(60_000);
  it('the processor and storage threads are tg-processor and tg-storage', async () => {
    const threads = await withServeChild({ env: { NODE_DISABLE_COMPILE_CACHE: '1' } }, (s) => s.threads);
    expect(threads).to.include.members(['MainThread', 'tg-processor', 'tg-storage']);
  });
});
