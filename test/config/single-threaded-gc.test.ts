// `tracegate serve` with TRACEGATE_SINGLE_THREADED_GC, TRACEGATE_SEMI_SPACE_MB and TRACEGATE_HEAP_GROWING_PERCENT: the process replaces itself
// with one started with V8's flags for them (same pid), or keeps its own arguments when neither is wanted.
import { expect } from 'chai';
import { join } from 'node:path';
import { withServeChild } from '../support/serve-child.ts';

function serveArgs(
  setting: string,
  extra: Record<string, string> = {},
  nodeArgs: string[] = [],
): Promise<{ pid: number; childPid: number; args: string[] }> {
  // Without the compile cache, which restarts the process too (test/config/compile-cache.test.ts).
  const env = { NODE_DISABLE_COMPILE_CACHE: '1', TRACEGATE_SINGLE_THREADED_GC: setting, ...extra };
  return withServeChild({ env, nodeArgs }, ({ pid, childPid, args }) => ({ pid, childPid, args }));
}

describe("serve: V8 flags from the start (single-threaded garbage collection, the HTTP thread's young generation)", function () {
  this.timeout(60_000);
  const script = join(process.cwd(), 'bin/tracegate.ts');
  it('true: the server runs with --single-threaded-gc and 16 MB semi-spaces, in the process that was started', async () => {
    const r = await serveArgs('true');
    expect(r.pid).to.equal(r.childPid);
    expect(r.args.slice(1, 4)).to.deep.equal(['--single-threaded-gc', '--max-semi-space-size=16', script]);
    expect(r.args.at(-1)).to.equal('serve');
  });

  it("false: the server keeps V8's helper threads; another semi-space size when configured", async () => {
    const r = await serveArgs('false', { TRACEGATE_SEMI_SPACE_MB: '24' });
    expect(r.pid).to.equal(r.childPid);
    expect(r.args.slice(1, 3)).to.deep.equal(['--max-semi-space-size=24', script]);
  });

  it("TRACEGATE_HEAP_GROWING_PERCENT: V8 grows each thread's old generation by at most that much; kept when given to node", async () => {
    const r = await serveArgs('false', { TRACEGATE_HEAP_GROWING_PERCENT: '25' });
    expect(r.pid).to.equal(r.childPid);
    expect(r.args.slice(1, 4)).to.deep.equal(['--max-semi-space-size=16', '--heap-growing-percent=25', script]);
    const given = await serveArgs('false', { TRACEGATE_SEMI_SPACE_MB: '0', TRACEGATE_HEAP_GROWING_PERCENT: '25' }, [
      '--heap-growing-percent=40',
    ]);
    expect(given.args.slice(1)).to.deep.equal(['--heap-growing-percent=40', 'bin/tracegate.ts', 'serve']);
  });

  it('neither wanted (or a semi-space size given to node itself): its arguments as started', async () => {
    for (const extra of [{ TRACEGATE_SEMI_SPACE_MB: '0' }, { NODE_OPTIONS: '--max-semi-space-size=32' }] as Array<
      Record<string, string>
    >) {
      const r = await serveArgs('false', extra);
      expect(r.pid).to.equal(r.childPid);
      expect(r.args.slice(1), JSON.stringify(extra)).to.deep.equal(['bin/tracegate.ts', 'serve']);
    }
    const r = await serveArgs('false', {}, ['--max_semi_space_size=32']);
    expect(r.args.slice(1)).to.deep.equal(['--max_semi_space_size=32', 'bin/tracegate.ts', 'serve']);
  });
});
