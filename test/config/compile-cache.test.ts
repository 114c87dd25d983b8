// `tracegate serve` runs from Node's compile cache (bin/compile-cache.ts), filled before the server starts, so that no
// thread type-strips the sources and holds the stripper's memory for its whole life.
import { expect } from 'chai';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { withServeChild, type ServeChild } from '../support/serve-child.ts';

/** `serve` on a fresh data dir with `env` (the suite's own compile cache setting removed), idle for a second. */
function serve(env: Record<string, string>, inspect: (s: ServeChild) => void): Promise<void> {
  return withServeChild({ env, unset: ['NODE_COMPILE_CACHE', 'NODE_DISABLE_COMPILE_CACHE'], idleMs: 1000 }, inspect);
}

describe('serve: the compile cache', function () {
  this.timeout(90_000);

  it('fills DATA_DIR/cache/compile before the server starts: no thread strips a source itself; ~60 MB less memory', async () => {
    let cached = 0;
    let stripped = 0;
    // Node's own account of each module it loads: "no transpile cache for StrippedTypeScript <file>" is a source the
    // server's threads stripped themselves (one missing from bin/compile-graph.ts, say).
    await serve({ NODE_DEBUG_NATIVE: 'COMPILE_CACHE' }, (s) => {
      const dir = join(s.dataDir, 'cache', 'compile');
      expect(s.environ.NODE_COMPILE_CACHE).to.equal(dir);
      expect(readdirSync(dir)).to.include('tracegate-sources');
      expect(statSync(dir).mode & 0o777).to.equal(0o700);
      expect(s.stderr).to.match(
        /retrieving transpile cache for StrippedTypeScript file:\/\/\S+\/pipeline\/processor-thread\.ts\.\.\.success/,
      );
      expect(s.stderr).to.match(
        /retrieving transpile cache for StrippedTypeScript file:\/\/\S+\/storage\/worker-host\.ts\.\.\.success/,
      );
      expect(s.stderr.split('\n').filter((l) => l.includes('no transpile cache'))).to.deep.equal([]);
      cached = s.rssMb;
    });
    await serve({ NODE_DISABLE_COMPILE_CACHE: '1' }, (s) => {
      expect(s.environ.NODE_COMPILE_CACHE).to.equal(undefined);
      expect(existsSync(join(s.dataDir, 'cache', 'compile'))).to.equal(false);
      stripped = s.rssMb;
    });
    // Measured 199 against 259 MB; each thread that strips a .ts file holds its own instance of the stripper.
    expect(
      stripped - cached,
      `${Math.round(cached)} MB from the cache, ${Math.round(stripped)} MB stripping`,
    ).to.be.greaterThan(30);
  });

  it('a NODE_COMPILE_CACHE given to node is the directory used; a process that filled it is replaced, one that found it current is not', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-cc-given-'));
    // No V8 flag to add, so only the cache decides whether `serve` replaces itself.
    const noFlags = { NODE_COMPILE_CACHE: dir, TRACEGATE_SINGLE_THREADED_GC: 'false', TRACEGATE_SEMI_SPACE_MB: '0' };
    try {
      await serve(noFlags, (s) => {
        expect(s.environ.NODE_COMPILE_CACHE).to.equal(dir);
        expect(
          s.environ.TRACEGATE_SERVE_RESTARTED,
          'it stripped its own first modules while filling: replaced',
        ).to.equal('1');
        expect(readdirSync(dir)).to.include('tracegate-sources');
        expect(existsSync(join(s.dataDir, 'cache', 'compile'))).to.equal(false);
      });
      await serve(noFlags, (s) => {
        expect(s.environ.TRACEGATE_SERVE_RESTARTED, 'loaded from the cache from its start: not replaced').to.equal(
          undefined,
        );
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a cache that cannot be filled: the server starts without it and says why', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'tracegate-cc-file-')), 'a-file');
    writeFileSync(file, '');
    try {
      await serve({ NODE_COMPILE_CACHE: join(file, 'cache') }, (s) => {
        expect(s.stderr).to.include(`starting without the compile cache in ${join(file, 'cache')}: `);
        expect(s.environ.TRACEGATE_DATA_DIR).to.equal(s.dataDir); // it runs
      });
    } finally {
      rmSync(dirname(file), { recursive: true, force: true });
    }
  });
});
