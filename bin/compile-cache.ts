// `serve` runs with Node's module compile cache, filled before the server starts.
// Node strips the sources' types as it loads them, with a WebAssembly build of swc (amaro) instantiated in each
// thread that loads a .ts file, and its memory is never given back (tens of MB of an idle server's RSS). From the
// cache, the stripped code is read back and amaro is never loaded (nodejs/node#56629). The cache is filled by a short
// child process that compiles the server's whole module graph without running it, before the server starts: a
// server that compiled its own sources would carry amaro for the rest of its life.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SOURCE_DIRS = [
  'core',
  'config',
  'platform',
  'spool',
  'protocols',
  'storage',
  'processors',
  'pipeline',
  'mappers',
  'collector',
  'bin',
];
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

/**
 * What the cache was last filled from: node, the user (Node keeps a directory per user), where the sources are (entries
 * are named by absolute path) and what they hold. Node checks each entry against its source itself: a stale stamp
 * can only cost memory, never run old code.
 */
function fingerprint(): string {
  const hash = createHash('sha256').update(`${process.version} ${process.getuid?.() ?? ''} ${ROOT}\n`);
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts')) files.push(p);
    }
  };
  for (const d of SOURCE_DIRS) walk(join(ROOT, d));
  for (const f of files.sort()) hash.update(`${relative(ROOT, f)}\n`).update(readFileSync(f));
  return hash.digest('hex');
}

/** The child's program: compile the graph, check the cache took it, and say what went wrong on stderr. */
const FILL_SCRIPT = (graph: string) => `import { flushCompileCache, getCompileCacheDir } from 'node:module';
if (!getCompileCacheDir()) { console.error('node did not enable the compile cache there'); process.exit(5); }
try { await import(${JSON.stringify(graph)}); } catch (e) {
  if (!e?.compiledOnly) { console.error(String(e?.stack ?? e)); process.exit(4); }
}
flushCompileCache();`;

/**
 * Fill `dir` with the server's compiled modules unless it holds them for these sources already. `filled`: the child ran
 * (the cache was not current). `error`: why it could not be filled (the server then starts and compiles as it would
 * without a cache).
 */
export function fillCompileCache(dir: string): { filled: boolean; error: string | null } {
  try {
    const stamp = join(dir, STAMP);
    const now = fingerprint();
    let before = '';
    try {
      before = readFileSync(stamp, 'utf8');
    } catch {
      /* not filled yet */
    }
    if (before === now) return { filled: false, error: null };
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const graph = pathToFileURL(join(ROOT, 'bin/compile-graph.ts')).href;
    // node's own options too (they may change how modules resolve or compile), but never a debugger's port.
    const execArgv = process.execArgv.filter((a) => !/^--inspect/.test(a));
    const r = spawnSync(process.execPath, [...execArgv, '--input-type=module', '-e', FILL_SCRIPT(graph)], {
      env: { ...process.env, NODE_COMPILE_CACHE: dir },
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 120_000,
      maxBuffer: 64 << 20,
    });
    if (r.status !== 0) {
      const said = String(r.stderr ?? '')
        .trim()
        .split('\n')
        .filter((l) => !l.startsWith('[compile cache]'))
        .at(0);
      return {
        filled: true,
        error: `compiling the module graph failed (${r.error?.message ?? `exit ${r.status ?? r.signal}`}${said ? `: ${said}` : ''})`,
      };
    }
    writeFileSync(stamp, now);
    return { filled: true, error: null };
  } catch (err) {
    return { filled: true, error: (err as Error).message };
  }
}
