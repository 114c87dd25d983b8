// How votes and security alerts are shown: on GET /api/traces/:traceId (read.ts) and GET /api/security-alerts (signals.ts).
import { z } from 'zod';
import type { FeedbackRecord, SecurityAlertRecord } from '../../core/enrichment-records.ts';

/** Votes a trace read shows at most (newest first); its summary counts them all. */
export const MAX_TRACE_VOTES = 1000;
/** Security alerts a trace read shows at most (newest first). */
export const MAX_TRACE_ALERTS = 1000;

const severity = z.enum(['low', 'medium', 'high', 'critical']);
const signature = z.enum(['verified', 'unverified', 'unsigned']);

export const voteSchema = z.object({
  id: z.string().describe('The id sent with the vote, else the one it got'),
  name: z.string(),
  value: z.enum(['up', 'down']),
  comment: z.string(),
  userId: z.string(),
  source: z.string(),
  metadata: z.record(z.string(), z.unknown()),
  target: z.object({
    type: z.enum(['trace', 'span', 'response', 'request']),
    id: z.string(),
  }),
  votedAtMs: z.number(),
  receivedAtMs: z.number(),
});
export const feedbackSummarySchema = z
  .record(z.string(), z.object({ up: z.number().int(), down: z.number().int() }))
  .describe('Standing votes per name (user_feedback unless named otherwise)');

const alertHead = {
  id: z.string(),
  source: z.string(),
  severity,
  rawSeverity: z.string().describe("The sender's own severity"),
  title: z.string(),
  category: z.string(),
  externalId: z.string(),
  detectedAtMs: z.number(),
  receivedAtMs: z.number(),
  traceId: z.string().describe("The trace named (directly, or through a response the proxy recorded); '' otherwise"),
  spanId: z.string(),
  requestId: z.string(),
  responseId: z.string(),
  sessionId: z.string(),
  userId: z.string(),
  signature,
  secretId: z.string(),
};
export const traceAlertSchema = z.object(alertHead);
const listedAlertSchema = z.object({
  ...alertHead,
  correlation: z
    .record(z.string(), z.array(z.object({ from: z.string(), value: z.string() })))
    .describe('Every correlation key found: where (header:<name> or a body path) and its value'),
  body: z.unknown().describe('The body as received'),
});
export const alertPage = z.object({
  items: z.array(listedAlertSchema),
  nextCursor: z.string().nullable().describe('Pass as cursor for the next page; null on the last'),
});

const parsed = (text: string): Record<string, unknown> => {
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
};

export function publicVote(v: FeedbackRecord): z.output<typeof voteSchema> {
  return {
    id: v.voteId,
    name: v.name,
    value: v.value === 'down' ? 'down' : 'up',
    comment: v.comment,
    userId: v.userId,
    source: v.source,
    metadata: parsed(v.metadata),
    target: { type: v.targetType, id: v.targetId },
    votedAtMs: v.votedAtMs,
    receivedAtMs: v.receivedAtMs,
  };
}

export function feedbackSummary(votes: readonly FeedbackRecord[]): z.output<typeof feedbackSummarySchema> {
  const out: Record<string, { up: number; down: number }> = {};
  for (const v of votes) {
    const s = Object.hasOwn(out, v.name) ? out[v.name]! : (out[v.name] = { up: 0, down: 0 });
    if (v.value === 'up') s.up++;
    else if (v.value === 'down') s.down++;
  }
  return out;
}

export function traceAlert(a: SecurityAlertRecord): z.output<typeof traceAlertSchema> {
  return {
    id: a.alertId,
    source: a.source,
    severity: a.severity,
    rawSeverity: a.rawSeverity,
    title: a.title,
    category: a.category,
    externalId: a.externalId,
    detectedAtMs: a.detectedAtMs,
    receivedAtMs: a.receivedAtMs,
    traceId: a.traceId,
    spanId: a.spanId,
    requestId: a.requestId,
    responseId: a.responseId,
    sessionId: a.sessionId,
    userId: a.userId,
    signature: a.signature,
    secretId: a.secretId,
  };
}

export function listedAlert(a: SecurityAlertRecord): z.output<typeof listedAlertSchema> {
  let body: unknown = a.body;
  try {
    body = JSON.parse(a.body);
  } catch {
    /* stored as received: shown as text */
  }
  return { ...traceAlert(a), correlation: parsed(a.correlation) as never, body };
}
