// GET /api/traces and GET /api/traces/:traceId — always scoped to the caller's workspace.
import { z } from 'zod';
import type { RouteContext } from '../host/context.ts';
import { HttpError } from '../http/errors.ts';
import { errorSchema } from '../http/openapi.ts';
import { parseQuery, time, whole } from '../http/query.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import { SOURCES, SPAN_KINDS } from '../../core/record.ts';
import { publicSpan, spanTree, summarize, viewSpans, type TreeNode } from './trace-view.ts';
import type { TracePage, TraceSummary } from '../../core/ports/storage.ts';
import { decodeSpanCursor, encodeSpanCursor } from '../../storage/codec.ts';
import type { SpanRecord } from '../../core/record.ts';
import { storedPolicy } from './stored-versions.ts';
import {
  feedbackSummary,
  feedbackSummarySchema,
  MAX_TRACE_ALERTS,
  MAX_TRACE_VOTES,
  publicVote,
  traceAlert,
  traceAlertSchema,
  voteSchema,
} from './signal-view.ts';
import {
  guardrailMarks,
  guardrailMarkSchema,
  linkSchema,
  proxiedLinks,
  sessionFields,
  sessionOf,
  type SpanLink,
  workflowOf,
  workflowSchema,
} from './trace-links.ts';

/**
 * Longest page cursor accepted: the longest a cursor of this server can be (a trace id of 256 escaped characters; a
 * finding's field of at most MAX_FINDING_FIELD_CHARS), well within Node's 16 KB request head.
 */
export const MAX_CURSOR_CHARS = 8192;
/** A list with include=signals is a page of at most this many traces. */
export const MAX_SIGNAL_ITEMS = 200;

export const listQuery = z.object({
  from: time.optional().describe('Start of the time range: ms since the epoch or ISO 8601'),
  to: time.optional().describe('End of the time range (exclusive)'),
  model: z.string().max(4096).optional(), // any real name; the URL must fit Node's 16 KB request head
  actionName: z.string().max(4096).optional(),
  environment: z.string().max(4096).optional(),
  status: z.string().max(64).optional(),
  source: z.enum(SOURCES).optional(),
  feedback: z
    .enum(['up', 'down'])
    .optional()
    .describe('Traces with at least one standing vote of this value (POST /api/ingest/feedback)'),
  limit: whole(1, 1000).default(50),
  cursor: z.string().max(MAX_CURSOR_CHARS).optional().describe('nextCursor from the previous page'),
  include: z
    .literal('signals')
    .optional()
    .describe(
      `signals: each item also carries its standing feedback votes (feedbackUp, feedbackDown) and its findings count; two more reads for the page, so limit stays small (at most ${MAX_SIGNAL_ITEMS})`,
    ),
});

/** GET /api/traces/:id reads a trace in parts of at most TRACEGATE_MAX_TRACE_SPANS spans and about TRACEGATE_MAX_TRACE_PART_BYTES (spanLimit, spanCursor). */
export const traceQuery = (maxSpans: number) =>
  z.object({
    spanLimit: whole(1, maxSpans)
      .optional()
      .describe(
        `Spans per part (default and most: TRACEGATE_MAX_TRACE_SPANS, here ${maxSpans}); a part ends earlier once its spans' stored text reaches TRACEGATE_MAX_TRACE_PART_BYTES`,
      ),
    spanCursor: z.string().max(2048).optional().describe('nextSpanCursor from the previous part'),
  });

// Response shapes, for the OpenAPI document. The type checks below keep them equal to what the handlers answer.
const nsTime = z.string().describe('Decimal nanoseconds since the epoch');
const traceSummarySchema = z.object({
  traceId: z.string(),
  name: z.string().describe('Of the root-most span'),
  startTimeNs: nsTime,
  endTimeNs: nsTime,
  durationMs: z.number(),
  spanCount: z.number().int(),
  status: z.string().describe("'error' when any span errored, else the root span's status"),
  errorCount: z.number().int().describe("Spans with status 'error'"),
  model: z.string(),
  source: z.string(),
  actionName: z.string(),
  environment: z.string(),
  promptTokens: z.number(),
  completionTokens: z.number(),
  totalTokens: z.number(),
  costUsd: z.number(),
});
const traceListItemSchema = traceSummarySchema.extend({
  name: z.string().describe("The agent runtime's workflow name when it sent one, else the root-most span's"),
  ...sessionFields,
  feedbackUp: z.number().int().optional().describe('include=signals: standing up votes linked to the trace'),
  feedbackDown: z.number().int().optional().describe('include=signals: standing down votes'),
  findings: z.number().int().optional().describe("include=signals: governance findings on the trace's spans"),
});
export const tracePageSchema = z.object({
  items: z.array(traceListItemSchema),
  nextCursor: z.string().nullable().describe('Pass as cursor for the next page; null on the last'),
});

const spanTraceSchema = z.object({ spanId: z.string(), traceId: z.string() });

const attrValue = z.json().meta({ id: 'AttributeValue' });
const attributes = z.record(z.string(), attrValue);
const spanSchema = z.object({
  traceId: z.string(),
  spanId: z.string(),
  parentSpanId: z.string().describe("'' for a root span"),
  name: z.string(),
  kind: z.enum(SPAN_KINDS),
  source: z.enum(SOURCES),
  startTimeNs: nsTime,
  endTimeNs: nsTime,
  durationMs: z.number(),
  status: z.string(),
  statusMessage: z.string(),
  model: z.string(),
  provider: z.string(),
  prompt: z.string(),
  response: z.string(),
  promptTokens: z.number(),
  completionTokens: z.number(),
  totalTokens: z.number(),
  costUsd: z.number(),
  finishReason: z.string(),
  actionName: z.string(),
  environment: z.string(),
  requestId: z.string(),
  trainingPreferred: z.boolean(),
  trainable: z.boolean(),
  attributes,
  resourceAttributes: attributes,
  events: z.array(z.object({ name: z.string(), timeNs: nsTime, attributes })),
  ingestedAtMs: z.number(),
  link: linkSchema.optional(),
});
const treeNodeSchema: z.ZodType<TreeNode> = z
  .object({
    spanId: z.string(),
    name: z.string(),
    kind: z.string(),
    get children() {
      return z.array(treeNodeSchema);
    },
  })
  .meta({ id: 'TraceTreeNode' });
const traceRollupSchema = z.object({
  name: z.string(),
  status: z.string(),
  startTimeNs: nsTime,
  endTimeNs: nsTime,
  durationMs: z.number(),
  spanCount: z.number().int(),
  errorCount: z.number().int(),
  model: z.string(),
  provider: z.string(),
  prompt: z.string(),
  response: z.string(),
  promptTokens: z.number(),
  completionTokens: z.number(),
  totalTokens: z.number(),
  costUsd: z.number(),
  actionName: z.string(),
  environment: z.string(),
  source: z.enum(SOURCES),
});
export const traceDetailSchema = z.object({
  trace: z.object({
    traceId: z.string(),
    summary: traceRollupSchema
      .nullable()
      .describe(
        "Of the whole trace; prompt, response and provider from this part's spans; name: the agent runtime's workflow name when it sent one",
      ),
    ...sessionFields,
    workflow: workflowSchema,
    spans: z.array(spanSchema).describe('In start order: the whole trace, or one part of it (see nextSpanCursor)'),
    nextSpanCursor: z
      .string()
      .nullable()
      .describe('Pass as spanCursor for the next part of the spans; null when this part is the last'),
    tree: z
      .array(treeNodeSchema)
      .describe("Of this part's spans (a span whose parent is in another part is a root here)"),
    policy: z.array(
      z.object({
        spanId: z.string(),
        policyVersion: z.number().int(),
        decision: z.enum(['allow', 'flag', 'redact', 'block']),
        reasons: z.unknown().describe('[{ code, message, category?, rule? }]'),
        createdAtMs: z.number(),
      }),
    ),
    feedback: feedbackSummarySchema,
    feedbackVotes: z
      .array(voteSchema)
      .describe(
        `The standing votes linked to the trace (naming it, or one of its spans, responses or requests), newest first; at most ${MAX_TRACE_VOTES}`,
      ),
    securityAlerts: z
      .array(traceAlertSchema)
      .describe(
        `Security alerts linked to the trace (naming it, or one of its spans, requests or responses), newest first; at most ${MAX_TRACE_ALERTS} (bodies: GET /api/security-alerts)`,
      ),
    guardrails: z.array(guardrailMarkSchema).describe("This part's guardrail spans, and which tripped"),
  }),
});

/**
 * Read routes that query storage answer 503 when it is down, hung or slower than READ_DEADLINE_MS (RouteContext.read),
 * as every route with a key does when storage cannot be reached to verify that key.
 */
export const unavailableDoc = {
  description:
    'Storage unreachable, hung, or slower than the read deadline, or the API key cannot be verified while storage is unreachable (code unavailable; Retry-After)',
  schema: errorSchema,
};

/** An ns instant in ISO 8601, its fraction to the nanosecond when it has one. */
function isoOfNs(ns: bigint): string {
  const ms = Number(ns / 1_000_000n) - (ns % 1_000_000n < 0n ? 1 : 0);
  const sub = ((ns % 1_000_000n) + 1_000_000n) % 1_000_000n;
  const iso = new Date(ms).toISOString();
  return sub === 0n ? iso : `${iso.slice(0, -1)}${String(sub).padStart(6, '0')}Z`;
}

/**
 * `from` after `to` is a reversed range, not an empty one: 400 naming both (an equal pair is an empty range: `to`
 * is exclusive).
 */
export function checkRange(q: { from?: bigint | undefined; to?: bigint | undefined }): void {
  if (q.from === undefined || q.to === undefined || q.from <= q.to) return;
  const message = 'must not be later than to';
  throw new HttpError(
    400,
    'invalid_query',
    `from (${isoOfNs(q.from)}) is later than to (${isoOfNs(q.to)}): the range is reversed`,
    [
      { field: 'from', message: `from ${message}` },
      { field: 'to', message: 'to must not be earlier than from' },
    ],
  );
}

/**
 * Rate limits of the read routes: one limiter per route (per key), as for the ingest routes, named `read:<route>`.
 * Per route rather than one `read` family: a dashboard polling the trace list must not use up the budget of
 * trace details, verification or usage queries; and `read:` keeps them apart from POST /api/traces (`traces`), so
 * reading never spends ingestion's budget nor the reverse.
 */
/** The read routes take the workspace API key or the web UI's session cookie (issue 45 reads with it). */
export const READ_AUTH = ['apiKey', 'session'] as const;

export const READ_LIMITS = {
  traces: 'read:traces',
  trace: 'read:trace',
  spanTrace: 'read:span-trace',
  verification: 'read:verification',
  verificationKeys: 'read:verification-keys',
  audit: 'read:audit',
  alerts: 'read:alerts',
  findings: 'read:findings',
  policy: 'read:policy',
  usage: 'read:usage',
  activity: 'read:activity',
  findingsDaily: 'read:findings-daily',
  securityAlerts: 'read:security-alerts',
  export: 'read:export',
} as const;

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** Compiles only when a response schema's output type and the type the handler answers are the same. */
export const sameShape = <A, B>(ok: Same<A, B>) => ok;
sameShape<z.output<typeof traceSummarySchema>, TracePage['items'][number]>(true);
sameShape<z.output<typeof spanSchema>, ReturnType<typeof publicSpan> & { link?: SpanLink }>(true);
sameShape<z.output<typeof traceRollupSchema>, NonNullable<ReturnType<typeof summarize>>>(true);

export function readRoutes(r: RouteContext): void {
  r.docs.push({
    method: 'get',
    path: '/api/traces',
    tag: 'read',
    auth: READ_AUTH,
    query: listQuery,
    summary:
      'List traces, newest first (reads lag writes by about TRACEGATE_FLUSH_INTERVAL_MS, more while storage is busy)',
    responses: {
      200: { description: 'A page of trace summaries and the cursor of the next page', schema: tracePageSchema },
      503: unavailableDoc,
    },
  });
  const detailQuery = traceQuery(r.config.MAX_TRACE_SPANS);
  r.docs.push({
    method: 'get',
    path: '/api/traces/{traceId}',
    tag: 'read',
    auth: READ_AUTH,
    query: detailQuery,
    summary:
      "One trace: summary roll-up, spans (a large trace in parts), the span tree, the governance policy decision recorded for each span, feedback votes and linked security alerts, the agent runtime's workflow, session and metadata, links to the proxied calls of agent response spans, and which guardrails tripped",
    responses: {
      200: { description: 'The trace', schema: traceDetailSchema },
      404: { description: 'No such trace in this workspace', schema: errorSchema },
      503: unavailableDoc,
    },
  });

  r.docs.push({
    method: 'get',
    path: '/api/spans/{spanId}/trace',
    tag: 'read',
    auth: READ_AUTH,
    summary: 'The trace holding a span, by the span id alone (the web UI jumps to a span with it)',
    responses: {
      200: { description: 'The trace id', schema: spanTraceSchema },
      404: { description: 'No span of that id in this workspace', schema: errorSchema },
      503: unavailableDoc,
    },
  });
  r.on('get', '/api/spans/:spanId/trace', { limiter: READ_LIMITS.spanTrace, auth: READ_AUTH }, async (ctx) => {
    const spanId = ctx.params.spanId!;
    if (spanId.length > 256) throw new HttpError(400, 'invalid_span_id', 'spanId is too long');
    const caller = ctx.state.caller as Caller;
    const traceId = (await r.read(() => r.storage.spanTraces(caller.workspaceId, [spanId]))).get(spanId);
    if (traceId === undefined) throw new HttpError(404, 'not_found', `span ${spanId} not found`);
    ctx.body = { spanId, traceId } satisfies z.output<typeof spanTraceSchema>;
  });

  r.on('get', '/api/traces', { limiter: READ_LIMITS.traces, auth: READ_AUTH }, async (ctx) => {
    const q = parseQuery(listQuery, ctx);
    checkRange(q);
    if (q.include === 'signals' && q.limit > MAX_SIGNAL_ITEMS)
      throw new HttpError(400, 'invalid_query', `limit: at most ${MAX_SIGNAL_ITEMS} with include=signals`, [
        { field: 'limit', message: `at most ${MAX_SIGNAL_ITEMS} with include=signals` },
      ]);
    const caller = ctx.state.caller as Caller;
    const { page, metas, signals } = await r.read(async () => {
      const page = await r.storage.listTraces(caller.workspaceId, {
        fromNs: q.from,
        toNs: q.to,
        model: q.model,
        actionName: q.actionName,
        environment: q.environment,
        status: q.status,
        source: q.source,
        feedback: q.feedback,
        limit: q.limit,
        cursor: q.cursor,
      });
      const ids = page.items.map((t) => t.traceId);
      return {
        page,
        metas: ids.length ? await r.storage.traceMeta(caller.workspaceId, ids) : new Map(),
        signals: q.include === 'signals' ? await traceSignals(r, caller.workspaceId, ids) : new Map(),
      };
    });
    const items = page.items.map((t) => {
      const meta = metas.get(t.traceId);
      return { ...t, name: meta?.workflowName || t.name, ...sessionOf(meta), ...signals.get(t.traceId) };
    });
    ctx.body = { items, nextCursor: page.nextCursor } satisfies z.output<typeof tracePageSchema>;
  });

  r.on('get', '/api/traces/:traceId', { limiter: READ_LIMITS.trace, auth: READ_AUTH }, async (ctx) => {
    const traceId = ctx.params.traceId!;
    if (traceId.length > 256) throw new HttpError(400, 'invalid_trace_id', 'traceId is too long');
    const q = parseQuery(detailQuery, ctx);
    const after = q.spanCursor === undefined ? undefined : decodeSpanCursor(q.spanCursor);
    const limit = q.spanLimit ?? r.config.MAX_TRACE_SPANS;
    const caller = ctx.state.caller as Caller;
    const { page, more, whole, records, votes, alerts, meta, links } = await r.read(async () => {
      // A part ends early at MAX_TRACE_PART_BYTES of stored spans: a span count alone does not bound an answer's size.
      const part = await r.storage.getTracePart(caller.workspaceId, traceId, {
        limit,
        maxBytes: r.config.MAX_TRACE_PART_BYTES,
        ...(after ? { after } : {}),
      });
      const { spans: page, more } = part;
      const ids = page.map((s) => s.spanId);
      return {
        page,
        more,
        // A part of the trace: its roll-up comes from storage, as the list's.
        whole:
          more || after ? (await r.storage.listTraces(caller.workspaceId, { traceId, limit: 1 })).items[0] : undefined,
        records:
          page.length === 0
            ? []
            : await r.storage.getPolicyRecords(caller.workspaceId, traceId, more || after ? ids : undefined),
        votes: await r.storage.traceFeedback(caller.workspaceId, traceId),
        alerts: await r.storage.traceSecurityAlerts(caller.workspaceId, traceId, MAX_TRACE_ALERTS),
        meta: (await r.storage.traceMeta(caller.workspaceId, [traceId])).get(traceId),
        links: await proxiedLinks(r.storage, r.proxyCalls, caller.workspaceId, page),
      };
    });
    // A trace whose runtime announced it (its trace item) but whose spans are still to come is found, with no spans.
    if (page.length === 0 && !whole && !meta) throw new HttpError(404, 'not_found', `trace ${traceId} not found`);
    const spans = viewSpans(page);
    const policy = storedPolicy(records, page).map((p) => ({
      spanId: p.spanId,
      policyVersion: p.policyVersion,
      decision: p.decision,
      reasons: JSON.parse(p.reasons) as unknown,
      createdAtMs: p.createdAtMs,
    }));
    const last = page.at(-1);
    const summary = partSummary(spans, whole);
    ctx.body = {
      trace: {
        traceId,
        summary: summary && meta?.workflowName ? { ...summary, name: meta.workflowName } : summary,
        ...sessionOf(meta),
        workflow: workflowOf(meta),
        spans: spans.map((s) => {
          const link = links.get(s.spanId);
          return link ? { ...publicSpan(s), link } : publicSpan(s);
        }),
        nextSpanCursor: more && last ? encodeSpanCursor({ startNs: last.startTimeNs, spanId: last.spanId }) : null,
        tree: spanTree(spans),
        policy,
        feedback: feedbackSummary(votes),
        feedbackVotes: votes.slice(0, MAX_TRACE_VOTES).map(publicVote),
        securityAlerts: alerts.map(traceAlert),
        guardrails: guardrailMarks(spans),
      },
    } satisfies z.output<typeof traceDetailSchema>;
  });
}

type TraceSignals = { feedbackUp: number; feedbackDown: number; findings: number };

/** Votes and findings of each listed trace (include=signals): two reads for the page, as the trace detail counts them. */
async function traceSignals(r: RouteContext, workspaceId: string, ids: string[]): Promise<Map<string, TraceSignals>> {
  const [votes, findings] = await Promise.all([
    r.storage.voteCounts(workspaceId, ids),
    r.storage.findingCounts(workspaceId, ids),
  ]);
  const out = new Map<string, TraceSignals>();
  for (const traceId of ids) {
    const v = votes.get(traceId) ?? { up: 0, down: 0 };
    out.set(traceId, { feedbackUp: v.up, feedbackDown: v.down, findings: findings.get(traceId) ?? 0 });
  }
  return out;
}

/**
 * The summary of a trace shown in parts: the whole trace's roll-up from storage (times, counts, usage, status, the
 * root's fields), with prompt, response and provider from this part's spans (the first part holds the earliest).
 */
function partSummary(spans: SpanRecord[], whole: TraceSummary | undefined): ReturnType<typeof summarize> {
  const own = summarize(spans);
  if (!whole) return own;
  const { traceId: _t, ...rollup } = whole;
  return {
    ...rollup,
    provider: own?.provider ?? '',
    prompt: own?.prompt ?? '',
    response: own?.response ?? '',
    source: rollup.source as SpanRecord['source'],
  };
}
