// Starting while ClickHouse is down: the collector must still come up, so that what is in the spool replays
// and ingestion resumes the moment storage is back, without anyone restarting it.
import { STORAGE_UNREACHABLE, StorageConfigError, TracegateError } from '../core/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { Storage } from '../core/ports/storage.ts';

/** Every call but init and close, until init has succeeded: an outage (503 with Retry-After, spool kept). */
export class StorageNotReadyError extends TracegateError {
  constructor(message: string) {
    super('unavailable', STORAGE_UNREACHABLE, message, { retryAfterSeconds: 5 });
  }
}

export { StorageConfigError };

/**
 * `storage` with init retried in the background (backoff 0.5 s → 30 s) until it succeeds. Until then every
 * call except init and close fails at once with StorageNotReadyError, which callers treat as an outage
 * (503 with Retry-After, spool kept, readiness false); nothing touches tables whose migrations have not run.
 */
export function initInBackground(
  storage: Storage,
  log: Logger,
  firstError: unknown,
): { storage: Storage; stop(): void } {
  let ready = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let delay = 500;
  log.error(
    { err: firstError },
    'storage unreachable at start: serving anyway (ingestion answers 503 until it is reachable, then migrations run and the spool replays)',
  );
  const attempt = () => {
    timer = undefined;
    if (stopped) return;
    storage.init().then(
      () => {
        ready = true;
        log.info('storage reachable: migrations done, accepting requests');
      },
      (err: unknown) => {
        log.warn(
          { err: err instanceof Error ? err.message : String(err), retryInMs: delay },
          'storage still unreachable',
        );
        if (!stopped) (timer = setTimeout(attempt, delay)).unref(); // never what keeps a failed start alive
        delay = Math.min(30_000, delay * 2);
      },
    );
  };
  (timer = setTimeout(attempt, delay)).unref();
  const gated = new Proxy(storage, {
    get(target, prop) {
      const v: unknown = Reflect.get(target, prop, target);
      if (typeof v !== 'function') return v;
      const fn = v as (...args: unknown[]) => unknown;
      if (prop === 'init' || prop === 'close') return fn.bind(target);
      return (...args: unknown[]) =>
        ready
          ? fn.apply(target, args)
          : Promise.reject(new StorageNotReadyError('storage is not reachable yet (migrations pending)'));
    },
  });
  return {
    storage: gated,
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}

/**
 * A store migrated by a newer tracegate has tables and views this version does not know (and may write wrongly:
 * an older collector once fed data to rollups the newer schema had replaced): refuse to start rather than guess.
 */
export function refuseNewerSchema(
  applied: ReadonlySet<number>,
  known: ReadonlyArray<{ version: number }>,
  where: string,
): void {
  const latest = Math.max(...known.map((m) => m.version));
  const newest = Math.max(0, ...applied);
  if (newest > latest) {
    throw new StorageConfigError(
      `${where} has schema version ${newest}, newer than this tracegate knows (${latest}): it was upgraded by a newer tracegate; run that version (downgrades are not supported)`,
    );
  }
}
