// POST /api/integrations/provider-agents: the OpenAI Agents SDK's tracing export, from its own exporters unchanged
// (JS OpenAITracingExporter, Python BackendSpanExporter with this URL as endpoint and a workspace key as apiKey).
// Each item of `data` is checked on its own: the valid ones are stored even when others are not (207), since the
// exporters never send a refused batch again. A response span whose call tracegate's proxy recorded is marked
// (mappers/agents.ts markProxied), so that the call's usage is counted once.
import type { Context } from 'koa';
import type { TraceMetaRecord } from '../../core/enrichment-records.ts';
import { TracegateError } from '../../core/errors.ts';
import type { SpanRecord } from '../../core/record.ts';
import { mapAgentsItem, markProxied, responseIdOf } from '../../mappers/agents.ts';
import {
  agentsDocSchema,
  agentsEnvelope,
  agentsResultSchema,
  validateAgentsItem,
} from '../../mappers/agents-schema.ts';
import type { RouteContext } from '../host/context.ts';
import { breathe, type Mapped, type ReceiverDeclaration, type Received } from '../host/receiver.ts';
import { parseJson } from '../http/body.ts';
import { HttpError } from '../http/errors.ts';
import { errorSchema } from '../http/openapi.ts';

type ZodIssues = Array<{ path: PropertyKey[]; code: string; message: string }>;
interface ItemError {
  index: number;
  code: string;
  message: string;
  details: Array<{ field: string; code: string; message: string }>;
}
interface Reply {
  errors: ItemError[];
}

/** A batch yields after this long validating and mapping items. */
const TURN_MS = 20;
/** An export larger than this is spooled in parts of about this size (ReceiverDeclaration.ingestPartBytes). */
const AGENTS_PART_BYTES = 8 * 1024 * 1024;
/** Header values kept with the records, cut to this many characters. */
const HEADER_CHARS = 256;

const details = (issues: ZodIssues, prefix: Array<string | number>) =>
  issues.map((i) => ({
    field: [...prefix, ...i.path.map(String)].join('.') || '(body)',
    code: i.code,
    message: i.message,
  }));

export function agentsReceiver(r: RouteContext): ReceiverDeclaration<unknown, Reply> {
  const envelope = agentsEnvelope(r.config.MAX_BATCH_ITEMS);
  const limits = {
    maxStringBytes: r.config.MAX_STRING_BYTES,
    maxAttributeValueBytes: r.config.MAX_ATTRIBUTE_VALUE_BYTES,
  };

  function headersOf(ctx: Context) {
    const h = (name: string) => ctx.get(name).slice(0, HEADER_CHARS);
    return {
      organization: h('openai-organization'),
      project: h('openai-project'),
      beta: h('openai-beta'),
      userAgent: h('user-agent'),
    };
  }

  async function map(body: unknown, req: Received): Promise<Mapped<Reply>> {
    const env = envelope.safeParse(body);
    if (!env.success) {
      const d = details(env.error.issues, []);
      const tooMany = env.error.issues.find((i) => i.code === 'too_big' && i.path[0] === 'data');
      if (tooMany) throw new HttpError(413, 'too_many_items', `data: ${tooMany.message}`, d);
      throw new HttpError(400, 'validation_failed', `invalid export: ${d[0]!.field}: ${d[0]!.message}`, d);
    }
    const items = env.data.data;
    const ctx = { workspaceId: req.caller.workspaceId, receivedAtMs: req.now, headers: headersOf(req.ctx), limits };
    const spans: SpanRecord[] = [];
    const metas: TraceMetaRecord[] = [];
    const errors: ItemError[] = [];
    let turn = performance.now();
    for (let index = 0; index < items.length; index++) {
      if (performance.now() - turn > TURN_MS) {
        await breathe();
        turn = performance.now();
      }
      const parsed = validateAgentsItem(items[index]);
      if (!parsed.success) {
        const d = details(parsed.error.issues, ['data', index]);
        errors.push({ index, code: 'validation_failed', message: `${d[0]!.field}: ${d[0]!.message}`, details: d });
        continue;
      }
      const record = mapAgentsItem(parsed.data, ctx);
      if ('recordType' in record) metas.push(record);
      else spans.push(record);
    }
    if (items.length > 0 && errors.length === items.length) {
      const first = errors[0]!;
      const message = items.length === 1 ? first.message : `every item was refused; the first: ${first.message}`;
      const refuse = new HttpError(400, 'validation_failed', message, errors);
      return {
        spans: [],
        rejected: errors.length,
        reply: { errors },
        refuse: Object.assign(refuse, { rejectedItems: errors.length }),
      };
    }
    await markProxiedCalls(spans, req);
    return { spans, records: metas, rejected: errors.length, reply: { errors } };
  }

  /**
   * Response spans whose call the proxy recorded become its pointers (markProxied). Storage out: they stay model
   * calls (marked `tracegate.proxy_lookup: failed`) rather than the export failing; the trace read links them all the same.
   */
  async function markProxiedCalls(spans: SpanRecord[], req: Received): Promise<void> {
    const responses = spans.filter((s) => responseIdOf(s) !== '');
    if (responses.length === 0) return;
    const refs = [...new Set(responses.map(responseIdOf))].map((id) => ({ kind: 'response' as const, id }));
    try {
      const calls = await r.proxyCalls.find(req.caller.workspaceId, refs, (work) => r.read(work));
      for (const s of responses) {
        const call = calls.get(`response:${responseIdOf(s)}`);
        if (call) markProxied(s, call);
      }
    } catch (err) {
      if (!(err instanceof TracegateError || err instanceof HttpError)) throw err;
      for (const s of responses) s.attributes['tracegate.proxy_lookup'] = 'failed';
    }
  }

  return {
    paths: ['/api/integrations/provider-agents'],
    limiter: 'agents',
    accepts: ['json'],
    maxBodyBytes: r.config.AGENTS_MAX_BODY_BYTES,
    // A forceFlush of 1,000 items of 100 KB is ~100 MB: the processor and storage threads take it a part at a time.
    ingestPartBytes: AGENTS_PART_BYTES,
    doc: {
      tag: 'ingest',
      summary:
        "The OpenAI Agents SDK's tracing export ({ data: [trace | trace.span] }), from OpenAITracingExporter (JS) or BackendSpanExporter (Python) pointed at this URL with a workspace key",
      request: { contentTypes: ['application/json'], schema: agentsDocSchema },
      responses: {
        200: { description: 'Every item stored durably', schema: agentsResultSchema },
        207: {
          description: 'Some items refused (errors names them); the others are stored',
          schema: agentsResultSchema,
        },
        413: {
          description:
            'Body over TRACEGATE_AGENTS_MAX_BODY_BYTES, more JSON values than TRACEGATE_AGENTS_MAX_JSON_VALUES, or more items than TRACEGATE_MAX_BATCH_ITEMS',
          schema: errorSchema,
        },
      },
    },
    parse: (raw) => parseJson(raw, r.config.MAX_JSON_DEPTH, r.config.AGENTS_MAX_JSON_VALUES),
    map,
    answer(mapped: Mapped<Reply>, ctx: Context) {
      const accepted = mapped.spans.length + (mapped.records?.length ?? 0);
      const errors = mapped.reply.errors;
      ctx.status = errors.length ? 207 : 200;
      ctx.body = { accepted, rejected: errors.length, ...(errors.length ? { errors } : {}) };
    },
  };
}
