// GET /api/security-alerts: the security alerts of POST /api/ingest/webhooks, newest first.
// Every read is scoped to the caller's workspace.
import { z } from 'zod';
import type { SecurityAlertRecord } from '../../core/enrichment-records.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import type { RouteContext } from '../host/context.ts';
import { msCeil, parseQuery, time, whole } from '../http/query.ts';
import { checkRange, MAX_CURSOR_CHARS, READ_AUTH, READ_LIMITS, sameShape, unavailableDoc } from './read.ts';
import { alertPage, listedAlert } from './signal-view.ts';

const severity = z.enum(['low', 'medium', 'high', 'critical']);
const signature = z.enum(['verified', 'unverified', 'unsigned']);

export const securityAlertsQuery = z.object({
  source: z.string().max(128).optional(),
  severity: severity.optional(),
  category: z.string().max(128).optional(),
  traceId: z
    .string()
    .max(256)
    .optional()
    .describe(
      'Alerts naming this trace (GET /api/traces/{traceId} also shows those naming its spans, requests, responses)',
    ),
  signature: signature.optional(),
  from: time.optional().describe('On the receive time'),
  to: time.optional(),
  limit: whole(1, 200).default(50),
  cursor: z.string().max(MAX_CURSOR_CHARS).optional(),
});

sameShape<z.output<typeof securityAlertsQuery>['severity'], SecurityAlertRecord['severity'] | undefined>(true);

export function signalRoutes(r: RouteContext): void {
  r.docs.push({
    method: 'get',
    path: '/api/security-alerts',
    tag: 'read',
    auth: READ_AUTH,
    query: securityAlertsQuery,
    summary:
      'Security alerts received on POST /api/ingest/webhooks, newest first (by receive time), with their bodies and correlation keys',
    responses: { 200: { description: 'A page of alerts', schema: alertPage }, 503: unavailableDoc },
  });
  r.on('get', '/api/security-alerts', { limiter: READ_LIMITS.securityAlerts, auth: READ_AUTH }, async (ctx) => {
    const q = parseQuery(securityAlertsQuery, ctx);
    checkRange(q);
    const caller = ctx.state.caller as Caller;
    const page = await r.read(() =>
      r.storage.listSecurityAlerts(caller.workspaceId, {
        source: q.source,
        severity: q.severity,
        category: q.category,
        traceId: q.traceId,
        signature: q.signature,
        fromMs: msCeil(q.from),
        toMs: msCeil(q.to),
        limit: q.limit,
        cursor: q.cursor,
      }),
    );
    ctx.body = { items: page.items.map(listedAlert), nextCursor: page.nextCursor } satisfies z.output<typeof alertPage>;
  });
}
