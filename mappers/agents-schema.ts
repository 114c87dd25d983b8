// The OpenAI Agents SDK tracing export (`OpenAITracingExporter` in @openai/agents, `BackendSpanExporter` in
// openai-agents for Python): `{ data: [ trace | trace.span ] }`. One set of zod schemas validates requests and feeds
// the OpenAPI document. Python sends None (null) for every field it has no value for: null is accepted wherever a
// field is optional. Unknown keys are kept (loose objects): the mapper stores them as attributes.
import { z } from 'zod';

/** Ids as the SDKs make them (`trace_<32 hex>`, `span_<24 hex>`) or a custom generator's: printable, bounded. */
export const agentsId = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[^\u0000-\u001f\u007f]+$/, 'no control characters');

const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9})\d*)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$/;

/**
 * An ISO 8601 time as the SDKs write it (`…123Z` from JS, `…123456+00:00` from Python; no zone read as UTC) →
 * decimal nanoseconds since the epoch, or null when it is not one.
 */
export function isoToNs(s: string): string | null {
  const m = ISO_TIME.exec(s);
  if (!m) return null;
  const [y, mo, d, h, mi, sec] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return null;
  const day = Date.UTC(y, mo - 1, d);
  if (new Date(day).getUTCDate() !== d) return null; // 30 February
  const offset = m[9] ? (m[9] === '-' ? -1 : 1) * (Number(m[10]) * 60 + Number(m[11])) : 0;
  const ms = day + ((h * 60 + mi - offset) * 60 + sec) * 1000;
  if (ms < 0) return null;
  return (BigInt(ms) * 1_000_000n + BigInt((m[7] ?? '').padEnd(9, '0'))).toString();
}

const isoTime = z
  .string()
  .max(64)
  .refine((s) => isoToNs(s) !== null, 'not an ISO 8601 time (e.g. 2025-01-01T12:00:00.123Z)')
  .describe('ISO 8601, e.g. 2025-01-01T12:00:00.123Z (JS) or 2025-01-01T12:00:00.123456+00:00 (Python)');

const opt = <T extends z.ZodType>(s: T) => s.nullable().optional();
const text = z.string();
const name = z.string().max(4096);
const record = z.record(z.string(), z.unknown());
const count = z.number().min(0).max(Number.MAX_SAFE_INTEGER);

/** Token usage in every shape the SDKs send: Responses/Python (…_details), JS generation (details), task/turn. */
export const usageSchema = z.looseObject({
  requests: opt(count),
  input_tokens: opt(count),
  output_tokens: opt(count),
  total_tokens: opt(count),
  prompt_tokens: opt(count),
  completion_tokens: opt(count),
  cached_input_tokens: opt(count),
  cache_write_input_tokens: opt(count),
  input_tokens_details: opt(
    z.looseObject({ cached_tokens: opt(count), cache_write_tokens: opt(count) }).or(z.array(z.unknown())),
  ),
  output_tokens_details: opt(z.looseObject({ reasoning_tokens: opt(count) }).or(z.array(z.unknown()))),
  details: opt(record),
});

/** Each span_data type (JS agents-core spans.ts, Python span_data.py): the fields the mapper reads. */
export const SPAN_DATA = {
  agent: z.looseObject({
    type: z.literal('agent'),
    name,
    handoffs: opt(z.array(z.string())),
    tools: opt(z.array(z.string())),
    output_type: opt(z.string()),
  }),
  function: z.looseObject({
    type: z.literal('function'),
    name,
    input: opt(z.unknown()).describe('The arguments (a JSON string)'),
    output: opt(z.unknown()).describe('The result (a string)'),
    mcp_data: opt(z.unknown()),
  }),
  generation: z.looseObject({
    type: z.literal('generation'),
    input: opt(z.array(z.unknown())),
    output: opt(z.array(z.unknown())),
    model: opt(z.string().max(4096)),
    model_config: opt(record),
    usage: opt(usageSchema),
  }),
  response: z.looseObject({
    type: z.literal('response'),
    response_id: opt(z.string().max(4096)),
    usage: opt(usageSchema).describe('Sent by Python (full usage), not by JS'),
  }),
  handoff: z.looseObject({ type: z.literal('handoff'), from_agent: opt(name), to_agent: opt(name) }),
  custom: z.looseObject({ type: z.literal('custom'), name, data: opt(record) }),
  guardrail: z.looseObject({ type: z.literal('guardrail'), name, triggered: opt(z.boolean()) }),
  transcription: z.looseObject({
    type: z.literal('transcription'),
    input: opt(z.looseObject({ data: opt(text), format: opt(z.string()) })),
    output: opt(text),
    model: opt(z.string().max(4096)),
    model_config: opt(record),
  }),
  speech: z.looseObject({
    type: z.literal('speech'),
    input: opt(text),
    output: opt(z.looseObject({ data: opt(text), format: opt(z.string()) })),
    model: opt(z.string().max(4096)),
    model_config: opt(record),
    first_content_at: opt(z.string()),
  }),
  speech_group: z.looseObject({ type: z.literal('speech_group'), input: opt(text) }),
  mcp_tools: z.looseObject({ type: z.literal('mcp_tools'), server: opt(name), result: opt(z.array(z.string())) }),
} as const;
export type SpanDataType = keyof typeof SPAN_DATA;

/** A type the SDKs do not define (yet): stored as kind `other`, every field an attribute. */
const otherSpanData = z.looseObject({ type: z.string().min(1).max(256) });

/** Validates span_data by its type, a known type against its own schema. */
const spanData = otherSpanData.superRefine((v, ctx) => {
  const known = Object.hasOwn(SPAN_DATA, v.type) ? SPAN_DATA[v.type as SpanDataType] : null;
  if (!known) return;
  const r = known.safeParse(v);
  if (!r.success) for (const issue of r.error.issues) ctx.addIssue({ ...issue, path: issue.path } as never);
});

const spanError = z.looseObject({ message: z.string(), data: opt(z.unknown()) });

export const traceItemSchema = z.looseObject({
  object: z.literal('trace'),
  id: agentsId,
  workflow_name: opt(z.string().max(4096)),
  group_id: opt(z.string().max(4096)).describe('The conversation or session'),
  metadata: opt(record),
});

const spanItemShape = {
  object: z.literal('trace.span'),
  id: agentsId,
  trace_id: agentsId,
  parent_id: opt(agentsId),
  started_at: opt(isoTime),
  ended_at: opt(isoTime),
  error: opt(spanError),
  metadata: opt(record).describe('Python: routing keys such as agent_harness_id'),
};
export const spanItemSchema = z.looseObject({ ...spanItemShape, span_data: spanData });

export type TraceItem = z.output<typeof traceItemSchema>;
export type SpanItem = z.output<typeof spanItemSchema>;
export type AgentsItem = TraceItem | SpanItem;

/** Checks one item of `data`: a trace or a span, by `object`. */
export function validateAgentsItem(
  item: unknown,
): { success: true; data: AgentsItem } | { success: false; error: z.ZodError } {
  const object = typeof item === 'object' && item !== null ? (item as { object?: unknown }).object : undefined;
  return object === 'trace' ? traceItemSchema.safeParse(item) : spanItemSchema.safeParse(item);
}

/** The body: `data` is checked item by item (validateAgentsItem), so that one bad item does not refuse the rest. */
export const agentsEnvelope = (maxItems: number) =>
  z.looseObject({ data: z.array(z.unknown()).max(maxItems, `at most ${maxItems} items (TRACEGATE_MAX_BATCH_ITEMS)`) });

/** The body as documented: every span_data type spelled out (validation dispatches on `type` instead). */
export const agentsDocSchema = z.object({
  data: z.array(
    z.union([
      traceItemSchema,
      z.looseObject({
        ...spanItemShape,
        span_data: z.union([...Object.values(SPAN_DATA), otherSpanData]),
      }),
    ]),
  ),
});

export const agentsResultSchema = z.object({
  accepted: z.number().int().describe('Items stored (traces and spans)'),
  rejected: z.number().int().describe('Items refused (see errors)'),
  errors: z
    .array(
      z.object({
        index: z.number().int().describe('Position in data'),
        code: z.string(),
        message: z.string(),
        details: z.array(z.object({ field: z.string(), code: z.string(), message: z.string() })),
      }),
    )
    .optional()
    .describe('Present when items were refused (207)'),
});
