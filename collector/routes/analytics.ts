// Analytics the web UI's dashboard draws besides usage (GET /api/analytics/usage, enrichment.ts): activity per hour
// or day (traces, spans, failures, tool calls and their failures, guardrail checks, security alerts) and findings
// per day and category (a tripped guardrail is a guardrail_tripwire finding). Scoped to the caller's workspace.
import { z } from 'zod';
import type { ActivityRow } from '../../core/ports/storage.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import type { RouteContext } from '../host/context.ts';
import { msCeil, parseQuery, time } from '../http/query.ts';
import { checkRange, READ_AUTH, READ_LIMITS, sameShape, unavailableDoc } from './read.ts';

export const activityQuery = z.object({
  bucket: z.enum(['hour', 'day']).default('hour'),
  from: time.optional().describe('On span start (security alerts: receive time); ms since the epoch or ISO 8601'),
  to: time.optional().describe('Exclusive'),
});
export const findingsDailyQuery = z.object({
  from: time.optional().describe('Days (UTC) overlapping [from, to) count whole'),
  to: time.optional(),
});

const activityBody = z.object({
  bucket: z.enum(['hour', 'day']),
  rows: z.array(
    z.object({
      bucketStart: z.string().describe('ISO 8601 UTC, start of the hour or day'),
      traces: z.number().int().describe('Traces whose first span in the range starts in the bucket'),
      spans: z.number().int(),
      errorSpans: z.number().int().describe("Spans with status 'error'"),
      toolCalls: z.number().int().describe('Tool spans'),
      toolErrors: z.number().int().describe("Tool spans with status 'error'"),
      guardrailChecks: z.number().int().describe('Guardrail spans (the tripped ones: guardrail_tripwire findings)'),
      securityAlerts: z.number().int().describe('Security alerts received in the bucket'),
    }),
  ),
});
const findingsDailyBody = z.object({
  source: z
    .enum(['rollup', 'findings'])
    .describe('rollup: the ClickHouse findings_daily rollup; findings: counted from the findings'),
  rows: z.array(
    z.object({
      day: z.string().describe('YYYY-MM-DD (UTC)'),
      category: z.string().describe('pii, secret, prompt_injection, guardrail_tripwire, …'),
      severity: z.string(),
      count: z.number().int(),
    }),
  ),
});
sameShape<z.output<typeof activityBody>['rows'][number], ActivityRow>(true);

export function analyticsRoutes(r: RouteContext): void {
  const ws = (caller: unknown) => (caller as Caller).workspaceId;
  r.docs.push(
    {
      method: 'get',
      path: '/api/analytics/activity',
      tag: 'enrichment',
      auth: READ_AUTH,
      query: activityQuery,
      summary:
        'Activity per hour or day (UTC): traces, spans, failed spans, tool calls and tool errors, guardrail checks, security alerts; each span and alert counted once however often it was delivered',
      responses: {
        200: { description: 'Rows in time order; empty buckets left out', schema: activityBody },
        503: unavailableDoc,
      },
    },
    {
      method: 'get',
      path: '/api/analytics/findings',
      tag: 'enrichment',
      auth: READ_AUTH,
      query: findingsDailyQuery,
      summary: 'Governance findings per day, category and severity (tripped guardrails: category guardrail_tripwire)',
      responses: {
        200: { description: 'Rows by day, category, severity', schema: findingsDailyBody },
        503: unavailableDoc,
      },
    },
  );

  r.on('get', '/api/analytics/activity', { limiter: READ_LIMITS.activity, auth: READ_AUTH }, async (ctx) => {
    const q = parseQuery(activityQuery, ctx);
    checkRange(q);
    const rows = await r.read(() =>
      r.storage.activity(ws(ctx.state.caller), { bucket: q.bucket, fromMs: msCeil(q.from), toMs: msCeil(q.to) }),
    );
    ctx.body = { bucket: q.bucket, rows } satisfies z.output<typeof activityBody>;
  });

  r.on('get', '/api/analytics/findings', { limiter: READ_LIMITS.findingsDaily, auth: READ_AUTH }, async (ctx) => {
    const q = parseQuery(findingsDailyQuery, ctx);
    checkRange(q);
    const rows = await r.read(() =>
      r.storage.findingsDaily(ws(ctx.state.caller), { fromMs: msCeil(q.from), toMs: msCeil(q.to) }),
    );
    ctx.body = {
      source: r.storage.kind === 'clickhouse' ? 'rollup' : 'findings',
      rows,
    } satisfies z.output<typeof findingsDailyBody>;
  });
}
