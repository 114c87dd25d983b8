// Real local model servers for tests, on free ports of 127.0.0.1, serving the tiny deterministic model
// (tiny-gguf.ts) with real llama.cpp:
//   - startShim(): node-llama-cpp's prebuilt binding behind Ollama's protocol (and OpenAI's /v1), llama-shim.ts;
//   - startLlamaServer(): llama.cpp's own llama-server (OpenAI-compatible), built once per machine by
//     scripts/build-llama-server.sh into a cache outside the repository. `make test` starts that build in the
//     background; llamaServerBinary() waits for it, within a bound.
// Each server is stopped by its pid (stop()), and at the latest when the test process exits.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeTinyGguf } from './tiny-gguf.ts';

export { TINY_COMPLETION_TOKENS, TINY_REPLY, TINY_REPLY_DELTAS } from './tiny-gguf.ts';

/** The name both servers answer to (llama-server takes it as its alias; it ignores the name a request sends). */
export const TINY_MODEL = 'tracegate-tiny';

const here = import.meta.dirname;
const root = join(here, '..', '..', '..');
const buildScript = join(root, 'scripts', 'build-llama-server.sh');
const nodeModules = join(here, 'node_modules');

export interface ModelServer {
  /** Base URL, e.g. http://127.0.0.1:40123 (no trailing slash). */
  url: string;
  /** The protocol tracegate speaks to it (TRACEGATE_LOCAL_MODEL_API). */
  api: 'ollama' | 'openai';
  pid: number;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and waits for it to exit. */
  stop(): Promise<void>;
}

const children = new Set<ChildProcess>();
let modelDir: string | null = null;
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
  if (modelDir) rmSync(modelDir, { recursive: true, force: true });
});

/** The tiny model, written once per test process into a temp folder (removed at exit). */
export function tinyModelPath(): string {
  if (!modelDir) {
    modelDir = mkdtempSync(join(tmpdir(), 'tracegate-tiny-model-'));
    writeTinyGguf(join(modelDir, 'tiny.gguf'));
  }
  return join(modelDir, 'tiny.gguf');
}

/** A port nothing listens on now (listen on 0, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.once('error', reject);
  });
}

function track(child: ChildProcess, url: string, api: ModelServer['api']): ModelServer {
  children.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    url,
    api,
    pid: child.pid!,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(killer);
      }
      children.delete(child);
    },
  };
}

/** node-llama-cpp behind Ollama's protocol (and OpenAI's /v1); ready once it prints its address. */
export async function startShim(): Promise<ModelServer> {
  if (!existsSync(join(nodeModules, 'node-llama-cpp')))
    throw new Error(`node-llama-cpp is not installed: run npm ci --prefix test/support/local-model (make test does)`);
  const model = tinyModelPath();
  const child = spawn(
    process.execPath,
    [join(here, 'llama-shim.ts'), '--model', model, '--port', '0', '--name', TINY_MODEL],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + String(d)).slice(-4000)));
  const server = track(child, '', 'ollama');
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`llama-shim not ready within 60 s: ${stderr}`)), 60_000);
      child.stdout!.on('data', (d: Buffer) => {
        const m = /ready (http:\/\/\S+)/.exec(String(d));
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`llama-shim exited with ${code}: ${stderr}`));
      });
    });
    return { ...server, url };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

/**
 * The llama-server binary: LLAMA_SERVER_BIN, else the cached build, else the build's result. A build under way
 * (make test starts one in the background) is waited for: the script takes its lock. Fails after `timeoutMs`.
 */
export function llamaServerBinary(timeoutMs = 30 * 60_000): Promise<string> {
  const given = process.env.LLAMA_SERVER_BIN;
  if (given) return Promise.resolve(given);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    execFile('bash', [buildScript], { timeout: timeoutMs, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      const bin = stdout.trim().split('\n').at(-1) ?? '';
      const waited = Math.round((Date.now() - started) / 1000);
      if (!err && existsSync(bin)) {
        if (waited > 1) console.error(`      (waited ${waited} s for llama-server: scripts/build-llama-server.sh)`);
        return resolve(bin);
      }
      reject(
        new Error(
          `llama-server is not available after ${waited} s (scripts/build-llama-server.sh; or set LLAMA_SERVER_BIN): ${err?.message ?? ''}\n${stderr.slice(-2000)}`,
        ),
      );
    });
  });
}

/** llama.cpp's llama-server (OpenAI-compatible), one thread; ready once GET /health answers ok. */
export async function startLlamaServer(bin?: string): Promise<ModelServer> {
  const binary = bin ?? (await llamaServerBinary());
  const model = tinyModelPath();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const args = ['-m', model, '--host', '127.0.0.1', '--port', String(port), '-t', '1', '-c', '2048'];
  const child = spawn(binary, [...args, '--no-webui', '--alias', TINY_MODEL], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + String(d)).slice(-4000)));
  const server = track(child, url, 'openai');
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited with ${child.exitCode}: ${stderr}`);
    const ok = await fetch(`${url}/health`).then(
      async (r) => r.ok && ((await r.json()) as { status?: string }).status === 'ok',
      () => false,
    );
    if (ok) return server;
    if (Date.now() > deadline) {
      await server.stop();
      throw new Error(`llama-server not healthy within 60 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
