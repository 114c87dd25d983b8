// POST /api/ingest/tool-calls: one tool call → one tool span, `execute_tool {name}` with the OpenTelemetry GenAI
// `gen_ai.tool.*` attributes (the execute_tool span of the GenAI semantic conventions). Pure: where the call goes (a
// trace named by the caller, the trace of a response the proxy recorded, or a new one) is decided before mapping.
// Arguments and results are span attributes (JSON text), so governance scans and redacts them as it does prompts;
// past the payload limit they are cut and their SHA-256 kept.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { type Attributes, type AttrValue, emptySpan, type SpanRecord } from '../core/record.ts';
import { canonicalJson } from '../processors/canonical.ts';
import {
  canonicalFields,
  type FieldIssue,
  idString,
  jsonObject,
  parseTraceparent,
  timeMs,
  timeNs,
  timeValue,
  traceparentString,
  zodIssues,
} from './signal-fields.ts';

export interface ToolCallLimits {
  /** Arguments and results longer than this (UTF-8 bytes of their JSON text) are cut (TRACEGATE_MAX_TOOL_PAYLOAD_BYTES). */
  maxPayloadBytes: number;
  /** name, description, error message (TRACEGATE_MAX_STRING_BYTES). */
  maxStringBytes: number;
}

/** Canonical field names; each is also taken in camelCase. */
export const TOOL_CALL_FIELDS = [
  'id',
  'name',
  'type',
  'description',
  'arguments',
  'result',
  'error',
  'status',
  'started_at',
  'ended_at',
  'duration_ms',
  'trace_id',
  'traceparent',
  'parent_span_id',
  'span_id',
  'response_id',
  'session_id',
  'user_id',
  'metadata',
] as const;
/** Other names peers use for the model's tool-call id (OpenAI Responses' function_call.call_id among them). */
const ALIASES = { id: ['call_id', 'callId', 'tool_call_id', 'toolCallId'] };

const STATUS = {
  ok: 'completed',
  success: 'completed',
  completed: 'completed',
  error: 'error',
  failed: 'error',
} as const;

export function toolCallSchema(limits: ToolCallLimits) {
  const text = (max: number) =>
    z
      .string()
      .max(max)
      .refine((v) => v.length * 3 <= max || Buffer.byteLength(v) <= max, {
        message: `longer than ${max} bytes (UTF-8)`,
      });
  const long = text(limits.maxStringBytes);
  return z
    .object({
      name: z
        .string({
          error: (i) => (i.input === undefined ? 'required: the name of the tool called' : 'must be a string'),
        })
        .min(1)
        .max(256)
        .describe('The tool (gen_ai.tool.name); required'),
      id: idString.optional().describe("The model's tool-call id (gen_ai.tool.call.id); also call_id, tool_call_id"),
      type: z.string().max(64).optional().describe('function, extension, datastore, mcp, …'),
      description: long.optional(),
      arguments: z
        .union([z.string(), jsonObject, z.array(z.unknown())])
        .optional()
        .describe('An object, or its JSON text'),
      result: z.unknown().optional().describe('Any JSON value; left out on error'),
      error: z
        .union([
          long,
          z.object({
            type: z.string().max(256).optional(),
            message: long.optional(),
            data: z.unknown().optional(),
          }),
        ])
        .optional()
        .describe('{ type, message, data }, or a message'),
      status: z
        .enum(Object.keys(STATUS) as [keyof typeof STATUS, ...(keyof typeof STATUS)[]])
        .optional()
        .describe('ok | error (also success, completed, failed); error when `error` is given'),
      started_at: timeValue.optional(),
      ended_at: timeValue.optional(),
      duration_ms: z
        .number()
        .min(0)
        .max(86_400_000 * 7)
        .optional(),
      trace_id: idString.optional().describe('The trace to add the call to'),
      traceparent: traceparentString.optional().describe('W3C traceparent: trace id and parent span id'),
      parent_span_id: idString.optional(),
      span_id: idString.optional().describe('Derived from the trace and call id (or the call) when absent'),
      response_id: idString
        .optional()
        .describe('A provider response id the proxy recorded: the call joins its trace (when no trace id is given)'),
      session_id: z.string().max(256).optional(),
      user_id: z.string().max(256).optional(),
      metadata: jsonObject.optional(),
    })
    .refine((c) => !(c.trace_id && c.traceparent && parseTraceparent(c.traceparent).traceId !== c.trace_id), {
      message: 'trace_id differs from the traceparent trace id',
      path: ['trace_id'],
    })
    .refine(
      (c) => c.started_at === undefined || c.ended_at === undefined || timeMs(c.ended_at) >= timeMs(c.started_at),
      { message: 'ended_at is before started_at', path: ['ended_at'] },
    );
}

export type ToolCall = z.output<ReturnType<typeof toolCallSchema>> & Record<string, unknown>;

/** One request item, its fields under their canonical names, validated; or the issues (fields as the client named them). */
export function parseToolCall(
  schema: ReturnType<typeof toolCallSchema>,
  item: unknown,
  prefix = '',
): { ok: true; call: ToolCall } | { ok: false; issues: FieldIssue[] } {
  if (typeof item !== 'object' || item === null || Array.isArray(item))
    return {
      ok: false,
      issues: [{ field: prefix || '(body)', code: 'invalid_type', message: 'a tool call is an object' }],
    };
  const { item: fields, spelled, issues } = canonicalFields(item as Record<string, unknown>, TOOL_CALL_FIELDS, ALIASES);
  const parsed = schema.safeParse(fields);
  if (!parsed.success) return { ok: false, issues: [...issues, ...zodIssues(parsed.error, spelled, prefix)] };
  if (issues.length) return { ok: false, issues: issues.map((i) => ({ ...i, field: `${prefix}${i.field}` })) };
  // Unknown fields are kept (as attributes): the parsed known ones over the item as sent.
  return { ok: true, call: { ...fields, ...parsed.data } as ToolCall };
}

/** The trace a call names itself (trace_id, else traceparent), with the parent the traceparent gives. */
export function namedTrace(call: ToolCall): { traceId: string; parentSpanId: string } | null {
  const tp = call.traceparent ? parseTraceparent(call.traceparent) : null;
  if (call.trace_id) return { traceId: call.trace_id, parentSpanId: tp?.parentSpanId ?? '' };
  return tp;
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** A call without a span id gets one from its workspace, trace and call id (or the whole call): a replay collapses. */
function derivedId(workspaceId: string, traceId: string, call: ToolCall, length: number): string {
  const identity = call.id ?? `content:${sha256(canonicalJson(call))}`;
  return sha256(`tool_call\n${workspaceId}\n${traceId}\n${identity}`).slice(0, length);
}

/** JSON text of a payload (a string is taken as it is: it usually is JSON text already), cut to `max` bytes. */
function payload(v: unknown, max: number): { text: string; bytes: number; sha256: string; cut: boolean } {
  const text = typeof v === 'string' ? v : (JSON.stringify(v) ?? 'null');
  const buf = Buffer.from(text);
  if (buf.length <= max) return { text, bytes: buf.length, sha256: '', cut: false };
  // Cut on a character boundary: a partial UTF-8 sequence at the end decodes to U+FFFD, dropped.
  const head = buf
    .subarray(0, max)
    .toString('utf8')
    .replace(/\uFFFD+$/, '');
  return { text: head, bytes: buf.length, sha256: createHash('sha256').update(buf).digest('hex'), cut: true };
}

/** The span times in ns: what the call gives, the rest from the duration and the receive time. */
function times(call: ToolCall, now: number): { start: bigint; end: bigint } {
  const d = call.duration_ms === undefined ? undefined : BigInt(Math.round(call.duration_ms * 1e6));
  const started = call.started_at === undefined ? undefined : timeNs(call.started_at);
  const ended = call.ended_at === undefined ? undefined : timeNs(call.ended_at);
  const end = ended ?? (started !== undefined ? (d !== undefined ? started + d : started) : BigInt(now) * 1_000_000n);
  const start = started ?? (d !== undefined ? (end > d ? end - d : 0n) : end);
  return { start, end };
}

const KNOWN: ReadonlySet<string> = new Set(TOOL_CALL_FIELDS);

/**
 * The call's span. `link`: the trace it joins (and the parent span there), or null for a trace of its own (its id
 * derived like the span id, so a replay collapses).
 */
export function mapToolCall(
  call: ToolCall,
  workspaceId: string,
  now: number,
  link: { traceId: string; parentSpanId: string } | null,
  limits: ToolCallLimits,
): SpanRecord {
  const r = emptySpan(workspaceId, 'tool_call');
  r.traceId = link?.traceId ?? derivedId(workspaceId, '', call, 32);
  r.spanId = call.span_id ?? derivedId(workspaceId, r.traceId, call, 16);
  r.parentSpanId = call.parent_span_id ?? link?.parentSpanId ?? '';
  r.name = `execute_tool ${call.name}`;
  r.kind = 'tool';
  const { start, end } = times(call, now);
  r.startTimeNs = start.toString();
  r.endTimeNs = end.toString();
  r.durationMs = end > start ? Number(end - start) / 1e6 : 0;
  const error = typeof call.error === 'string' ? { message: call.error } : call.error;
  r.status = error ? 'error' : STATUS[call.status ?? 'ok'];
  r.statusMessage = error?.message ?? '';
  r.ingestedAtMs = now;

  const a: Attributes = {};
  // Nothing the client sent is thrown away: unknown fields are attributes (tracegate.* is the server's namespace).
  for (const [k, v] of Object.entries(call))
    if (!KNOWN.has(k) && v !== undefined) a[k.startsWith('tracegate.') ? `client.${k}` : k] = v as AttrValue;
  if (call.metadata) a.metadata = call.metadata as AttrValue;
  a['gen_ai.operation.name'] = 'execute_tool';
  a['gen_ai.tool.name'] = call.name;
  a['openinference.span.kind'] = 'TOOL';
  if (call.id) a['gen_ai.tool.call.id'] = call.id;
  if (call.type) a['gen_ai.tool.type'] = call.type;
  if (call.description) a['gen_ai.tool.description'] = call.description;
  const put = (attr: string, name: string, v: unknown) => {
    const p = payload(v, limits.maxPayloadBytes);
    a[attr] = p.text;
    if (!p.cut) return;
    a[`tracegate.tool.${name}_truncated`] = true;
    a[`tracegate.tool.${name}_bytes`] = p.bytes;
    a[`tracegate.tool.${name}_sha256`] = p.sha256;
  };
  if (call.arguments !== undefined) put('gen_ai.tool.call.arguments', 'arguments', call.arguments);
  if (call.result !== undefined) put('gen_ai.tool.call.result', 'result', call.result);
  if (error?.type) a['error.type'] = error.type;
  else if (error) a['error.type'] = '_OTHER';
  if (error?.data !== undefined) put('tracegate.tool.error_data', 'error_data', error.data);
  if (call.session_id) {
    a['session.id'] = call.session_id;
    a['gen_ai.conversation.id'] = call.session_id;
  }
  if (call.user_id) a['user.id'] = call.user_id;
  if (call.response_id) a['tracegate.tool.response_id'] = call.response_id;
  r.attributes = a;
  return r;
}
