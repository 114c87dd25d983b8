// `tracegate serve` with TRACEGATE_SINGLE_THREADED_GC: the process replaces itself with one running V8's garbage
// collector without helper threads (same pid), or keeps its own arguments when the setting is off.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from '../support/process.ts';

async function serveArgs(setting: string): Promise<{ pid: number; childPid: number; args: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'tracegate-gc-'));
  const child = spawn(process.execPath, ['bin/tracegate.ts', 'serve'], {
    env: { ...process.env, TRACEGATE_DATA_DIR: dir, TRACEGATE_PORT: '0', TRACEGATE_HOST: '127.0.0.1', TRACEGATE_LOG_LEVEL: 'silent', TRACEGATE_SINGLE_THREADED_GC: setting },
    stdio: 'ignore',
  });
  try {
    const file = join(dir, 'server.json');
    for (let i = 0; i < 300 && !existsSync(file); i++) await sleep(50);
    const { pid } = JSON.parse(readFileSync(file, 'utf8')) as { pid: number };
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    return { pid, childPid: child.pid!, args };
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('serve: single-threaded garbage collection', function () {
  this.timeout(60_000);
  it('true: the server runs with --single-threaded-gc, in the process that was started', async () => {
    const r = await serveArgs('true');
    expect(r.pid).to.equal(r.childPid);
    expect(r.args.slice(1, 3)).to.deep.equal(['--single-threaded-gc', join(process.cwd(), 'bin/tracegate.ts')]);
    expect(r.args.at(-1)).to.equal('serve');
  });

  it('false: the server keeps V8\'s helper threads (its arguments as started)', async () => {
    const r = await serveArgs('false');
    expect(r.pid).to.equal(r.childPid);
    expect(r.args).to.not.include('--single-threaded-gc');
  });
});
