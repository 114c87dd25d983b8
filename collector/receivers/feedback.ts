// POST /api/ingest/feedback: a thumbs-up/down vote, or `{ "feedback": [ … ] }`. A vote names a trace (trace_id or
// traceparent), a span, a provider response or a request; one that names no trace is linked when read, to the trace
// stored by then that holds it, so a vote may arrive before its trace. See mappers/feedback.ts for what replaces what.
import { z } from 'zod';
import type { FeedbackRecord } from '../../core/enrichment-records.ts';
import { feedbackSchema, mapFeedback, parseFeedback } from '../../mappers/feedback.ts';
import { invalidItem } from '../../mappers/signal-fields.ts';
import type { RouteContext } from '../host/context.ts';
import { breathe, type Mapped, type ReceiverDeclaration, type Received } from '../host/receiver.ts';
import { parseJson } from '../http/body.ts';
import { type ItemError, itemError, itemErrorSchema, itemsOf, refuseAll } from './items.ts';

type Recorded = { index: number; id: string; traceId: string | null; status: 'recorded' | 'retracted' };
type Reply = { batch: boolean; results: Array<Recorded | ItemError> };

const recorded = z.object({
  index: z.number(),
  id: z.string().describe('The id sent, or the one the vote got (see semantics)'),
  traceId: z.string().nullable().describe('The trace named, when the vote names one (else it is linked when read)'),
  status: z.enum(['recorded', 'retracted']),
});
const single = z.object({ feedback: recorded.omit({ index: true }) });
const batchReply = z.object({
  accepted: z.number(),
  rejected: z.number(),
  results: z.array(z.union([recorded, itemErrorSchema])),
});

const TURN_MS = 20;

/**
 * Receive times as vote versions, strictly increasing in this process: two changes of one vote within a millisecond
 * still have an order (the later request wins).
 */
let lastStamp = 0;
function stamp(now: number): number {
  lastStamp = Math.max(now, lastStamp + 1);
  return lastStamp;
}

export function feedbackReceiver(r: RouteContext): ReceiverDeclaration<unknown, Reply> {
  const schema = feedbackSchema(r.config.MAX_STRING_BYTES);

  async function map(body: unknown, req: Received): Promise<Mapped<Reply>> {
    const { items, batch, prefix } = itemsOf(body, 'feedback', 'feedback', r.config.MAX_BATCH_ITEMS);
    const at = stamp(req.now);
    const votes: FeedbackRecord[] = [];
    const results: Array<Recorded | ItemError> = [];
    let turn = performance.now();
    for (let index = 0; index < items.length; index++) {
      if (performance.now() - turn > TURN_MS) {
        await breathe();
        turn = performance.now();
      }
      const parsed = parseFeedback(schema, items[index], batch ? `${prefix}${index}.` : '');
      if (!parsed.ok) {
        if (!batch) throw invalidItem(parsed.issues);
        results[index] = itemError(index, parsed.issues);
        continue;
      }
      const vote = mapFeedback(parsed.vote, req.caller.workspaceId, at);
      votes.push(vote);
      results[index] = {
        index,
        id: vote.voteId,
        traceId: vote.traceId || null,
        status: vote.retracted ? 'retracted' : 'recorded',
      };
    }
    const rejected = items.length - votes.length;
    const mapped: Mapped<Reply> = { spans: [], records: votes, rejected, reply: { batch, results } };
    if (batch && items.length > 0 && votes.length === 0) mapped.refuse = refuseAll(results, items.length);
    return mapped;
  }

  return {
    paths: ['/api/ingest/feedback'],
    limiter: 'feedback',
    // The web UI votes with the session cookie (from this server's own origin: SessionAuth checks Origin/Referer).
    auth: ['apiKey', 'session'],
    accepts: ['json'],
    doc: {
      tag: 'ingest',
      summary:
        'Ingest thumbs-up/down votes: one vote, or { feedback: [...] }. With an id: an upsert by it; else with user_id: one vote per (target, name, user), the latest wins; else each vote counts. value null retracts',
      request: {
        contentTypes: ['application/json'],
        schema: z.union([schema, z.object({ feedback: z.array(schema) }), z.array(schema)]),
      },
      responses: {
        200: {
          description: 'Stored durably: one vote answers { feedback }, a batch answers per item',
          schema: z.union([single, batchReply]),
        },
        207: { description: 'Batch with some items rejected (valid items are stored)', schema: batchReply },
      },
    },
    parse: (raw) => parseJson(raw, r.config.MAX_JSON_DEPTH, r.config.MAX_JSON_VALUES),
    map,
    answer(mapped, ctx) {
      const { batch, results } = mapped.reply;
      if (!batch) {
        const { index: _i, ...feedback } = results[0] as Recorded;
        ctx.body = { feedback } satisfies z.output<typeof single>;
        return;
      }
      ctx.status = mapped.rejected ? 207 : 200;
      ctx.body = { accepted: mapped.records!.length, rejected: mapped.rejected, results } satisfies z.output<
        typeof batchReply
      >;
    },
  };
}
