// One collector per DATA_DIR: a second `tracegate serve` on a directory in use refuses to start
// (two writers would corrupt each other's spool); a lock left by a dead process is taken over.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, terminate, waitReady } from '../support/process.ts';
import { get, testEnv } from '../support/server.ts';

describe('DATA_DIR lock', function () {
  this.timeout(120_000);

  it('refuses a second server on the same DATA_DIR and takes over a stale lock', async function () {
    const env = testEnv('duckdb', { TRACEGATE_LOG_LEVEL: 'warn' });
    const dir = env.TRACEGATE_DATA_DIR!;
    // a lock left behind by a process that no longer exists
    writeFileSync(join(dir, 'LOCK'), '2147483646');
    const port = await freePort();
    const first = spawn(process.execPath, ['bin/tracegate.ts', 'serve'], {
      env: { ...process.env, ...env, TRACEGATE_PORT: String(port) },
      stdio: 'ignore',
    });
    try {
      await waitReady(
        first,
        async () => (await get(`http://127.0.0.1:${port}/healthz`).catch(() => ({ status: 0 }))).status === 200,
        'first server',
        '/dev/null',
      );
      expect(readFileSync(join(dir, 'LOCK'), 'utf8')).to.equal(String(first.pid));

      const second = spawn(process.execPath, ['bin/tracegate.ts', 'serve'], {
        env: { ...process.env, ...env, TRACEGATE_PORT: String(await freePort()) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      second.stderr!.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      await new Promise((resolve) => second.once('close', resolve)); // after stderr is drained
      expect(second.exitCode).to.equal(1);
      expect(stderr).to.include(`in use by another tracegate process (pid ${first.pid})`);
      // the first one is unharmed
      expect((await get(`http://127.0.0.1:${port}/healthz`)).status).to.equal(200);
    } finally {
      await terminate(first);
    }
    expect(existsSync(join(dir, 'LOCK')), 'released on shutdown').to.equal(false);
    rmSync(dir, { recursive: true, force: true });
  });

  // Processes that only take the lock, hold it for a moment and say whether they got it.
  const holder = (dir: string, holdMs: number) =>
    spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
    const { lockDataDir } = await import(${JSON.stringify(new URL('../../platform/data-dir-lock.ts', import.meta.url).href)});
    try { await lockDataDir(${JSON.stringify(dir)}); console.log('got'); setTimeout(() => {}, ${holdMs}); }
    catch (e) { console.log('refused: ' + e.message); }`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
  const output = (p: ReturnType<typeof holder>) =>
    new Promise<string>((resolve) => {
      let out = '';
      p.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
      });
      p.once('close', () => resolve(out.trim()));
    });

  it('exactly one of several processes starting at once gets it, fresh or after a kill -9', async function () {
    const dir = mkdtempSync(join(tmpdir(), 'tg-lock-'));
    try {
      for (let trial = 0; trial < 3; trial++) {
        const outs = await Promise.all([0, 1, 2, 3].map(() => output(holder(dir, 1000))));
        expect(
          outs.filter((o) => o === 'got'),
          outs.join(' | '),
        ).to.have.length(1);
        expect(
          outs.filter((o) => o.startsWith('refused: ')),
          outs.join(' | '),
        ).to.have.length(3);
      }
      // killed while holding it: released at once, no stale state
      const victim = holder(dir, 60_000);
      const first = await new Promise<string>((resolve) =>
        victim.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())),
      );
      expect(first).to.equal('got');
      victim.kill('SIGKILL');
      await new Promise((resolve) => victim.once('close', resolve));
      const outs = await Promise.all([0, 1, 2].map(() => output(holder(dir, 1000))));
      expect(
        outs.filter((o) => o === 'got'),
        outs.join(' | '),
      ).to.have.length(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
