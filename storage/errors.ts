// Storage failures classified where they happen, by the engines' own codes: an outage (refused, reset, timed out, a
// shard down) or a call that found no memory becomes a TracegateError of kind `unavailable`, which keeps its kind
// across the storage thread. Everything else (a query's fault, a data error) is left as thrown.
import { storageOutOfMemory, storageUnreachable, TracegateError } from '../core/errors.ts';

/** Network failures on the way to storage, by system error code. */
const OUTAGE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** ClickHouse reporting a server it cannot reach itself (a cluster's shard): SOCKET_TIMEOUT, NETWORK_ERROR, ALL_CONNECTION_TRIES_FAILED. */
const CLICKHOUSE_OUTAGE_CODES = new Set(['209', '210', '279']);
const CLICKHOUSE_OUT_OF_MEMORY = '241';

/**
 * The ClickHouse client's request timeout carries no code, only this text; ClickHouse 18.16's errors keep their
 * number in the text (`Code: 279. …`), as @clickhouse/client parses only newer servers' `(TYPE)` marker.
 */
const CLIENT_TIMEOUT = /^Timeout error\.$/;
const CLICKHOUSE_CODE_IN_TEXT = /^Code: (\d{1,4})\b/;
/** DuckDB's own error classes, named at the start of its messages. */
const DUCKDB_OUT_OF_MEMORY = /^Out of Memory Error\b/;

function clickhouseCode(err: Error): string | null {
  if (err.name !== 'ClickHouseError' && err.name !== 'Error') return null;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && /^\d{1,4}$/.test(code)) return code;
  return CLICKHOUSE_CODE_IN_TEXT.exec(err.message)?.[1] ?? null;
}

/** What a storage call's failure means: an outage, a lack of memory, or neither (null). */
export function storageFailure(err: unknown): 'outage' | 'out_of_memory' | null {
  if (!(err instanceof Error)) return null;
  if (err instanceof TracegateError) {
    if (err.code === 'storage_unreachable') return 'outage';
    return err.code === 'storage_out_of_memory' ? 'out_of_memory' : null;
  }
  if (err instanceof TypeError || err instanceof RangeError || err instanceof SyntaxError) return null; // a bug
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && OUTAGE_CODES.has(code)) return 'outage';
  const ch = clickhouseCode(err);
  if (ch !== null && CLICKHOUSE_OUTAGE_CODES.has(ch)) return 'outage';
  if (ch === CLICKHOUSE_OUT_OF_MEMORY) return 'out_of_memory';
  if (err.name === 'Error' && CLIENT_TIMEOUT.test(err.message)) return 'outage';
  if (err.name === 'Error' && DUCKDB_OUT_OF_MEMORY.test(err.message)) return 'out_of_memory';
  return null;
}

/** `err` as the rest of tracegate should see it: classified when it is an outage or a lack of memory. */
export function classifyStorageError(err: unknown): unknown {
  if (err instanceof TracegateError) return err;
  const failure = storageFailure(err);
  if (failure === null) return err;
  const e = err as Error;
  const code = (e as { code?: unknown }).code;
  const dependencyCode = typeof code === 'string' ? code : (clickhouseCode(e) ?? undefined);
  const make = failure === 'outage' ? storageUnreachable : storageOutOfMemory;
  return make(e.message, { cause: e, dependencyCode });
}

/**
 * `target` with every method's failures classified (async rejections and sync throws alike); other properties and
 * methods as they are, bound to `target`. The engines are wrapped once, where they are created (storage/index.ts).
 */
export function classifying<T extends object>(target: T): T {
  const wrapped = new Map<PropertyKey, unknown>();
  const guard =
    (fn: (...a: unknown[]) => unknown) =>
    (...args: unknown[]) => {
      try {
        const out = fn.apply(target, args);
        return out instanceof Promise
          ? out.catch((err: unknown) => {
              throw classifyStorageError(err);
            })
          : out;
      } catch (err) {
        throw classifyStorageError(err);
      }
    };
  return new Proxy(target, {
    get(t, prop) {
      const v: unknown = Reflect.get(t, prop, t);
      if (typeof v !== 'function') return v;
      if (!wrapped.has(prop)) wrapped.set(prop, guard(v as (...a: unknown[]) => unknown));
      return wrapped.get(prop);
    },
  });
}
