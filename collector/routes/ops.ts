// Health, readiness, metrics and the OpenAPI document.
import { z } from 'zod';
import type { RouteContext } from '../host/context.ts';
import { buildOpenApi } from '../http/openapi.ts';
import { setCounter } from '../http/metrics.ts';
import { LOOKUP_DEADLINE_MS, SingleFlight, within } from '../../platform/slow-storage.ts';

const WRITE_FAILURE_HOLD_MS = 10_000;

/**
 * What /readyz (no authentication) says of a failure: its kind, not its text. A storage error can quote the data it
 * choked on (ClickHouse's "Cannot parse input … before: <row>") and a file error names DATA_DIR; the text is logged.
 */
export function failureKind(message: string | null, code: string | null = null): string | null {
  if (message === null) return null;
  if (code !== null && /^\d{1,4}$/.test(code)) return `clickhouse_${code}`;
  if (code !== null && /^E[A-Z0-9_]{2,31}$/.test(code)) return code; // a system error's code, given by the error itself
  // ClickHouse 18.16's errors lack the `(TYPE)` marker @clickhouse/client parses: their code stays in the message.
  const clickhouse = /^Code: (\d{1,4})\b/.exec(message);
  if (clickhouse) return `clickhouse_${clickhouse[1]}`;
  // Named system errors only: any capitalised word could be a word of the data.
  const system =
    /\b(E(?:CONNREFUSED|CONNRESET|CONNABORTED|TIMEDOUT|NOTFOUND|AI_AGAIN|HOSTUNREACH|NETUNREACH|PIPE|NOSPC|DQUOT|IO|NOENT|ACCES|PERM|ROFS|MFILE|NFILE|NOMEM|FBIG|BUSY|AGAIN|EXIST|ISDIR|NOTDIR|BADF|INVAL|ADDRINUSE))\b/.exec(
      message,
    );
  if (system) return system[1]!;
  return /timed? ?out|timeout/i.test(message) ? 'timeout' : 'error';
}

export function opsRoutes(r: RouteContext): void {
  const readiness = z.object({
    status: z.enum(['ready', 'not_ready']),
    storage: z.enum(['ok', 'unreachable']),
    spool: z.object({
      ok: z.boolean(),
      bytes: z.number(),
      pendingRows: z.number(),
      lastWriteError: z
        .string()
        .nullable()
        .describe(
          'The last failed spool write, until one succeeds (not ready within 10 s of it): its kind (a system error code such as ENOSPC); the message is logged',
        ),
      lastFlushError: z
        .string()
        .nullable()
        .describe(
          'The last failed flush to storage, until one succeeds: its kind (ECONNREFUSED, clickhouse_<code>, timeout, error); the message is logged',
        ),
    }),
  });
  r.docs.push(
    {
      method: 'get',
      path: '/healthz',
      tag: 'ops',
      auth: 'none',
      summary: 'Process is up',
      responses: { 200: { description: 'ok', schema: z.object({ status: z.literal('ok') }) } },
    },
    {
      method: 'get',
      path: '/readyz',
      tag: 'ops',
      auth: 'none',
      summary: 'Storage reachable and spool healthy',
      responses: {
        200: { description: 'ready', schema: readiness },
        503: { description: 'not ready', schema: readiness },
      },
    },
    {
      method: 'get',
      path: '/metrics',
      tag: 'ops',
      auth: 'none',
      summary: 'Prometheus metrics',
      responses: {
        200: { description: 'Prometheus text exposition format', schema: z.string(), contentType: 'text/plain' },
      },
    },
    {
      method: 'get',
      path: '/openapi.json',
      tag: 'ops',
      auth: 'none',
      summary: 'This document',
      responses: {
        200: {
          description: 'OpenAPI 3.1',
          schema: z.looseObject({
            openapi: z.string(),
            info: z.looseObject({ title: z.string(), version: z.string() }),
            paths: z.record(z.string(), z.unknown()),
            components: z.looseObject({}),
          }),
        },
      },
    },
  );
  let openapi: object | null = null;
  const pings = new SingleFlight<boolean>(); // probes against a hung storage share one ping, not one each

  r.router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  r.router.get('/readyz', async (ctx) => {
    const stats = r.pipeline.stats();
    // A hung storage (not refusing, not answering) is not ready: readiness probes have short timeouts of their own.
    const storage = await within(
      pings.run('ping', () => r.storage.ping()),
      LOOKUP_DEADLINE_MS,
    ).then(
      (got) => got?.value === true,
      () => false,
    );
    // A spool write that failed (disk full, I/O error) is not ready for WRITE_FAILURE_HOLD_MS: long enough for a
    // balancer to send traffic elsewhere, short enough that traffic comes back to try again once space is freed
    // (nothing else would write, so nothing else would notice).
    const failure = stats.spoolWriteFailure;
    const writeFailed = failure !== null && Date.now() - failure.atMs < WRITE_FAILURE_HOLD_MS;
    const spoolOk = stats.spoolBytes < r.config.SPOOL_MAX_BYTES && !writeFailed;
    ctx.status = storage && spoolOk ? 200 : 503;
    ctx.body = {
      status: ctx.status === 200 ? 'ready' : 'not_ready',
      storage: storage ? 'ok' : 'unreachable',
      spool: {
        ok: spoolOk,
        bytes: stats.spoolBytes,
        pendingRows: stats.pendingRows,
        lastWriteError: failureKind(failure?.message ?? null),
        lastFlushError: failureKind(stats.lastFlushError, stats.lastFlushErrorCode),
      },
    };
  });
  r.router.get('/metrics', async (ctx) => {
    const stats = r.pipeline.stats();
    r.metrics.spoolBytes.set(stats.spoolBytes);
    r.metrics.spoolPendingRows.set(stats.pendingRows);
    setCounter(r.metrics.spoolSyncs, stats.spoolSyncs);
    setCounter(r.metrics.spoolAppends, stats.spoolAppends);
    setCounter(r.metrics.redisFailures, r.limits.redisFailures);
    ctx.type = r.metrics.registry.contentType;
    ctx.body = await r.metrics.registry.metrics();
  });
  r.router.get('/openapi.json', (ctx) => {
    openapi ??= buildOpenApi(r.docs, '0.1.0');
    ctx.body = openapi;
  });
}
