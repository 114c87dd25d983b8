// tracegate serve: the collector. Listed in bin/compile-graph.ts with the other modules `serve` loads.
import { accessSync, constants } from 'node:fs';
import { availableParallelism } from 'node:os';
import type { Config } from '../../config/index.ts';
import { compileCacheDir, fillCompileCache } from '../compile-cache.ts';
import { type Command, parseCommandArgs } from '../shared/args.ts';

export const command: Command = {
  summary: [['serve', 'start the collector (configuration from TRACEGATE_* variables)']],
  help: `usage: tracegate serve\n\nStarts the HTTP server on TRACEGATE_PORT (default 4318). Stops gracefully on SIGTERM/SIGINT, flushing the spool.`,
  checkArgs(args: string[]): void {
    parseCommandArgs('serve', args, { options: {} }); // takes no arguments
  },
  async run(_args: string[], config: Config): Promise<number> {
    restartWith(serveFlags(config), serveEnv(config));
    const { startServer } = await import('../../collector/server.ts');
    const running = await startServer(config);
    const stop = (sig: string) => {
      running.log.info({ signal: sig }, 'signal received');
      running.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
    return -1; // keep running
  },
};

/**
 * V8 flags `serve` needs from the start: they cannot be set once V8 runs (--single-threaded-gc not even in
 * NODE_OPTIONS), so the process replaces itself with one started with them (same pid, before anything is opened).
 * The measurements behind each are in bench/HISTORY.md.
 * - --single-threaded-gc: V8 collects garbage with helper threads (four by default) woken at every young-generation
 *   collection. On two cores they only compete with the threads doing the work, and waking a thread is costly on a
 *   virtual machine: native ingestion ran faster without them, p99 no worse.
 * - --max-semi-space-size: for every thread's heap, but the processor and storage threads are held lower already
 *   (WORKER_YOUNG_GEN_MB), so it is the HTTP thread's young generation (about three semi-spaces) it shrinks. Left to
 *   V8 that grows under load and holds much more memory, for no measured throughput. Not added when node was given a
 *   size itself (NODE_OPTIONS or its command line).
 * - --heap-growing-percent (HEAP_GROWING_PERCENT, off by default): how far past what survived a full collection a
 *   thread's old generation may grow before the next one (V8 picks up to 300 % when collecting is cheap). A cap
 *   trades throughput for a lower peak: for an operator short of memory, not a default. Node refuses it in
 *   NODE_OPTIONS.
 */
function serveFlags(config: {
  SINGLE_THREADED_GC: string;
  SEMI_SPACE_MB: number;
  HEAP_GROWING_PERCENT: number;
}): string[] {
  const given = `${process.env.NODE_OPTIONS ?? ''} ${process.execArgv.join(' ')}`;
  const s = config.SINGLE_THREADED_GC;
  const flags: string[] = [];
  if (s === 'auto' ? availableParallelism() <= 2 : s === 'true' || s === '1') flags.push('--single-threaded-gc');
  if (config.SEMI_SPACE_MB > 0 && !/--max[-_]semi[-_]space[-_]size/.test(given))
    flags.push(`--max-semi-space-size=${config.SEMI_SPACE_MB}`);
  if (config.HEAP_GROWING_PERCENT > 0 && !/--heap[-_]growing[-_]percent/.test(given))
    flags.push(`--heap-growing-percent=${config.HEAP_GROWING_PERCENT}`);
  return flags;
}

/** Set in the environment of the process `serve` replaces itself with (restartWith), and taken out there. */
const RESTARTED = 'TRACEGATE_SERVE_RESTARTED';

/**
 * The compile cache (bin/compile-cache.ts), filled before the server starts: the environment the server needs, and
 * whether this process must be replaced anyway (the cache was not current, so it stripped its own sources itself).
 */
function serveEnv(config: Config): { env: NodeJS.ProcessEnv; replace: boolean } {
  // Replaced by `serve` a moment ago: the process before it filled the cache, or said why it could not.
  if (process.env[RESTARTED]) {
    delete process.env[RESTARTED];
    return { env: {}, replace: false };
  }
  const dir = compileCacheDir(config.DATA_DIR);
  if (!dir || !process.execve) return { env: {}, replace: false }; // used only through the restart
  const { filled, error } = fillCompileCache(dir);
  if (error) {
    console.error(`tracegate: starting without the compile cache in ${dir}: ${error}`);
    return { env: {}, replace: false };
  }
  return { env: { NODE_COMPILE_CACHE: dir }, replace: filled };
}

function restartWith(flags: string[], { env, replace }: { env: NodeJS.ProcessEnv; replace: boolean }): void {
  const missing = flags.filter((f) => !process.execArgv.includes(f));
  const changed = Object.entries(env).some(([k, v]) => process.env[k] !== v);
  if ((!missing.length && !changed && !replace) || !process.execve) return; // execve: POSIX only
  // A failed execve aborts the process (it does not throw): go on without the flags when node cannot be run again.
  try {
    accessSync(process.execPath, constants.X_OK);
  } catch {
    return;
  }
  process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], {
    ...process.env,
    ...env,
    [RESTARTED]: '1',
  });
}
