// Guardrail results as users have them at hand, normalized into one canonical shape. Accepted bodies:
// - one result, an array of results, or `{ results: [...] }` (the canonical payload) with optional link fields;
// - the `guardrail_results` bundle of a wrapped response (`{ preflight, input, output, … }`, stages by key), alone,
//   as `{ guardrail_results: … }`, or the whole wrapped response (its `id` is then the response id);
// and per result the shapes of @openai/guardrails JS (`tripwireTriggered`, `executionFailed`, `info`), Python
// (`tripwire_triggered`, `execution_failed`), the Agents SDK (`{ guardrail: { type, name }, output: {
// tripwireTriggered, outputInfo } }`) and the canonical one (`guardrailName`, `stage`, `checkedText`, `tokenUsage`, …).
// The alias table below both resolves and documents them (OpenAPI), and the canonical schema validates the result.
import { z } from 'zod';
import { agentsId, isoToNs } from './agents-schema.ts';

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Canonical field → where a result may carry it, first found wins (dotted: nested). */
export const RESULT_ALIASES = {
  guardrailName: ['guardrailName', 'guardrail_name', 'name', 'info.guardrail_name', 'guardrail.name'],
  stage: ['stage', 'stage_name', 'info.stage_name', 'guardrail.type'],
  tripwireTriggered: [
    'tripwireTriggered',
    'tripwire_triggered',
    'triggered',
    'output.tripwireTriggered',
    'output.tripwire_triggered',
  ],
  executionFailed: ['executionFailed', 'execution_failed'],
  errorMessage: [
    'errorMessage',
    'error_message',
    'error',
    'info.error',
    'originalException.message',
    'original_exception',
  ],
  mediaType: ['mediaType', 'media_type', 'info.media_type', 'info.detected_content_type'],
  checkedText: ['checkedText', 'checked_text', 'info.checked_text'],
  tokenUsage: ['tokenUsage', 'token_usage', 'info.token_usage'],
  info: ['info', 'output.outputInfo', 'output.output_info'],
  model: ['model', 'info.model'],
} as const satisfies Record<string, readonly string[]>;
type Canonical = keyof typeof RESULT_ALIASES;

/** Keys of `info` whose values the canonical result carries in fields of its own. */
export const INFO_MOVED = ['checked_text', 'token_usage', 'guardrail_name', 'stage_name', 'media_type'];

/** Bundle keys (GuardrailResults, the Agents integration's tool stages) → stage. */
export const BUNDLE_STAGES: Readonly<Record<string, string>> = {
  preflight: 'pre_flight',
  pre_flight: 'pre_flight',
  input: 'input',
  output: 'output',
  tool_input: 'tool_input',
  tool_output: 'tool_output',
};

/** Link and provenance fields of an envelope, canonical name first. */
export const ENVELOPE_ALIASES = {
  traceId: ['traceId', 'trace_id'],
  spanId: ['spanId', 'span_id'],
  responseId: ['responseId', 'response_id'],
  requestId: ['requestId', 'request_id'],
  stage: ['stage'],
  occurredAt: ['occurredAt', 'occurred_at'],
  source: ['source'],
  sdkVersion: ['sdkVersion', 'sdk_version'],
} as const;
type EnvelopeField = keyof typeof ENVELOPE_ALIASES;

const count = z.number().min(0).max(Number.MAX_SAFE_INTEGER).nullable().optional();
const callId = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

export const tokenUsageSchema = z.looseObject({
  prompt_tokens: count,
  completion_tokens: count,
  total_tokens: count,
  input_tokens: count,
  output_tokens: count,
  unavailable_reason: z.string().nullable().optional(),
});

/** A result once its aliases are resolved. */
export const canonicalResultSchema = z.object({
  guardrailName: z.string().min(1).max(256).default('unnamed'),
  stage: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[\w.-]+$/, 'letters, digits, _ . -')
    .default('unspecified')
    .describe('pre_flight, input, output, tool_input or tool_output'),
  tripwireTriggered: z.boolean(),
  executionFailed: z.boolean().default(false),
  errorMessage: z.string().max(4096).nullable().default(null),
  mediaType: z.string().max(256).nullable().default(null),
  checkedText: z.string().nullable().default(null).describe('Stored as a masked preview unless the policy says'),
  tokenUsage: tokenUsageSchema.nullable().default(null).describe('Of LLM-based checks: counted in usage and cost'),
  info: z.record(z.string(), z.unknown()).nullable().default(null),
  model: z.string().max(256).nullable().default(null).describe('The model of an LLM-based check (prices its usage)'),
});
export type CanonicalResult = z.output<typeof canonicalResultSchema>;

export const envelopeSchema = z.object({
  traceId: agentsId.optional().describe('A trace to add the results to (an Agents SDK trace_…, any trace id)'),
  spanId: agentsId.optional().describe('Their parent span in that trace'),
  responseId: callId.optional().describe("A response id the proxy recorded: the results go into that call's trace"),
  requestId: callId.optional().describe('A request id (x-request-id) the proxy recorded, likewise'),
  stage: z.string().min(1).max(64).optional().describe('Of results that name none'),
  occurredAt: z
    .string()
    .max(64)
    .refine((s) => isoToNs(s) !== null, 'not an ISO 8601 time')
    .optional()
    .describe('When the checks ran (default: when received)'),
  source: z.string().max(256).optional().describe('openai-guardrails-js, openai-guardrails-python, openai-agents, …'),
  sdkVersion: z.string().max(64).optional(),
});
export type Envelope = z.output<typeof envelopeSchema>;

export interface Issue {
  field: string;
  code: string;
  message: string;
}

export interface NormalizedResult extends CanonicalResult {
  /** Position in its stage's list, for a stable span id. */
  index: number;
}

export type Normalized = { ok: true; envelope: Envelope; results: NormalizedResult[] } | { ok: false; issues: Issue[] };

function at(o: Json, path: string): unknown {
  let v: unknown = o;
  for (const k of path.split('.')) {
    if (!isObj(v) || !Object.hasOwn(v, k)) return undefined;
    v = v[k];
  }
  return v;
}

/** The first alias present (not null), as [value, path]. */
function pick(o: Json, aliases: readonly string[]): [unknown, string] | null {
  for (const a of aliases) {
    const v = at(o, a);
    if (v !== undefined && v !== null) return [v, a];
  }
  return null;
}

const BUNDLE_KEYS = ['guardrail_results', 'guardrailResults'];
const isBundle = (o: Json) => Object.keys(BUNDLE_STAGES).some((k) => Array.isArray(o[k]));
const fieldOf = (prefix: string, path: string) => (prefix && path ? `${prefix}.${path}` : prefix || path) || '(body)';

/** One result in any shape → canonical, or its issues named by the body's own paths. */
function normalizeResult(raw: unknown, prefix: string, stage: string | undefined, index: number) {
  if (!isObj(raw))
    return {
      issues: [{ field: fieldOf(prefix, ''), code: 'invalid_type', message: 'a guardrail result must be an object' }],
    };
  const picked: Json = {};
  const from: Record<string, string> = {};
  for (const [name, aliases] of Object.entries(RESULT_ALIASES) as Array<[Canonical, readonly string[]]>) {
    const hit = pick(raw, aliases);
    if (!hit) continue;
    picked[name] = hit[0];
    from[name] = hit[1];
  }
  if (picked.stage === undefined && stage) picked.stage = stage;
  if (isObj(picked.errorMessage) && typeof picked.errorMessage.message === 'string')
    picked.errorMessage = picked.errorMessage.message; // a serialized Error, or Python's {message}
  if (isObj(picked.info)) {
    const info = { ...picked.info };
    for (const k of INFO_MOVED) delete info[k];
    picked.info = info;
  }
  const r = canonicalResultSchema.safeParse(picked);
  if (r.success) return { result: { ...r.data, index } };
  return {
    issues: r.error.issues.map((i) => {
      const head = String(i.path[0] ?? '');
      const path = [from[head] ?? head, ...i.path.slice(1)].join('.');
      const what =
        head === 'tripwireTriggered' && i.path.length === 1 && !from[head]
          ? ' (tripwireTriggered or tripwire_triggered)'
          : '';
      return { field: fieldOf(prefix, path), code: i.code, message: `${i.message}${what}` };
    }),
  };
}

/** The results of a body and where each sits: [raw, path prefix, stage from a bundle key]. */
function listResults(body: unknown): { envelope: Json; items: Array<[unknown, string, string | undefined]> } | Issue {
  if (Array.isArray(body)) return { envelope: {}, items: body.map((x, i) => [x, String(i), undefined]) };
  if (!isObj(body))
    return {
      field: '(body)',
      code: 'invalid_type',
      message: 'expected a guardrail result, an array of them or { results: [...] }',
    };
  if (Array.isArray(body.results))
    return { envelope: body, items: body.results.map((x, i) => [x, `results.${i}`, undefined]) };
  if (body.results !== undefined)
    return { field: 'results', code: 'invalid_type', message: 'results must be an array' };
  const key = BUNDLE_KEYS.find((k) => body[k] !== undefined && body[k] !== null);
  const bundle = key ? body[key] : isBundle(body) ? body : null;
  if (key && !isObj(bundle)) return { field: key, code: 'invalid_type', message: `${key} must be an object` };
  if (isObj(bundle)) {
    const envelope =
      key && body.object === 'response' && typeof body.id === 'string' ? { responseId: body.id, ...body } : body;
    const items: Array<[unknown, string, string | undefined]> = [];
    for (const [k, stage] of Object.entries(BUNDLE_STAGES)) {
      const list = bundle[k];
      if (list === undefined || list === null) continue;
      const where = key ? `${key}.${k}` : k;
      if (!Array.isArray(list)) return { field: where, code: 'invalid_type', message: `${where} must be an array` };
      list.forEach((x, i) => {
        items.push([x, `${where}.${i}`, stage]);
      });
    }
    return { envelope, items };
  }
  return { envelope: body, items: [[body, '', undefined]] };
}

/** A body in any accepted shape → envelope and canonical results, or every issue found. */
export function normalizeGuardrails(body: unknown, maxResults: number): Normalized {
  const listed = listResults(body);
  if (!('items' in listed)) return { ok: false, issues: [listed] };
  const fields: Json = {};
  for (const [name, aliases] of Object.entries(ENVELOPE_ALIASES) as Array<[EnvelopeField, readonly string[]]>) {
    const hit = pick(listed.envelope, aliases);
    if (hit) fields[name] = hit[0];
  }
  const env = envelopeSchema.safeParse(fields);
  const issues: Issue[] = env.success
    ? []
    : env.error.issues.map((i) => ({ field: i.path.join('.'), code: i.code, message: i.message }));
  if (listed.items.length > maxResults)
    issues.push({
      field: '(body)',
      code: 'too_big',
      message: `${listed.items.length} results; at most ${maxResults} (TRACEGATE_MAX_BATCH_ITEMS)`,
    });
  if (listed.items.length === 0) issues.push({ field: '(body)', code: 'too_small', message: 'no guardrail results' });
  const results: NormalizedResult[] = [];
  const perStage = new Map<string, number>();
  for (const [raw, prefix, bundleStage] of listed.items) {
    const stage = bundleStage ?? (env.success ? env.data.stage : undefined);
    const n = normalizeResult(raw, prefix, stage, 0);
    if (n.issues) {
      issues.push(...n.issues);
      continue;
    }
    const index = perStage.get(n.result.stage) ?? 0;
    perStage.set(n.result.stage, index + 1);
    results.push({ ...n.result, index });
  }
  if (issues.length || !env.success) return { ok: false, issues };
  return { ok: true, envelope: env.data, results };
}

/** A result in any accepted shape, for the OpenAPI document: every alias a property. */
const anyResultDoc = z.looseObject(
  Object.fromEntries(
    (Object.entries(RESULT_ALIASES) as Array<[Canonical, readonly string[]]>).flatMap(([name, aliases]) =>
      aliases
        .filter((a) => !a.includes('.'))
        .map((a) => [
          a,
          z
            .unknown()
            .optional()
            .describe(`= ${name}${a === name ? '' : ' (alias)'}`),
        ]),
    ),
  ),
);
const bundleDoc = z.looseObject(
  Object.fromEntries(Object.keys(BUNDLE_STAGES).map((k) => [k, z.array(anyResultDoc).optional()])),
);
const envelopeDoc = z.looseObject({
  ...envelopeSchema.shape,
  results: z.array(canonicalResultSchema).optional(),
  guardrail_results: bundleDoc.optional(),
});

export const guardrailsDocSchema = z.union([envelopeDoc, z.array(anyResultDoc), bundleDoc, anyResultDoc]);

export const guardrailsReplySchema = z.object({
  traceId: z.string().describe('The trace the results went into'),
  linkedBy: z
    .enum(['trace', 'response', 'request', 'none'])
    .describe('How: the given trace id, a response or request id the proxy recorded, or none (a trace of their own)'),
  spans: z.array(
    z.object({
      spanId: z.string(),
      parentSpanId: z.string(),
      guardrailName: z.string(),
      stage: z.string(),
      tripwireTriggered: z.boolean(),
      executionFailed: z.boolean(),
    }),
  ),
  tripwiresTriggered: z.number().int(),
});
