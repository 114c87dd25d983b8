// Read routes for enrichment: audit log, alerts, findings, policy, verification and usage analytics.
// Every read is scoped to the caller's workspace.
import { z } from 'zod';
import type { Context } from 'koa';
import type { RouteContext } from '../app.ts';
import { HttpError } from '../errors.ts';
import { parseQuery, time } from '../query.ts';
import type { Caller } from '../keys.ts';
import { verificationKeys } from '../../processors/signing.ts';
import { verifyTrace } from '../../processors/verify-workspace.ts';
import { checkRange, READ_LIMITS, unavailableDoc } from './read.ts';

const page = { from: time.optional(), to: time.optional(), limit: z.coerce.number().int().min(1).max(1000).default(100), cursor: z.string().max(512).optional() };

export const auditQuery = z.object({ action: z.string().max(64).optional(), actor: z.string().max(128).optional(), outcome: z.string().max(32).optional(), ...page });
export const alertsQuery = z.object({ kind: z.string().max(32).optional(), ruleId: z.string().max(64).optional(), ...page });
export const findingsQuery = z.object({ traceId: z.string().max(256).optional(), category: z.string().max(64).optional(), detector: z.string().max(32).optional(), ...page });
export const usageQuery = z.object({
  groupBy: z.enum(['model', 'actionName', 'environment', 'source']).default('model'),
  bucket: z.enum(['hour', 'day']).default('hour'),
  from: time.optional(), to: time.optional(),
});

const ws = (ctx: Context) => (ctx.state.caller as Caller).workspaceId;
/** Enrichment records carry a tag for the spool; the API does not need it. */
const strip = <T extends { recordType: string }>(r: T) => { const { recordType: _t, ...rest } = r; return rest; };

export function enrichmentRoutes(r: RouteContext): void {
  // Every route asks storage (the keys route for the keys other collectors published), and answers 503 when it
  // is down or too slow.
  const doc = (path: string, summary: string, query?: z.ZodObject, more: Record<number, { description: string }> = {}) =>
    r.docs.push({ method: 'get', path, tag: 'enrichment', auth: 'apiKey', summary, query, responses: { 200: { description: 'OK' }, ...more, 503: unavailableDoc } });
  doc('/api/audit', 'Audit log, newest first: ingestion requests, key/policy/settings changes, rejected authentications', auditQuery);
  doc('/api/alerts', 'Alert signals produced by the workspace alert rules, newest first', alertsQuery);
  doc('/api/findings', 'Governance findings (masked previews only), newest first', findingsQuery);
  doc('/api/policy', 'The workspace policy in force');
  doc('/api/traces/{traceId}/verification', 'Re-check a trace: content hash, chain continuity, checkpoint signatures', undefined,
    { 404: { description: 'No verification records for this trace (not ingested, not yet flushed, or enrichment off)' } });
  doc('/api/verification/keys', 'Public keys that sign verification checkpoints: this collector\'s and those the collectors sharing its storage published');
  doc('/api/analytics/usage', 'Requests, errors, tokens, cost and p50/p95/p99 latency of model calls (llm and embedding spans) per bucket and group', usageQuery);

  r.router.get('/api/audit', ...r.readGuard(READ_LIMITS.audit), async (ctx) => {
    const q = parseQuery(auditQuery, ctx);
    checkRange(q);
    const res = await r.read(() => r.storage.listAudit(ws(ctx), { action: q.action, actor: q.actor, outcome: q.outcome, fromMs: q.from, toMs: q.to, limit: q.limit, cursor: q.cursor }));
    ctx.body = { items: res.items.map(strip), nextCursor: res.nextCursor };
  });
  r.router.get('/api/alerts', ...r.readGuard(READ_LIMITS.alerts), async (ctx) => {
    const q = parseQuery(alertsQuery, ctx);
    checkRange(q);
    const res = await r.read(() => r.storage.listAlerts(ws(ctx), { kind: q.kind, ruleId: q.ruleId, fromMs: q.from, toMs: q.to, limit: q.limit, cursor: q.cursor }));
    ctx.body = { items: res.items.map(strip), nextCursor: res.nextCursor };
  });
  r.router.get('/api/findings', ...r.readGuard(READ_LIMITS.findings), async (ctx) => {
    const q = parseQuery(findingsQuery, ctx);
    checkRange(q);
    const res = await r.read(() => r.storage.listFindings(ws(ctx), { traceId: q.traceId, category: q.category, detector: q.detector, fromMs: q.from, toMs: q.to, limit: q.limit, cursor: q.cursor }));
    ctx.body = { items: res.items.map(strip), nextCursor: res.nextCursor };
  });
  r.router.get('/api/policy', ...r.readGuard(READ_LIMITS.policy), async (ctx) => {
    // The settings cache answers within LOOKUP_DEADLINE_MS on its own (last known settings, else a 503).
    const s = await r.settings.forWorkspace(ws(ctx));
    ctx.body = { policy: s.policy, settingsVersion: s.version };
  });
  r.router.get('/api/verification/keys', ...r.readGuard(READ_LIMITS.verificationKeys), async (ctx) => {
    ctx.body = { keys: await r.read(() => verificationKeys(r.storage, r.enrichment.keysDir)) };
  });
  r.router.get('/api/traces/:traceId/verification', ...r.readGuard(READ_LIMITS.verification), async (ctx) => {
    const traceId = ctx.params.traceId!;
    if (traceId.length > 256) throw new HttpError(400, 'invalid_trace_id', 'traceId is too long');
    const report = await r.read(async () => verifyTrace(r.storage, ws(ctx), traceId, await verificationKeys(r.storage, r.enrichment.keysDir)));
    // A stored trace without records is a failure to report (its records were deleted, or it was written around
    // the collector), unless it is still within the settle window.
    if (report.recordsChecked === 0 && report.problems.length === 0) throw new HttpError(404, 'not_found', `no verification records for trace ${traceId} (not ingested, not yet flushed, or enrichment off)`);
    ctx.body = { traceId, ...report, records: report.records.map(strip) };
  });
  r.router.get('/api/analytics/usage', ...r.readGuard(READ_LIMITS.usage), async (ctx) => {
    const q = parseQuery(usageQuery, ctx);
    checkRange(q);
    const rows = await r.read(() => r.storage.usage(ws(ctx), { groupBy: q.groupBy, bucket: q.bucket, fromMs: q.from, toMs: q.to }));
    ctx.body = { groupBy: q.groupBy, bucket: q.bucket, source: r.storage.kind === 'clickhouse' ? 'rollup' : 'spans', rows };
  });
}
