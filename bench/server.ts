// A tracegate server in a child process on a fresh data directory: what every server case of the bench starts.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Config, loadConfig } from '../config/index.ts';
import type { Storage } from '../core/ports/storage.ts';
import { createStorage } from '../storage/index.ts';
import { startChild, terminate } from './lib.ts';
import { freePort } from './lib.ts';

export interface BenchServer<T> {
  url: string;
  port: number;
  dataDir: string;
  config: Config;
  child: ChildProcess;
  /** What `setup` returned: the keys, secrets… made before the server started. */
  made: T;
  /** Stops the server (SIGTERM flushes the spool) and removes its data directory. */
  close(timeoutMs?: number): Promise<void>;
}

/**
 * Starts `bin/tracegate.ts serve` with `env` over the bench's defaults. `setup` runs first on the same storage (keys,
 * signing secrets), closed again before the server opens it. No rate limit; the final flush may take as long as it
 * needs, because stored counts are read right after exit.
 */
export async function startBenchServer<T>(
  env: Record<string, string>,
  setup: (storage: Storage, dataDir: string) => Promise<T>,
): Promise<BenchServer<T>> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-bench-'));
  const fullEnv = {
    TRACEGATE_DATA_DIR: dataDir,
    TRACEGATE_PORT: String(port),
    TRACEGATE_HOST: '127.0.0.1',
    TRACEGATE_LOG_LEVEL: 'warn',
    TRACEGATE_RATE_LIMIT_POINTS: '100000000',
    TRACEGATE_SHUTDOWN_FLUSH_MS: '240000',
    ...env,
  };
  const config = loadConfig(fullEnv);
  const storage = createStorage(config);
  await storage.init();
  const made = await setup(storage, dataDir).finally(() => storage.close());
  const url = `http://127.0.0.1:${port}`;
  const child = await startChild('bin/tracegate.ts', ['serve'], fullEnv, `${url}/healthz`);
  return {
    url,
    port,
    dataDir,
    config,
    child,
    made,
    close: async (timeoutMs?: number) => {
      await terminate(child, timeoutMs);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Spans stored for a workspace, read once the server has exited. */
export async function storedSpans(config: Config, workspaceId: string): Promise<number> {
  const storage = createStorage(config);
  await storage.init();
  try {
    return await storage.countSpans(workspaceId);
  } finally {
    await storage.close();
  }
}
