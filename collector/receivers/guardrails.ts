// POST /api/integrations/provider-guardrails: OpenAI Guardrails results (JS, Python, the guardrail_results bundle of
// a wrapped response, the Agents SDK's guardrail results, or the canonical payload: mappers/guardrails-schema.ts),
// each stored as a guardrail span. They go into the trace named (traceId), else the trace of the call the proxy
// recorded under the given response or request id, else a trace of their own; the answer names it.
import type { Context } from 'koa';
import { type GuardrailLink, givenLink, type LinkedBy, mapGuardrails, ownTraceId } from '../../mappers/guardrails.ts';
import {
  type Envelope,
  guardrailsDocSchema,
  guardrailsReplySchema,
  normalizeGuardrails,
} from '../../mappers/guardrails-schema.ts';
import { loadIdHashKey } from '../../processors/signing.ts';
import type { RouteContext } from '../host/context.ts';
import type { Mapped, ReceiverDeclaration, Received } from '../host/receiver.ts';
import { parseJson } from '../http/body.ts';
import { HttpError } from '../http/errors.ts';

interface Reply {
  traceId: string;
  linkedBy: LinkedBy;
}

export function guardrailsReceiver(r: RouteContext): ReceiverDeclaration<unknown, Reply> {
  const limits = {
    maxStringBytes: r.config.MAX_STRING_BYTES,
    maxAttributeValueBytes: r.config.MAX_ATTRIBUTE_VALUE_BYTES,
  };
  let idKey: Buffer | null = null;
  const key = () => (idKey ??= loadIdHashKey(r.enrichment.keysDir, r.config.ID_HASH_KEY));

  /**
   * The trace the results go into. A response or request id the proxy never recorded (for this workspace) is no
   * link: the results get a trace of their own. Storage out answers 503 (Retry-After): the link cannot be known.
   */
  async function linkOf(env: Envelope, req: Received, own: () => string): Promise<GuardrailLink> {
    const given = givenLink(env);
    if (given) return given;
    const refs = [
      ...(env.responseId ? [{ kind: 'response' as const, id: env.responseId }] : []),
      ...(env.requestId ? [{ kind: 'request' as const, id: env.requestId }] : []),
    ];
    if (refs.length) {
      const calls = await r.proxyCalls.find(req.caller.workspaceId, refs, (work) => r.read(work));
      for (const ref of refs) {
        const call = calls.get(`${ref.kind}:${ref.id}`);
        if (call) return { traceId: call.traceId, parentSpanId: call.spanId, linkedBy: ref.kind };
      }
    }
    return { traceId: own(), parentSpanId: '', linkedBy: 'none' };
  }

  async function map(body: unknown, req: Received): Promise<Mapped<Reply>> {
    const n = normalizeGuardrails(body, r.config.MAX_BATCH_ITEMS);
    if (!n.ok) {
      const first = n.issues[0]!;
      const status = first.code === 'too_big' && first.field === '(body)' ? 413 : 400;
      const code = status === 413 ? 'too_many_items' : 'validation_failed';
      throw new HttpError(status, code, `invalid guardrail results: ${first.field}: ${first.message}`, n.issues);
    }
    const own = () => ownTraceId(req.caller.workspaceId, n.envelope, n.results, key());
    const link = await linkOf(n.envelope, req, own);
    const ctx = { workspaceId: req.caller.workspaceId, receivedAtMs: req.now, limits };
    const spans = mapGuardrails(n.envelope, n.results, link, ctx);
    return { spans, rejected: 0, reply: { traceId: link.traceId, linkedBy: link.linkedBy } };
  }

  return {
    paths: ['/api/integrations/provider-guardrails'],
    limiter: 'guardrails',
    accepts: ['json'],
    doc: {
      tag: 'ingest',
      summary:
        'OpenAI Guardrails results (GuardrailResult JS or Python, a guardrail_results bundle, Agents SDK guardrail results, or { results: [...] } with traceId / responseId / requestId), each stored as a guardrail span',
      request: { contentTypes: ['application/json'], schema: guardrailsDocSchema },
      responses: {
        200: { description: 'Stored durably: the trace they went into and their spans', schema: guardrailsReplySchema },
      },
    },
    parse: (raw) => parseJson(raw, r.config.MAX_JSON_DEPTH, r.config.MAX_JSON_VALUES),
    map,
    answer(mapped: Mapped<Reply>, ctx: Context) {
      const results = mapped.spans.filter((s) => s.kind === 'guardrail');
      ctx.body = {
        traceId: mapped.reply.traceId,
        linkedBy: mapped.reply.linkedBy,
        spans: results.map((s) => ({
          spanId: s.spanId,
          parentSpanId: s.parentSpanId,
          guardrailName: s.name,
          stage: String(s.attributes['guardrail.stage']),
          tripwireTriggered: s.attributes['guardrail.tripwire_triggered'] === true,
          executionFailed: s.attributes['guardrail.execution_failed'] === true,
        })),
        tripwiresTriggered: results.filter((s) => s.attributes['guardrail.tripwire_triggered'] === true).length,
      };
    },
  };
}
