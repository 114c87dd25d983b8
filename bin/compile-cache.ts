// `serve` runs with Node's module compile cache, filled before the server starts.
// Node strips the sources' types as it loads them, with a WebAssembly build of swc (amaro) instantiated in each
// thread that loads a .ts file, and its memory is never given back: measured on an idle server, 258 MB of RSS
// against 201 MB when every module comes from the cache (190 MB for the same code compiled to .js). From the cache,
// the stripped code is read back and amaro is never loaded (nodejs/node#56629). The cache is filled by a short
// child process that compiles the server's whole module graph without running it, before the server starts: a
// server that compiled its own sources would carry amaro for the rest of its life.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SOURCE_DIRS = ['bin', 'collector', 'mappers', 'storage', 'config', 'processors'];
const STAMP = 'tracegate-sources';

/**
 * The directory `serve` gives Node (NODE_COMPILE_CACHE): the one given to node already, else DATA_DIR/cache/compile
 * (a directory this service owns: a cache in a shared /tmp could be planted by another user). None with
 * NODE_DISABLE_COMPILE_CACHE, Node's own way of turning it off.
 */
export function compileCacheDir(dataDir: string, env: NodeJS.ProcessEnv = process.env): string | null {
  if (env.NODE_DISABLE_COMPILE_CACHE) return null;
  return env.NODE_COMPILE_CACHE || resolve(dataDir, 'cache', 'compile');
}

/** What the cache was last filled from: node's version and each source file's path, size and time. */
function fingerprint(): string {
  const lines = [process.version];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts')) {
        const s = statSync(p);
        lines.push(`${relative(ROOT, p)} ${s.size} ${s.mtimeMs}`);
      }
    }
  };
  for (const d of SOURCE_DIRS) walk(join(ROOT, d));
  return lines.sort().join('\n');
}

/**
 * Fill `dir` with the server's compiled modules unless it holds them for these sources already. Returns a reason
 * when it could not (the server then starts and compiles as it would without a cache).
 */
export function fillCompileCache(dir: string): string | null {
  try {
    const stamp = join(dir, STAMP);
    const now = fingerprint();
    let before = '';
    try { before = readFileSync(stamp, 'utf8'); } catch { /* not filled yet */ }
    if (before === now) return null;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const graph = pathToFileURL(join(ROOT, 'bin/compile-graph.ts')).href;
    const script = `import { flushCompileCache } from 'node:module';
      let code = 3;
      try { await import(${JSON.stringify(graph)}); } catch (e) { code = e?.compiledOnly ? 0 : 4; }
      flushCompileCache();
      process.exitCode = code;`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, NODE_COMPILE_CACHE: dir }, stdio: 'ignore', timeout: 120_000,
    });
    if (r.status !== 0) return `compiling the module graph failed (${r.error?.message ?? `exit ${r.status ?? r.signal}`})`;
    writeFileSync(stamp, now);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}
