// Health, readiness, metrics and the OpenAPI document.
import type { RouteContext } from '../app.ts';
import { buildOpenApi } from '../openapi.ts';
import { LOOKUP_DEADLINE_MS, SingleFlight, within } from '../slow-storage.ts';

export function opsRoutes(r: RouteContext): void {
  r.docs.push(
    { method: 'get', path: '/healthz', tag: 'ops', auth: 'none', summary: 'Process is up', responses: { 200: { description: 'ok' } } },
    { method: 'get', path: '/readyz', tag: 'ops', auth: 'none', summary: 'Storage reachable and spool healthy', responses: { 200: { description: 'ready' }, 503: { description: 'not ready' } } },
    { method: 'get', path: '/metrics', tag: 'ops', auth: 'none', summary: 'Prometheus metrics', responses: { 200: { description: 'text exposition format' } } },
    { method: 'get', path: '/openapi.json', tag: 'ops', auth: 'none', summary: 'This document', responses: { 200: { description: 'OpenAPI 3.1' } } },
  );
  let openapi: object | null = null;
  const pings = new SingleFlight<boolean>(); // probes against a hung storage share one ping, not one each

  r.router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  r.router.get('/readyz', async (ctx) => {
    const stats = r.pipeline.stats();
    // A hung storage (not refusing, not answering) is not ready: readiness probes have short timeouts of their own.
    const storage = await within(pings.run('ping', () => r.storage.ping()), LOOKUP_DEADLINE_MS).then((got) => got?.value === true, () => false);
    const spoolOk = stats.spoolBytes < r.config.SPOOL_MAX_BYTES;
    ctx.status = storage && spoolOk ? 200 : 503;
    ctx.body = { status: ctx.status === 200 ? 'ready' : 'not_ready', storage: storage ? 'ok' : 'unreachable', spool: { ok: spoolOk, bytes: stats.spoolBytes, pendingRows: stats.pendingRows, lastFlushError: stats.lastFlushError } };
  });
  r.router.get('/metrics', async (ctx) => {
    const stats = r.pipeline.stats();
    r.metrics.spoolBytes.set(stats.spoolBytes);
    r.metrics.spoolPendingRows.set(stats.pendingRows);
    r.metrics.spoolSyncs.set(stats.spoolSyncs);
    r.metrics.spoolAppends.set(stats.spoolAppends);
    ctx.type = r.metrics.registry.contentType;
    ctx.body = await r.metrics.registry.metrics();
  });
  r.router.get('/openapi.json', (ctx) => {
    openapi ??= buildOpenApi(r.docs, '0.1.0');
    ctx.body = openapi;
  });
}
