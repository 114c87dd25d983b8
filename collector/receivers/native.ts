// POST /api/traces — the native payload (spec rule 1), or a JSON array of them (batch).
import { z } from 'zod';
import type { RouteContext } from '../http/context.ts';
import { bodyKind, parseJson, readBody } from '../http/body.ts';
import { HttpError } from '../../core/errors.ts';
import {
  nativeTraceDocSchema,
  nativeTraceResponseSchema,
  nativeTraceSchema,
  nativeTraceValidator,
} from '../../mappers/native-schema.ts';
import { mapNative, nativeSpanId } from '../../mappers/native.ts';
import { traceIdForRequestId } from '../../processors/governance/apply.ts';
import type { Policy } from '../../processors/governance/policy.ts';
import { loadIdHashKey } from '../../processors/signing.ts';
import type { Caller } from '../workspaces/api-keys.ts';
import type { SpanRecord } from '../../core/record.ts';

type ZodIssue = z.core.$ZodIssue;

function issueDetails(issues: ZodIssue[], prefix: (string | number)[] = []) {
  return issues.map((i) => ({ field: [...prefix, ...i.path].join('.') || '(body)', code: i.code, message: i.message }));
}

/** Bodies from this size up yield to the event loop between parsing, validating and mapping. */
const LARGE_BODY = 256 * 1024;
/** A batch yields after this long validating and mapping items. */
const TURN_MS = 20;
/**
 * A turn for pending I/O. Twice setImmediate: from an I/O callback, the first one runs in the same loop
 * iteration's check phase, before the poll phase has read anything new; the second one comes after it has.
 */
const breathe = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));
const noop = async () => {};

/** A trace keyed by a request id that the policy would redact is keyed by its hash (traceIdForRequestId). */
function keyedSafely(record: SpanRecord, policy: Policy | null, key: Buffer): SpanRecord {
  if (!policy || !record.requestId || record.traceId !== record.requestId) return record;
  const traceId = traceIdForRequestId(record.requestId, policy, key, record.workspaceId);
  return traceId === record.traceId ? record : { ...record, traceId, spanId: nativeSpanId(traceId) };
}

export function nativeRoutes(r: RouteContext): void {
  const idHashKey = r.config.ENRICHMENT ? loadIdHashKey(r.enrichment.keysDir, r.config.ID_HASH_KEY) : Buffer.alloc(0); // unused without a policy
  const schema = nativeTraceSchema({ maxStringBytes: r.config.MAX_STRING_BYTES });
  const documented = nativeTraceDocSchema({ maxStringBytes: r.config.MAX_STRING_BYTES }); // also says null means "not given"
  const validate = nativeTraceValidator({ maxStringBytes: r.config.MAX_STRING_BYTES });
  const batchResult = z.object({
    accepted: z.number(),
    rejected: z.number(),
    results: z.array(
      z.union([
        z.object({ index: z.number(), trace: z.object({ traceId: z.string(), status: z.string() }) }),
        z.object({
          index: z.number(),
          error: z.object({ code: z.string(), message: z.string(), details: z.unknown() }),
        }),
      ]),
    ),
  });
  r.docs.push({
    method: 'post',
    path: '/api/traces',
    tag: 'ingest',
    auth: 'apiKey',
    summary: 'Ingest a native trace, or a JSON array of traces (batch)',
    request: { contentTypes: ['application/json'], schema: z.union([documented, z.array(documented)]) },
    responses: {
      200: {
        description: 'Stored durably. A single trace answers { trace }; a batch answers per-item results',
        schema: z.union([nativeTraceResponseSchema, batchResult]),
      },
      207: { description: 'Batch with some items rejected (valid items are stored)', schema: batchResult },
    },
  });

  r.router.post('/api/traces', ...r.ingestGuard('traces'), async (ctx) => {
    bodyKind(ctx, ['json']);
    const buf = await readBody(ctx, r.config.MAX_BODY_BYTES);
    const body = parseJson(buf, r.config.MAX_JSON_DEPTH, r.config.MAX_JSON_VALUES);
    // Parsing, validating and mapping a large body each take a while on the event loop: other requests (and
    // /healthz) get a turn between them. Small bodies, nearly all of them, skip the yield.
    const yieldIfLarge = buf.length >= LARGE_BODY ? breathe : noop;
    await yieldIfLarge();
    const caller = ctx.state.caller as Caller;
    const now = Date.now();
    // Redaction happens in the processors, but the trace id is answered from here: derive it safely here too.
    const policy = r.config.ENRICHMENT ? await r.settings.policyFor(caller.workspaceId) : null;
    const map = (item: z.infer<typeof schema>) =>
      keyedSafely(mapNative(item, caller.workspaceId, now), policy, idHashKey);

    if (!Array.isArray(body)) {
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
      await yieldIfLarge();
      const record = map(parsed.data);
      await yieldIfLarge();
      await r.pipeline.ingest([record], {
        workspaceId: caller.workspaceId,
        keyId: caller.keyId,
        route: 'POST /api/traces',
      });
      r.metrics.ingested.inc({ source: record.source });
      ctx.body = { trace: { traceId: record.traceId, status: record.status } };
      return;
    }

    if (body.length > r.config.MAX_BATCH_ITEMS) {
      throw new HttpError(
        413,
        'too_many_items',
        `batch has ${body.length} items; the limit is ${r.config.MAX_BATCH_ITEMS}`,
        { limit: r.config.MAX_BATCH_ITEMS },
      );
    }
    const results: Array<
      | { index: number; trace: { traceId: string; status: string } }
      | { index: number; error: { code: string; message: string; details: unknown } }
    > = [];
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
        results.push({
          index,
          error: { code: 'validation_failed', message: `${details[0]!.field}: ${details[0]!.message}`, details },
        });
        continue;
      }
      const record = map(parsed.data);
      records.push(record);
      results.push({ index, trace: { traceId: record.traceId, status: record.status } });
    }
    await yieldIfLarge();
    const rejectedCount = body.length - records.length;
    if (records.length)
      await r.pipeline.ingest(records, {
        workspaceId: caller.workspaceId,
        keyId: caller.keyId,
        route: 'POST /api/traces',
        rejected: rejectedCount,
      });
    const bySource = new Map<string, number>();
    for (const rec of records) bySource.set(rec.source, (bySource.get(rec.source) ?? 0) + 1);
    for (const [source, n] of bySource) r.metrics.ingested.inc({ source }, n);
    const rejected = rejectedCount;
    if (body.length > 0 && records.length === 0) {
      throw Object.assign(new HttpError(400, 'validation_failed', 'every item in the batch was rejected', results), {
        rejectedItems: body.length,
      });
    }
    ctx.status = rejected ? 207 : 200;
    ctx.body = { accepted: records.length, rejected, results };
  });
}
