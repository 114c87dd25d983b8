// The native trace payload (spec: Trace). One zod schema validates requests and feeds the OpenAPI document.
import { z } from 'zod';

export interface NativeLimits { maxStringBytes: number }

const shortText = z.string().max(256);
const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export function nativeTraceSchema(limits: NativeLimits) {
  // The limit is in UTF-8 bytes (an emoji is 4): `max` documents it in characters for the schema, the refinement checks bytes.
  const max = limits.maxStringBytes;
  const longText = z.string().max(max).refine((v) => v.length * 3 <= max || Buffer.byteLength(v) <= max, { message: `longer than ${max} bytes (UTF-8)` });
  return z.looseObject({
    requestId: z.string().min(1).max(256).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces').optional()
      .describe('Client request id; becomes the traceId'),
    actionName: shortText.optional().describe('Groups runs; used to group the training export'),
    environment: shortText.optional().describe('Deployment environment label'),
    status: z.string().min(1).max(64).default('completed').describe('Trace status; `completed` is the usual value'),
    model: shortText.optional().describe('Model id'),
    provider: shortText.optional().describe('Model provider, e.g. openai; helps price lookup'),
    prompt: longText.optional().describe('Input text'),
    response: longText.optional().describe('Output text'),
    metrics: z.looseObject({
      promptTokens: count.optional(),
      completionTokens: count.optional(),
      totalTokens: count.optional(),
      latencyMs: z.number().min(0).max(86_400_000 * 7).optional(),
      estimatedCostUsd: z.number().min(0).max(1e9).optional(),
      finishReason: z.string().max(64).optional(),
    }).optional(),
    parameters: z.looseObject({
      trainingPreferred: z.boolean().optional(),
      coachSessionId: z.string().max(256).optional(),
      source: z.enum(['native', 'sdk', 'agent_lab', 'coach']).optional(),
    }).optional(),
    metadata: z.record(z.string().max(256), z.unknown()).optional().describe('Free-form key/value map'),
  });
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
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(item)) {
    if (v === null && names.has(k)) continue;
    out[k] = top && (k === 'metrics' || k === 'parameters') ? strip(v, known()[k], false) : v;
  }
  return out;
}

/** The schema's own field names per level. */
let fieldNames: { top: Set<string>; metrics: Set<string>; parameters: Set<string> } | null = null;
function known() {
  if (!fieldNames) {
    const shape = nativeTraceSchema({ maxStringBytes: 1 }).shape;
    fieldNames = { top: new Set(Object.keys(shape)), metrics: new Set(Object.keys(shape.metrics.unwrap().shape)), parameters: new Set(Object.keys(shape.parameters.unwrap().shape)) };
  }
  return fieldNames;
}

export const nativeTraceResponseSchema = z.object({
  trace: z.object({ traceId: z.string(), status: z.string() }),
});
