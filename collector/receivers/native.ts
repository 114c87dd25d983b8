// POST /api/traces: the native payload (spec rule 1), or a JSON array of them (batch): each item validated on its
// own, the valid ones stored even when others are not (207).
import type { Context } from 'koa';
import { z } from 'zod';
import type { SpanRecord } from '../../core/record.ts';
import { mapNative, nativeSpanId } from '../../mappers/native.ts';
import {
  type NativeTrace,
  nativeTraceDocSchema,
  nativeTraceResponseSchema,
  nativeTraceValidator,
} from '../../mappers/native-schema.ts';
import { traceIdForRequestId } from '../../processors/governance/apply.ts';
import type { Policy } from '../../processors/governance/policy.ts';
import { loadIdHashKey } from '../../processors/signing.ts';
import type { RouteContext } from '../host/context.ts';
import { breathe, type Mapped, type ReceiverDeclaration, type Received } from '../host/receiver.ts';
import { parseJson } from '../http/body.ts';
import { HttpError } from '../http/errors.ts';

type ZodIssue = z.core.$ZodIssue;
type ItemResult =
  | { index: number; trace: { traceId: string; status: string } }
  | { index: number; error: { code: string; message: string; details: unknown } };
/** One trace answers `{ trace }`; an array answers per item. */
type Reply = { single: true } | { single: false; results: ItemResult[] };

/** A batch yields after this long validating and mapping items. */
const TURN_MS = 20;

function issueDetails(issues: ZodIssue[], prefix: (string | number)[] = []) {
  return issues.map((i) => ({ field: [...prefix, ...i.path].join('.') || '(body)', code: i.code, message: i.message }));
}

const batchResult = z.object({
  accepted: z.number(),
  rejected: z.number(),
  results: z.array(
    z.union([
      z.object({ index: z.number(), trace: z.object({ traceId: z.string(), status: z.string() }) }),
      z.object({ index: z.number(), error: z.object({ code: z.string(), message: z.string(), details: z.unknown() }) }),
    ]),
  ),
});

/** A trace keyed by a request id that the policy would redact is keyed by its hash (traceIdForRequestId). */
function keyedSafely(record: SpanRecord, policy: Policy | null, key: Buffer): SpanRecord {
  if (!policy || !record.requestId || record.traceId !== record.requestId) return record;
  const traceId = traceIdForRequestId(record.requestId, policy, key, record.workspaceId);
  return traceId === record.traceId ? record : { ...record, traceId, spanId: nativeSpanId(traceId) };
}

export function nativeReceiver(r: RouteContext): ReceiverDeclaration<unknown, Reply> {
  const limits = { maxStringBytes: r.config.MAX_STRING_BYTES };
  // Without a policy the key is never used.
  const idHashKey = r.config.ENRICHMENT ? loadIdHashKey(r.enrichment.keysDir, r.config.ID_HASH_KEY) : Buffer.alloc(0);
  const validate = nativeTraceValidator(limits);
  const documented = nativeTraceDocSchema(limits); // also says null means "not given"

  /** Redaction happens in the processors, but the trace id is answered from here: it is derived safely here too. */
  const mapper = async (req: Received) => {
    const policy = r.config.ENRICHMENT ? await r.settings.policyFor(req.caller.workspaceId) : null;
    return (item: NativeTrace) => keyedSafely(mapNative(item, req.caller.workspaceId, req.now), policy, idHashKey);
  };

  async function one(body: unknown, req: Received): Promise<Mapped<Reply>> {
    const parsed = validate(body);
    if (!parsed.success) {
      const details = issueDetails(parsed.error.issues);
      throw new HttpError(
        400,
        'validation_failed',
        `invalid trace: ${details[0]!.field}: ${details[0]!.message}`,
        details,
      );
    }
    await req.breathe();
    const record = (await mapper(req))(parsed.data);
    return { spans: [record], rejected: 0, reply: { single: true } };
  }

  async function batch(body: unknown[], req: Received): Promise<Mapped<Reply>> {
    if (body.length > r.config.MAX_BATCH_ITEMS) {
      const limit = r.config.MAX_BATCH_ITEMS;
      throw new HttpError(413, 'too_many_items', `batch has ${body.length} items; the limit is ${limit}`, { limit });
    }
    const map = await mapper(req);
    const results: ItemResult[] = [];
    const records: SpanRecord[] = [];
    let turn = performance.now();
    for (let index = 0; index < body.length; index++) {
      if (performance.now() - turn > TURN_MS) {
        await breathe();
        turn = performance.now();
      }
      const parsed = validate(body[index]);
      if (!parsed.success) {
        const details = issueDetails(parsed.error.issues, [index]);
        const message = `${details[0]!.field}: ${details[0]!.message}`;
        results.push({ index, error: { code: 'validation_failed', message, details } });
        continue;
      }
      const record = map(parsed.data);
      records.push(record);
      results.push({ index, trace: { traceId: record.traceId, status: record.status } });
    }
    const rejected = body.length - records.length;
    const mapped: Mapped<Reply> = { spans: records, rejected, reply: { single: false, results } };
    if (body.length > 0 && records.length === 0) {
      const refuse = new HttpError(400, 'validation_failed', 'every item in the batch was rejected', results);
      mapped.refuse = Object.assign(refuse, { rejectedItems: body.length });
    }
    return mapped;
  }

  return {
    paths: ['/api/traces'],
    limiter: 'traces',
    accepts: ['json'],
    doc: {
      tag: 'ingest',
      summary: 'Ingest a native trace, or a JSON array of traces (batch)',
      request: { contentTypes: ['application/json'], schema: z.union([documented, z.array(documented)]) },
      responses: {
        200: {
          description: 'Stored durably. A single trace answers { trace }; a batch answers per-item results',
          schema: z.union([nativeTraceResponseSchema, batchResult]),
        },
        207: { description: 'Batch with some items rejected (valid items are stored)', schema: batchResult },
      },
    },
    parse: (raw) => parseJson(raw, r.config.MAX_JSON_DEPTH, r.config.MAX_JSON_VALUES),
    map: (body, req) => (Array.isArray(body) ? batch(body, req) : one(body, req)),
    answer(mapped: Mapped<Reply>, ctx: Context) {
      const reply = mapped.reply;
      if (reply.single) {
        const record = mapped.spans[0]!;
        ctx.body = { trace: { traceId: record.traceId, status: record.status } };
        return;
      }
      ctx.status = mapped.rejected ? 207 : 200;
      ctx.body = { accepted: mapped.spans.length, rejected: mapped.rejected, results: reply.results };
    },
  };
}
