// A throwaway redis-server for tests: loopback only, free port, no persistence, temp dir.
// Set TRACEGATE_TEST_REDIS_URL to use an existing server instead.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, killNow, terminate, waitReady } from './process.ts';

export interface TestRedis {
  url: string;
  external: boolean;
  /** Stop the server and delete its temp dir. */
  stop(): Promise<void>;
  /** SIGSTOP / SIGCONT: a server that keeps its connections and answers nothing (not for an external one). */
  pause(): void;
  resume(): void;
}

/** Raw RESP PING, so readiness does not depend on a client library. */
function pingRedis(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    let buf = '';
    const finish = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(1000, () => finish(false));
    sock.on('error', () => finish(false));
    sock.on('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) finish(buf.startsWith('+PONG'));
    });
  });
}

export async function startRedis(): Promise<TestRedis> {
  const externalUrl = process.env.TRACEGATE_TEST_REDIS_URL;
  if (externalUrl) {
    const unsupported = () => {
      throw new Error('cannot pause an external Redis');
    };
    return { url: externalUrl, external: true, stop: async () => {}, pause: unsupported, resume: unsupported };
  }

  const dir = await mkdtemp(join(tmpdir(), 'tracegate-redis-'));
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
        '--logfile',
        join(dir, 'redis.log'),
        '--daemonize',
        'no',
      ],
      { stdio: 'ignore' },
    );
    try {
      await waitReady(child, () => pingRedis(port), 'redis-server', join(dir, 'redis.log'), 10_000);
    } catch (err) {
      await killNow(child);
      if (attempt < 3) continue;
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
    return {
      url: `redis://127.0.0.1:${port}`,
      external: false,
      stop: async () => {
        child.kill('SIGCONT');
        await terminate(child);
        await rm(dir, { recursive: true, force: true });
      },
      pause: () => {
        child.kill('SIGSTOP');
      },
      resume: () => {
        child.kill('SIGCONT');
      },
    };
  }
}
