// POST /api/ingest/tool-calls: a tool call, or `{ "tool_calls": [ … ] }`, each becoming a tool span in the trace it
// names (trace_id or traceparent), else in the trace of a provider response the proxy recorded (response_id), else in
// a trace of its own. The answer gives each call's traceId and spanId.
import { z } from 'zod';
import type { SpanRecord } from '../../core/record.ts';
import { invalidItem } from '../../mappers/signal-fields.ts';
import {
  mapToolCall,
  namedTrace,
  parseToolCall,
  type ToolCall,
  type ToolCallLimits,
  toolCallSchema,
} from '../../mappers/tool-calls.ts';
import type { RouteContext } from '../host/context.ts';
import { breathe, type Mapped, type ReceiverDeclaration, type Received } from '../host/receiver.ts';
import { parseJson } from '../http/body.ts';
import { type ItemError, itemError, itemErrorSchema, itemsOf, refuseAll } from './items.ts';

type Placed = { index: number; traceId: string; spanId: string; status: string };
type Reply = { batch: boolean; results: Array<Placed | ItemError> };

const placed = z.object({ index: z.number(), traceId: z.string(), spanId: z.string(), status: z.string() });
const single = z.object({ toolCall: z.object({ traceId: z.string(), spanId: z.string(), status: z.string() }) });
const batchReply = z.object({
  accepted: z.number(),
  rejected: z.number(),
  results: z.array(z.union([placed, itemErrorSchema])),
});

/** A batch yields after this long validating and mapping items. */
const TURN_MS = 20;

export function toolCallsReceiver(r: RouteContext): ReceiverDeclaration<unknown, Reply> {
  const limits: ToolCallLimits = {
    maxPayloadBytes: r.config.MAX_TOOL_PAYLOAD_BYTES,
    maxStringBytes: r.config.MAX_STRING_BYTES,
  };
  const schema = toolCallSchema(limits);
  // A response stored by the proxy is readable up to a flush interval (and an insert) after it was answered.
  const lagMs = r.config.FLUSH_INTERVAL_MS + 250;

  /** The traces of the response ids (the proxy's index), asking once more after the lag for those not found. */
  async function responseTraces(workspaceId: string, ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const found = await r.read(() => r.storage.responseTraces(workspaceId, ids));
    const missing = ids.filter((id) => !found.has(id));
    if (missing.length === 0) return found;
    await new Promise((resolve) => setTimeout(resolve, lagMs));
    for (const [k, v] of await r.read(() => r.storage.responseTraces(workspaceId, missing))) found.set(k, v);
    return found;
  }

  async function map(body: unknown, req: Received): Promise<Mapped<Reply>> {
    const { items, batch, prefix } = itemsOf(body, 'tool_calls', 'toolCalls', r.config.MAX_BATCH_ITEMS);
    const calls: Array<{ index: number; call: ToolCall }> = [];
    const results: Array<Placed | ItemError> = [];
    let turn = performance.now();
    for (let index = 0; index < items.length; index++) {
      if (performance.now() - turn > TURN_MS) {
        await breathe();
        turn = performance.now();
      }
      const parsed = parseToolCall(schema, items[index], batch ? `${prefix}${index}.` : '');
      if (parsed.ok) calls.push({ index, call: parsed.call });
      else if (!batch) throw invalidItem(parsed.issues);
      else results[index] = itemError(index, parsed.issues);
    }
    const wanted = calls.filter((c) => !namedTrace(c.call) && c.call.response_id).map((c) => c.call.response_id!);
    const traces = await responseTraces(req.caller.workspaceId, [...new Set(wanted)]);
    const spans: SpanRecord[] = [];
    for (const { index, call } of calls) {
      const linked = call.response_id ? traces.get(call.response_id) : undefined;
      const link = namedTrace(call) ?? (linked ? { traceId: linked, parentSpanId: '' } : null);
      const span = mapToolCall(call, req.caller.workspaceId, req.now, link, limits);
      spans.push(span);
      results[index] = { index, traceId: span.traceId, spanId: span.spanId, status: span.status };
    }
    const rejected = items.length - spans.length;
    const mapped: Mapped<Reply> = { spans, rejected, reply: { batch, results } };
    if (batch && items.length > 0 && spans.length === 0) mapped.refuse = refuseAll(results, items.length);
    return mapped;
  }

  return {
    paths: ['/api/ingest/tool-calls'],
    limiter: 'tool-calls',
    accepts: ['json'],
    doc: {
      tag: 'ingest',
      summary:
        'Ingest tool calls: one call, or { tool_calls: [...] } (snake_case or camelCase fields); each becomes an execute_tool span',
      request: {
        contentTypes: ['application/json'],
        schema: z.union([schema, z.object({ tool_calls: z.array(schema) }), z.array(schema)]),
      },
      responses: {
        200: {
          description: 'Stored durably: one call answers { toolCall }, a batch answers per item',
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
        const { index: _i, ...toolCall } = results[0] as Placed;
        ctx.body = { toolCall } satisfies z.output<typeof single>;
        return;
      }
      ctx.status = mapped.rejected ? 207 : 200;
      ctx.body = { accepted: mapped.spans.length, rejected: mapped.rejected, results } satisfies z.output<
        typeof batchReply
      >;
    },
  };
}
