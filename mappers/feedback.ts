// POST /api/ingest/feedback: one vote → one feedback record. A vote's identity (its key) decides what replaces what:
// with an `id`, that id (an upsert); else with a `user_id`, one vote per (target, name, user), the latest winning;
// else the vote itself (each distinct vote counts, a redelivery of one collapses into it). `value: null` retracts.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { FeedbackRecord, FeedbackTarget } from '../core/enrichment-records.ts';
import { canonicalJson } from '../processors/canonical.ts';
import {
  canonicalFields,
  type FieldIssue,
  idString,
  jsonObject,
  parseTraceparent,
  timeMs,
  timeValue,
  traceparentString,
  zodIssues,
} from './signal-fields.ts';

export const FEEDBACK_FIELDS = [
  'id',
  'trace_id',
  'traceparent',
  'span_id',
  'response_id',
  'request_id',
  'value',
  'name',
  'comment',
  'user_id',
  'source',
  'metadata',
  'timestamp',
] as const;

export const DEFAULT_FEEDBACK_NAME = 'user_feedback';

/** up | down | true | false | 1 | 0 | -1, and null (retract). */
const voteValue = z
  .union(
    [
      z.literal(null),
      z.boolean(),
      z.literal(1),
      z.literal(0),
      z.literal(-1),
      z
        .string()
        .transform((s) => s.trim().toLowerCase())
        .pipe(z.enum(['up', 'down', 'true', 'false', '1', '0', '-1'])),
    ],
    { error: 'must be up, down, true, false, 1, 0 or -1 (0 and -1 are down), or null to retract' },
  )
  .describe('up | down | true | false | 1 | 0 | -1 (0 and -1 are down), or null to retract the vote');

export function feedbackSchema(maxStringBytes: number) {
  const comment = z
    .string()
    .max(maxStringBytes)
    .refine((v) => v.length * 3 <= maxStringBytes || Buffer.byteLength(v) <= maxStringBytes, {
      message: `longer than ${maxStringBytes} bytes (UTF-8)`,
    });
  return z
    .object({
      id: idString.optional().describe('Idempotency key: a vote with the same id replaces this one'),
      trace_id: idString.optional(),
      traceparent: traceparentString.optional().describe('W3C traceparent: its trace id is the target'),
      span_id: idString.optional().describe('A span of the trace (linked once a span of that id is stored)'),
      response_id: idString.optional().describe('A provider response id (linked to the trace holding it)'),
      request_id: idString.optional().describe('A request id (linked to the trace whose span has it)'),
      value: voteValue,
      name: z.string().min(1).max(256).optional().describe(`Default ${DEFAULT_FEEDBACK_NAME}`),
      comment: comment.optional(),
      user_id: z.string().min(1).max(256).optional().describe('One vote per user, target and name: the latest wins'),
      source: z.string().max(64).optional().describe('end_user, annotator, api, model, …'),
      metadata: jsonObject.optional(),
      timestamp: timeValue.optional().describe('When the vote was given; the receive time when absent'),
    })
    .refine((v) => !(v.trace_id && v.traceparent && parseTraceparent(v.traceparent).traceId !== v.trace_id), {
      message: 'trace_id differs from the traceparent trace id',
      path: ['trace_id'],
    });
}

export type FeedbackItem = z.output<ReturnType<typeof feedbackSchema>>;

/** One request item validated; or the issues (fields as the client named them). */
export function parseFeedback(
  schema: ReturnType<typeof feedbackSchema>,
  item: unknown,
  prefix = '',
): { ok: true; vote: FeedbackItem } | { ok: false; issues: FieldIssue[] } {
  if (typeof item !== 'object' || item === null || Array.isArray(item))
    return { ok: false, issues: [{ field: prefix || '(body)', code: 'invalid_type', message: 'a vote is an object' }] };
  const { item: fields, spelled, issues } = canonicalFields(item as Record<string, unknown>, FEEDBACK_FIELDS);
  if (!Object.hasOwn(fields, 'value'))
    issues.push({ field: 'value', code: 'required', message: 'a vote needs a value (up, down, or null to retract)' });
  const parsed = schema.safeParse(fields);
  const all = [...issues, ...(parsed.success ? [] : zodIssues(parsed.error, spelled))];
  if (!parsed.success || all.length)
    return { ok: false, issues: all.map((i) => ({ ...i, field: `${prefix}${i.field}` })) };
  const vote = parsed.data;
  const target = targetOf(vote);
  const named = (name: string) => `${prefix}${spelled.get(name) ?? name}`;
  if (!target && !(vote.value === null && vote.id))
    return {
      ok: false,
      issues: [
        {
          field: named('trace_id'),
          code: 'required',
          message: 'a vote needs a target: trace_id, traceparent, span_id, response_id or request_id',
        },
      ],
    };
  if (vote.value === null && !vote.id && !vote.user_id)
    return {
      ok: false,
      issues: [
        {
          field: named('value'),
          code: 'invalid_value',
          message: 'null retracts a vote, which needs its id or user_id to name it',
        },
      ],
    };
  return { ok: true, vote };
}

/** What the vote names: a span (of the trace when given), else the trace, else a response, else a request. */
export function targetOf(v: FeedbackItem): { type: FeedbackTarget; id: string; traceId: string } | null {
  const traceId = v.trace_id ?? (v.traceparent ? parseTraceparent(v.traceparent).traceId : '');
  if (v.span_id) return { type: 'span', id: v.span_id, traceId };
  if (traceId) return { type: 'trace', id: traceId, traceId };
  if (v.response_id) return { type: 'response', id: v.response_id, traceId: '' };
  if (v.request_id) return { type: 'request', id: v.request_id, traceId: '' };
  return null;
}

function normalizedValue(v: FeedbackItem['value']): '' | 'up' | 'down' {
  if (v === null) return '';
  if (v === true || v === 1 || v === 'up' || v === 'true' || v === '1') return 'up';
  return 'down';
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** The vote's record; `receivedAtMs` is its version (the newest of a key stands). */
export function mapFeedback(v: FeedbackItem, workspaceId: string, receivedAtMs: number): FeedbackRecord {
  const target = targetOf(v) ?? { type: 'trace' as const, id: '', traceId: '' };
  const name = v.name ?? DEFAULT_FEEDBACK_NAME;
  const value = normalizedValue(v.value);
  let voteKey: string;
  let voteId: string;
  if (v.id) {
    voteKey = `id:${v.id}`;
    voteId = v.id;
  } else if (v.user_id) {
    voteId = sha256(JSON.stringify([target.type, target.id, name, v.user_id])).slice(0, 32);
    voteKey = `user:${voteId}`;
  } else {
    voteId = sha256(canonicalJson(v)).slice(0, 32);
    voteKey = `vote:${voteId}`;
  }
  return {
    recordType: 'feedback',
    workspaceId,
    voteKey,
    voteId,
    traceId: target.traceId,
    targetType: target.type,
    targetId: target.id,
    name,
    value,
    retracted: value === '',
    comment: v.comment ?? '',
    userId: v.user_id ?? '',
    source: v.source ?? '',
    metadata: JSON.stringify(v.metadata ?? {}),
    votedAtMs: Math.floor(v.timestamp === undefined ? receivedAtMs : timeMs(v.timestamp)),
    receivedAtMs,
  };
}
