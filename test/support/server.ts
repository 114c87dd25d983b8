// Starts a real tracegate HTTP server in-process on a free port, on either storage backend.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig, type Config } from '../../config/index.ts';
import { startServer, type Running } from '../../collector/server.ts';
import { createKey } from '../../collector/workspaces/admin.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { clickhouseUrl, sharedClickHouse } from './shared.ts';

export type Backend = 'duckdb' | 'clickhouse';
export const BACKENDS: Backend[] = ['duckdb', 'clickhouse'];

export interface TestServer {
  url: string;
  config: Config;
  running: Running;
  dataDir: string;
  key(workspace?: string): Promise<{ workspaceId: string; keyId: string; key: string }>;
  close(): Promise<void>;
}

/** The environment of a test server; for 'clickhouse', the shared ClickHouse must be started (useSharedClickHouse()). */
export function testEnv(backend: Backend, extra: Record<string, string> = {}): Record<string, string> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-test-'));
  const env: Record<string, string> = {
    TRACEGATE_PORT: '0',
    TRACEGATE_HOST: '127.0.0.1',
    TRACEGATE_DATA_DIR: dataDir,
    TRACEGATE_LOG_LEVEL: 'silent',
    TRACEGATE_FLUSH_INTERVAL_MS: '100',
  };
  if (backend === 'clickhouse') {
    // The shared server unless the caller names its own (then the shared one need not be running).
    env.TRACEGATE_CLICKHOUSE_URL = extra.TRACEGATE_CLICKHOUSE_URL ?? clickhouseUrl();
    env.TRACEGATE_CLICKHOUSE_DATABASE = `t_${randomBytes(6).toString('hex')}`;
  }
  return { ...env, ...extra };
}

/** `storage` replaces the one the configuration names (the server then uses it on this thread, not a worker). */
export async function startTestServer(
  backend: Backend,
  extra: Record<string, string> = {},
  storage?: Storage,
): Promise<TestServer> {
  if (backend === 'clickhouse' && !extra.TRACEGATE_CLICKHOUSE_URL) await sharedClickHouse();
  const env = testEnv(backend, extra);
  const config = loadConfig(env);
  const running = await startServer(config, storage ? { storage } : {});
  const url = `http://127.0.0.1:${running.port}`;
  return {
    url,
    config,
    running,
    dataDir: config.DATA_DIR,
    key: (workspace = 'ws-' + randomBytes(4).toString('hex')) => createKey(running.storage, workspace),
    close: async () => {
      await running.close();
      rmSync(config.DATA_DIR, { recursive: true, force: true });
    },
  };
}

/** Waits until the pipeline has flushed everything to storage (reads then see all acknowledged data). */
export async function flushed(s: TestServer): Promise<void> {
  await s.running.pipeline.flush();
}

export async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : body instanceof Uint8Array ? new Uint8Array(body) : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, json, text };
}

export async function get(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** Runs the real CLI (bin/tracegate.ts) against a test server's configuration. */
export async function cli(
  s: TestServer | null,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { spawn } = await import('node:child_process');
  const base = s
    ? Object.fromEntries(
        Object.entries(s.config)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]) => [`TRACEGATE_${k}`, String(v)]),
      )
    : {};
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/tracegate.ts', ...args], {
      env: { ...process.env, ...base, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '',
      stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}
