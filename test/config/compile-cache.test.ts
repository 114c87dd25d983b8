// `tracegate serve` runs from Node's compile cache (bin/compile-cache.ts), filled before the server starts, so that no
// thread type-strips the sources and holds the stripper's memory for its whole life.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { compileCacheDir } from '../../bin/compile-cache.ts';
import { sleep } from '../support/process.ts';

interface Started { environ: Record<string, string>; rssMb: number; stderr: string; dataDir: string }

/** Starts `serve` on a fresh data dir with `env` (the suite's own NODE_COMPILE_CACHE removed), idle for a second. */
async function serve(env: Record<string, string>, inspect: (s: Started) => void): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-cc-'));
  const base = { ...process.env };
  delete base.NODE_COMPILE_CACHE;
  delete base.NODE_DISABLE_COMPILE_CACHE;
  const child = spawn(process.execPath, ['bin/tracegate.ts', 'serve'], {
    env: { ...base, TRACEGATE_DATA_DIR: dataDir, TRACEGATE_PORT: '0', TRACEGATE_HOST: '127.0.0.1', TRACEGATE_LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
  try {
    const file = join(dataDir, 'server.json');
    for (let i = 0; i < 600 && !existsSync(file); i++) await sleep(50);
    const { pid } = JSON.parse(readFileSync(file, 'utf8')) as { pid: number };
    await sleep(1000);
    const environ = Object.fromEntries(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
    inspect({ environ, rssMb: rssKb / 1024, stderr, dataDir });
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
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
      expect(s.stderr).to.match(/retrieving transpile cache for StrippedTypeScript file:\/\/\S+\/processors\/worker-host\.ts\.\.\.success/);
      expect(s.stderr).to.match(/retrieving transpile cache for StrippedTypeScript file:\/\/\S+\/storage\/worker-host\.ts\.\.\.success/);
      expect(s.stderr.split('\n').filter((l) => l.includes('no transpile cache'))).to.deep.equal([]);
      cached = s.rssMb;
    });
    await serve({ NODE_DISABLE_COMPILE_CACHE: '1' }, (s) => {
      expect(s.environ.NODE_COMPILE_CACHE).to.equal(undefined);
      expect(existsSync(join(s.dataDir, 'cache', 'compile'))).to.equal(false);
      stripped = s.rssMb;
    });
    // Measured 199 against 259 MB; each thread that strips a .ts file holds its own instance of the stripper.
    expect(stripped - cached, `${Math.round(cached)} MB from the cache, ${Math.round(stripped)} MB stripping`).to.be.greaterThan(30);
  });

  it('a NODE_COMPILE_CACHE given to node is the directory used; a process that filled it is replaced, one that found it current is not', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-cc-given-'));
    // No V8 flag to add, so only the cache decides whether `serve` replaces itself.
    const noFlags = { NODE_COMPILE_CACHE: dir, TRACEGATE_SINGLE_THREADED_GC: 'false', TRACEGATE_SEMI_SPACE_MB: '0' };
    try {
      await serve(noFlags, (s) => {
        expect(s.environ.NODE_COMPILE_CACHE).to.equal(dir);
        expect(s.environ.TRACEGATE_SERVE_RESTARTED, 'it stripped its own first modules while filling: replaced').to.equal('1');
        expect(readdirSync(dir)).to.include('tracegate-sources');
        expect(existsSync(join(s.dataDir, 'cache', 'compile'))).to.equal(false);
      });
      await serve(noFlags, (s) => {
        expect(s.environ.TRACEGATE_SERVE_RESTARTED, 'loaded from the cache from its start: not replaced').to.equal(undefined);
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

  it('compileCacheDir: the given directory, else the data dir\'s; none when Node\'s own switch turns it off', () => {
    expect(compileCacheDir('/d', {})).to.equal('/d/cache/compile');
    expect(compileCacheDir('data', {})).to.equal(join(process.cwd(), 'data/cache/compile'));
    expect(compileCacheDir('/d', { NODE_COMPILE_CACHE: '/c' })).to.equal('/c');
    expect(compileCacheDir('/d', { NODE_DISABLE_COMPILE_CACHE: '1', NODE_COMPILE_CACHE: '/c' })).to.equal(null);
  });
});
