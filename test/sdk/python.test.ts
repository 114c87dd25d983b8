// The Python SDK (packages/python), tested by `make test`: its unittest suite run with the machine's python3 against
// running tracegates (one plain, one rate-limited to 2 requests a second), and `pip install` of the package into a
// fresh venv with no package index at all, then used there against the server.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { flushed, startTestServer, type TestServer } from '../support/server.ts';
import { listTraces } from './support/receiver.ts';

const PACKAGE = resolve('packages/python');

function run(
  cmd: string,
  args: string[],
  env: Record<string, string | undefined>,
  cwd = process.cwd(),
): Promise<{ code: number; out: string }> {
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd, env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', fail);
    child.on('close', (code) => done({ code: code ?? -1, out }));
  });
}

/** The environment without anything that points pip at a package source (config files, find-links, indexes). */
function offlineEnv(): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('PIP_')) delete env[k];
  return {
    ...env,
    PIP_CONFIG_FILE: '/dev/null',
    PIP_NO_INDEX: '1',
    PIP_DISABLE_PIP_VERSION_CHECK: '1',
    PYTHONDONTWRITEBYTECODE: '1',
  };
}

describe('sdk (Python): packages/python against a running tracegate', function () {
  this.timeout(240_000);
  let s: TestServer;
  let limited: TestServer;
  let signals: boolean;

  before(async () => {
    s = await startTestServer('duckdb');
    limited = await startTestServer('duckdb', {
      TRACEGATE_RATE_LIMIT_POINTS: '2',
      TRACEGATE_RATE_LIMIT_WINDOW_SECONDS: '1',
    });
    const probe = await Promise.all(
      ['/api/ingest/feedback', '/api/ingest/tool-calls'].map((p) => fetch(s.url + p, { method: 'OPTIONS' })),
    );
    signals = probe.every((res) => res.status !== 404);
  });
  after(async () => {
    await s.close();
    await limited.close();
  });

  it('python3 -m unittest: every test of the suite passes', async () => {
    const [k, l] = [await s.key(), await limited.key()];
    const { code, out } = await run(
      'python3',
      ['-m', 'unittest', 'discover', '-s', 'tests', '-t', '.', '-v'],
      {
        ...process.env,
        PYTHONPATH: PACKAGE,
        PYTHONDONTWRITEBYTECODE: '1',
        TRACEGATE_TEST_URL: s.url,
        TRACEGATE_TEST_KEY: k.key,
        TRACEGATE_TEST_LIMITED_URL: limited.url,
        TRACEGATE_TEST_LIMITED_KEY: l.key,
        TRACEGATE_TEST_SIGNALS: signals ? '1' : '0',
      },
      PACKAGE,
    );
    expect(code, out).to.equal(0);
    const ran = Number(/^Ran (\d+) tests?/m.exec(out)?.[1] ?? 0);
    expect(ran, out).to.be.at.least(37);
    // Skipped: only the real signal routes, and only on a server without them.
    const skipped = out.split('\n').filter((line) => / skipped /.test(line));
    expect(
      skipped.every((line) => line.includes('has no /api/ingest/feedback')),
      out,
    ).to.equal(true);
    expect(skipped.length, out).to.equal(signals ? 0 : 1);
    if (!signals)
      console.log('      (the Python signal-route test was skipped: this tracegate has no signal routes yet)');
  });

  it('pip install of packages/python into a fresh venv with no index works, and the package works there', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-py-'));
    try {
      const venv = join(dir, 'venv');
      const env = offlineEnv();
      const made = await run('python3', ['-m', 'venv', venv], env);
      expect(made.code, made.out).to.equal(0);
      const pip = await run(join(venv, 'bin', 'pip'), ['install', '--no-index', PACKAGE], env, dir);
      expect(pip.code, pip.out).to.equal(0);
      expect(pip.out).to.match(/Successfully installed tracegate-0\.1\.0/);
      const files = await run(join(venv, 'bin', 'pip'), ['show', '-f', 'tracegate'], env, dir);
      expect(files.out).to.match(/tracegate\/_client\.py/);
      expect(files.out).to.not.match(/flit_core|tests\//); // the build backend and the tests stay out

      const { key } = await s.key();
      const script = [
        'import sys',
        'from tracegate import Tracegate',
        `tg = Tracegate(${JSON.stringify(key)}, ${JSON.stringify(s.url)}, on_error=lambda e: print("error", e, file=sys.stderr))`,
        'ids = [tg.trace("gpt-4o-mini", "installed %d" % i, {"response": "ok"}) for i in range(3)]',
        'print(tg.flush(10), " ".join(ids))',
      ].join('\n');
      const used = await run(join(venv, 'bin', 'python'), ['-c', script], env, dir);
      expect(used.code, used.out).to.equal(0);
      const [flushedOk, ...ids] = used.out.trim().split(/\s+/);
      expect(flushedOk, used.out).to.equal('True');
      await flushed(s);
      const stored = await listTraces(s.url, key);
      expect(stored.map((t) => t.traceId).sort()).to.deep.equal([...ids].sort());
      expect(stored.every((t) => t.source === 'sdk')).to.equal(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
