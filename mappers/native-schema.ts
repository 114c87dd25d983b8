// The native trace payload (spec: Trace). One zod schema validates requests and feeds the OpenAPI document.
import { z } from 'zod';
import { MAX_COST_USD, MAX_TOKENS } from '../core/record.ts';

export interface NativeLimits {
  maxStringBytes: number;
}

const shortText = z.string().max(256);
const count = z.number().int().min(0).max(MAX_TOKENS);

export function nativeTraceSchema(limits: NativeLimits) {
  // The limit is in UTF-8 bytes (an emoji is 4): `max` documents it in characters for the schema, the refinement checks bytes.
  const max = limits.maxStringBytes;
  const longText = z
    .string()
    .max(max)
    .refine((v) => v.length * 3 <= max || Buffer.byteLength(v) <= max, { message: `longer than ${max} bytes (UTF-8)` });
  return z.looseObject({
    requestId: z
      .string()
      .min(1)
      .max(256)
      .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces')
      .optional()
      .describe('Client request id; becomes the traceId'),
    actionName: shortText.optional().describe('Groups runs; used to group the training export'),
    environment: shortText.optional().describe('Deployment environment label'),
    status: z.string().min(1).max(64).default('completed').describe('Trace status; `completed` is the usual value'),
    model: shortText.optional().describe('Model id'),
    provider: shortText.optional().describe('Model provider, e.g. openai; helps price lookup'),
    prompt: longText
      .optional()
      .describe(
        `Input text, at most ${max} bytes of UTF-8 (maxLength counts characters: JSON Schema cannot count bytes)`,
      ),
    response: longText
      .optional()
      .describe(
        `Output text, at most ${max} bytes of UTF-8 (maxLength counts characters: JSON Schema cannot count bytes)`,
      ),
    metrics: z
      .looseObject({
        promptTokens: count.optional(),
        completionTokens: count.optional(),
        totalTokens: count.optional(),
        latencyMs: z
          .number()
          .min(0)
          .max(86_400_000 * 7)
          .optional(),
        estimatedCostUsd: z.number().min(0).max(MAX_COST_USD).optional(),
        finishReason: z.string().max(64).optional(),
      })
      .optional(),
    parameters: z
      .looseObject({
        trainingPreferred: z.boolean().optional(),
        coachSessionId: z.string().max(256).optional(),
        // Free-form (spec); native, sdk, agent_lab and coach set the record's source, any other value stays an attribute.
        source: z.string().max(256).optional(),
      })
      .optional(),
    metadata: freeFormMap.optional().describe('Free-form key/value map'),
  });
}

/**
 * The payload as documented: every field of the schema (top level, metrics, parameters) may also be `null`, which
 * means "not given" (withoutNulls drops it before validation). For the OpenAPI document only; routes validate with
 * nativeTraceValidator.
 */
export function nativeTraceDocSchema(limits: NativeLimits) {
  const orNull = (shape: z.ZodRawShape) =>
    Object.fromEntries(Object.entries(shape).map(([k, s]) => [k, z.nullable(s)]));
  const { metrics, parameters, ...top } = nativeTraceSchema(limits).shape;
  return z.looseObject({
    ...orNull(top),
    metrics: z.looseObject(orNull(metrics.unwrap().shape)).optional().nullable(),
    parameters: z.looseObject(orNull(parameters.unwrap().shape)).optional().nullable(),
  });
}

/**
 * A JSON object with keys of at most 256 characters, values anything; answered as is. The same check as
 * z.record(z.string().max(256), z.unknown()) and documented the same, without zod's per-entry parse and copy
 * (about 5 µs an entry, all on the event loop).
 */
const freeFormMap = z
  .custom<Record<string, unknown>>(() => true)
  .superRefine((v, ctx) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) {
      const received = v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
      ctx.addIssue({
        code: 'invalid_type',
        expected: 'record',
        input: v,
        message: `Invalid input: expected record, received ${received}`,
      });
      return;
    }
    for (const k in v) {
      if (k.length > 256 && [...k].length > 256) {
        // characters (code points), as z.string().max() counts
        ctx.addIssue({ code: 'custom', path: [k], message: 'key longer than 256 characters' });
        return;
      }
    }
  })
  .meta({ type: 'object', propertyNames: { type: 'string', maxLength: 256 }, additionalProperties: {} });

/**
 * Validates a native trace as nativeTraceSchema does (nulls of known fields dropped first: withoutNulls), visiting
 * only the schema's own fields: z.looseObject parses and copies every unknown field as well, a cost per field
 * that a body of hundreds of thousands of them turns into a second of blocked event loop. The unknown fields
 * stay where they are: the result is the item itself with its known fields replaced by their parsed values, so
 * `item` must be the caller's own (freshly parsed) object.
 */
export function nativeTraceValidator(limits: NativeLimits) {
  const shape = nativeTraceSchema(limits).shape;
  const fields = z.object(shape); // strip mode: unknown keys are not visited
  const names = Object.keys(shape);
  return (item: unknown): { success: true; data: NativeTrace } | { success: false; error: z.ZodError } => {
    const input = withoutNulls(item);
    const parsed = fields.safeParse(input);
    if (!parsed.success) return parsed;
    const out = input as Record<string, unknown>;
    const data = parsed.data as Record<string, unknown>;
    for (const k of names) {
      if (Object.hasOwn(data, k)) out[k] = data[k];
      else delete out[k];
    }
    return { success: true, data: out as NativeTrace };
  };
}

export type NativeTrace = z.infer<ReturnType<typeof nativeTraceSchema>>;

/**
 * `null` for a known optional field means "not given" (Python clients send None): dropped before validation,
 * at the top level and inside metrics and parameters. Null in a free-form field (metadata, unknown keys) stays.
 */
export function withoutNulls(item: unknown): unknown {
  return strip(item, known().top, true);
}

function strip(item: unknown, names: ReadonlySet<string>, top: boolean): unknown {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) return item;
  // Only the schema's few names are looked at, and the item is copied only when one of them changes: a copy
  // key by key costs per key, and an item may carry hundreds of thousands of unknown ones.
  const obj = item as Record<string, unknown>;
  let out: Record<string, unknown> | null = null;
  for (const k of names) {
    if (!Object.hasOwn(obj, k)) continue;
    const v = obj[k];
    if (v === null) {
      out ??= { ...obj };
      delete out[k];
    } else if (top && (k === 'metrics' || k === 'parameters')) {
      const inner = strip(v, known()[k as 'metrics' | 'parameters'], false);
      if (inner !== v) (out ??= { ...obj })[k] = inner;
    }
  }
  return out ?? obj;
}

/** The schema's own field names per level. */
let fieldNames: { top: Set<string>; metrics: Set<string>; parameters: Set<string> } | null = null;
function known() {
  if (!fieldNames) {
    const shape = nativeTraceSchema({ maxStringBytes: 1 }).shape;
    fieldNames = {
      top: new Set(Object.keys(shape)),
      metrics: new Set(Object.keys(shape.metrics.unwrap().shape)),
      parameters: new Set(Object.keys(shape.parameters.unwrap().shape)),
    };
  }
  return fieldNames;
}

export const nativeTraceResponseSchema = z.object({
  trace: z.object({ traceId: z.string(), status: z.string() }),
});
