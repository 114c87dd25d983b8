// GET /api/traces and GET /api/traces/:traceId — always scoped to the caller's workspace.
import { z } from 'zod';
import type { RouteContext } from '../app.ts';
import { HttpError } from '../errors.ts';
import { parseQuery, time } from '../query.ts';
import type { Caller } from '../keys.ts';
import { SOURCES } from '../record.ts';
import { publicSpan, spanTree, summarize } from '../trace-view.ts';


export const listQuery = z.object({
  from: time.optional().describe('Start of the time range: ms since the epoch or ISO 8601'),
  to: time.optional().describe('End of the time range (exclusive)'),
  model: z.string().max(256).optional(),
  actionName: z.string().max(256).optional(),
  environment: z.string().max(256).optional(),
  status: z.string().max(64).optional(),
  source: z.enum(SOURCES).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(50),
  cursor: z.string().max(512).optional().describe('nextCursor from the previous page'),
});

export function readRoutes(r: RouteContext): void {
  r.docs.push({
    method: 'get', path: '/api/traces', tag: 'read', auth: 'apiKey', query: listQuery,
    summary: 'List traces, newest first (reads may lag writes by up to TRACEGATE_FLUSH_INTERVAL_MS)',
    responses: { 200: { description: 'A page of trace summaries and the cursor of the next page' } },
  });
  r.docs.push({
    method: 'get', path: '/api/traces/{traceId}', tag: 'read', auth: 'apiKey',
    summary: 'One trace: summary roll-up, spans, the span tree, and the governance policy decision recorded for each span',
    responses: { 200: { description: 'The trace' }, 404: { description: 'No such trace in this workspace' } },
  });

  r.router.get('/api/traces', r.requireKey, async (ctx) => {
    const q = parseQuery(listQuery, ctx);
    const caller = ctx.state.caller as Caller;
    const page = await r.storage.listTraces(caller.workspaceId, {
      fromMs: q.from, toMs: q.to, model: q.model, actionName: q.actionName, environment: q.environment,
      status: q.status, source: q.source, limit: q.limit, cursor: q.cursor,
    });
    ctx.body = page;
  });

  r.router.get('/api/traces/:traceId', r.requireKey, async (ctx) => {
    const traceId = ctx.params.traceId!;
    if (traceId.length > 256) throw new HttpError(400, 'invalid_trace_id', 'traceId is too long');
    const caller = ctx.state.caller as Caller;
    const spans = await r.storage.getTrace(caller.workspaceId, traceId);
    if (spans.length === 0) throw new HttpError(404, 'not_found', `trace ${traceId} not found`);
    const policy = (await r.storage.getPolicyRecords(caller.workspaceId, traceId)).map((p) => ({
      spanId: p.spanId, policyVersion: p.policyVersion, decision: p.decision, reasons: JSON.parse(p.reasons) as unknown, createdAtMs: p.createdAtMs,
    }));
    ctx.body = { trace: { traceId, summary: summarize(spans), spans: spans.map(publicSpan), tree: spanTree(spans), policy } };
  });
}
