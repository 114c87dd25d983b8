/**
 * OpenAI Agents SDK tracing export → records (pure): `mapAgentsItem(item, ctx)` gives a span record
 * (`source: 'agents'`) for a `trace.span` item and a trace metadata record for a `trace` item.
 *
 * Every span: ids as sent (`trace_…`, `span_…`, parent `parent_id`, '' for a root); start and end from `started_at`
 * and `ended_at` (nanoseconds; one missing: the other; both: the receive time, marked `tracegate.time_source`);
 * `error` → status `error`, its message the status message, its `data` attribute `error.data`; Python's span
 * `metadata` → `agents.span.metadata`; the request's OpenAI-Organization, OpenAI-Project, OpenAI-Beta and
 * User-Agent headers → resource attributes `openai.organization`, `openai.project`, `openai.beta`,
 * `user_agent.original`. `agents.span_type` names the span_data type. A span_data field not listed below is kept as
 * `agents.span_data.<field>`, a span item field the SDKs do not send as `agents.span.<field>`.
 *
 * | span_data type | kind | name | fields |
 * |---|---|---|---|
 * | agent | agent | name | actionName and `gen_ai.agent.name` = name; `agents.handoffs`, `agents.tools`, `agents.output_type` |
 * | function | tool | name | input (the arguments) → prompt, output (the result) → response; `gen_ai.tool.name`; `agents.mcp_data` |
 * | generation | llm | model or `generation` | model, input/output messages → prompt/response text and `gen_ai.input.messages` / `gen_ai.output.messages` as sent; `agents.model_config`; usage → tokens (cache and reasoning counts as `gen_ai.usage.*`), `agents.usage`; cost from the price table |
 * | response | llm | `response` | response_id → requestId and `gen_ai.response.id`; usage (Python) → tokens, `agents.usage`. Kind `chain` and `tracegate.proxied` when tracegate's proxy recorded the call (markProxied): the proxy span holds its usage |
 * | handoff | chain | `handoff <from> → <to>` | `agents.handoff.from`, `agents.handoff.to` |
 * | guardrail | guardrail | name | `guardrail.name`, `guardrail.triggered`, `guardrail.tripwire_triggered` |
 * | custom (task, turn: `data.sdk_span_type`) | chain | `task (<name>)`, `turn <n> (<agent>)` | data.usage → tokens (not summed: kind chain), `agents.custom.data` |
 * | custom (other) | other | name | `agents.custom.data` |
 * | mcp_tools | tool | `mcp list_tools <server>` | `agents.mcp.server`, `agents.mcp.result` |
 * | transcription | llm | model or `transcription` | input `{data, format}` → `agents.input` (audio kept as sent), output → response; `agents.model_config` |
 * | speech | llm | model or `speech` | input → prompt, output `{data, format}` → `agents.output`; `agents.model_config`, `agents.first_content_at` |
 * | speech_group | chain | `speech_group` | input → prompt |
 * | anything else | other | the type | every field as `agents.span_data.<field>` |
 *
 * Prompt and response are cut to `maxStringBytes`; attribute strings to `maxStringBytes` for message and data
 * fields and `maxAttributeValueBytes` otherwise; each cut is listed in `tracegate.truncated`.
 */
import type { TraceMetaRecord } from '../core/enrichment-records.ts';
import {
  type Attributes,
  type AttrValue,
  emptySpan,
  isTrainable,
  MAX_TOKENS,
  msToNs,
  nsDiffMs,
  type SpanKind,
  type SpanRecord,
} from '../core/record.ts';
import { priceUsd } from '../processors/cost.ts';
import { cutMarked, TRUNCATED_ATTR, truncateUtf8 } from '../protocols/otlp/normalized.ts';
import { type AgentsItem, isoToNs, type SpanItem, type TraceItem } from './agents-schema.ts';

export interface AgentsMapContext {
  workspaceId: string;
  receivedAtMs: number;
  /** Request headers kept with every record: OpenAI-Organization, OpenAI-Project, OpenAI-Beta, User-Agent. */
  headers: { organization: string; project: string; beta: string; userAgent: string };
  limits: { maxStringBytes: number; maxAttributeValueBytes: number };
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export function mapAgentsItem(item: AgentsItem, ctx: AgentsMapContext): SpanRecord | TraceMetaRecord {
  return item.object === 'trace' ? traceMeta(item, ctx) : mapSpan(item, ctx);
}

/** The trace item: no times (it is sent when the trace starts). The SDK's per-run tracing key is never kept. */
function traceMeta(t: TraceItem, ctx: AgentsMapContext): TraceMetaRecord {
  const metadata = isObj(t.metadata) ? { ...t.metadata } : null;
  return {
    recordType: 'trace_meta',
    workspaceId: ctx.workspaceId,
    traceId: t.id,
    workflowName: truncateUtf8(str(t.workflow_name), ctx.limits.maxAttributeValueBytes),
    groupId: truncateUtf8(str(t.group_id), ctx.limits.maxAttributeValueBytes),
    metadata: metadata && Object.keys(metadata).length ? jsonCut(metadata, ctx.limits.maxStringBytes) : '',
    organization: ctx.headers.organization,
    project: ctx.headers.project,
    source: 'agents',
    updatedAtMs: ctx.receivedAtMs,
  };
}

/** JSON of `v`, its strings cut so that the whole stays within about `max` bytes. */
function jsonCut(v: Json, max: number): string {
  const s = JSON.stringify(v);
  return s.length * 3 <= max || Buffer.byteLength(s) <= max ? s : JSON.stringify(limitStrings(v, 1024));
}

/** A copy of `v` with every string longer than `max` UTF-8 bytes cut; `cut` is set when one was. */
function limitStrings(v: unknown, max: number, cut?: { any: boolean }): unknown {
  if (typeof v === 'string') {
    if (v.length * 3 <= max || Buffer.byteLength(v) <= max) return v;
    if (cut) cut.any = true;
    return truncateUtf8(v, max);
  }
  if (Array.isArray(v)) return v.map((x) => limitStrings(x, max, cut));
  if (isObj(v)) {
    const out: Json = {};
    for (const k of Object.keys(v)) out[k] = limitStrings(v[k], max, cut);
    return out;
  }
  return v;
}

/** Attributes whose strings are content (messages, tool data) and get the long-text limit. */
const CONTENT_ATTRS = new Set([
  'gen_ai.input.messages',
  'gen_ai.output.messages',
  'agents.custom.data',
  'agents.mcp_data',
  'agents.input',
  'agents.output',
  'error.data',
  'agents.span.metadata',
]);

class SpanBuilder {
  readonly r: SpanRecord;
  readonly a: Attributes = {};
  private readonly ctx: AgentsMapContext;
  private readonly truncated: string[] = [];

  constructor(item: SpanItem, ctx: AgentsMapContext) {
    this.ctx = ctx;
    const r = emptySpan(ctx.workspaceId, 'agents');
    r.traceId = item.trace_id;
    r.spanId = item.id;
    r.parentSpanId = item.parent_id ?? '';
    r.ingestedAtMs = ctx.receivedAtMs;
    this.r = r;
    this.times(item);
  }

  private times(item: SpanItem): void {
    const start = item.started_at ? isoToNs(item.started_at) : null;
    const end = item.ended_at ? isoToNs(item.ended_at) : null;
    if (start === null && end === null) this.a['tracegate.time_source'] = 'received';
    const received = msToNs(this.ctx.receivedAtMs);
    this.r.startTimeNs = start ?? end ?? received;
    this.r.endTimeNs = end ?? start ?? received;
    this.r.durationMs = nsDiffMs(this.r.startTimeNs, this.r.endTimeNs);
  }

  /** An attribute, its strings cut to the limit of its kind (listed in tracegate.truncated when cut). */
  set(key: string, value: unknown): void {
    if (value === undefined || value === null) return;
    const max = CONTENT_ATTRS.has(key) ? this.ctx.limits.maxStringBytes : this.ctx.limits.maxAttributeValueBytes;
    const cut = { any: false };
    this.a[key] = limitStrings(value, max, cut) as AttrValue;
    if (cut.any) this.truncated.push(key);
  }

  text(field: 'prompt' | 'response', value: string): void {
    this.r[field] = cutMarked(value, this.ctx.limits.maxStringBytes, this.a, `tracegate.${field}`);
  }

  finish(): SpanRecord {
    if (this.truncated.length) {
      const prev = this.a[TRUNCATED_ATTR];
      this.a[TRUNCATED_ATTR] = [...(Array.isArray(prev) ? prev : []), ...this.truncated];
    }
    this.r.attributes = this.a;
    this.r.trainable = isTrainable(this.r);
    return this.r;
  }
}

/** A span item's own fields; any other is kept as `agents.span.<field>` (a per-run tracing key never is). */
const SPAN_KEYS = new Set([
  'object',
  'id',
  'trace_id',
  'parent_id',
  'started_at',
  'ended_at',
  'span_data',
  'error',
  'metadata',
  'tracing_api_key',
]);

function mapSpan(item: SpanItem, ctx: AgentsMapContext): SpanRecord {
  const b = new SpanBuilder(item, ctx);
  const { r } = b;
  const data = item.span_data as Json & { type: string };
  b.set('agents.span_type', data.type);
  const used = (MAPPERS[data.type] ?? other)(b, data);
  for (const k of Object.keys(data)) if (k !== 'type' && !used.includes(k)) b.set(`agents.span_data.${k}`, data[k]);
  if (item.error) {
    r.status = 'error';
    r.statusMessage = truncateUtf8(item.error.message, ctx.limits.maxAttributeValueBytes);
    b.set('error.data', item.error.data);
  }
  b.set('agents.span.metadata', item.metadata);
  for (const k of Object.keys(item)) if (!SPAN_KEYS.has(k)) b.set(`agents.span.${k}`, (item as Json)[k]);
  r.resourceAttributes = resource(ctx);
  return b.finish();
}

function resource(ctx: AgentsMapContext): Attributes {
  const out: Attributes = { 'telemetry.sdk.name': 'openai-agents' };
  const h = ctx.headers;
  if (h.organization) out['openai.organization'] = h.organization;
  if (h.project) out['openai.project'] = h.project;
  if (h.beta) out['openai.beta'] = h.beta;
  if (h.userAgent) out['user_agent.original'] = h.userAgent;
  return out;
}

/** Fills the record from one span_data type; returns the fields it used (the rest become attributes). */
type TypeMapper = (b: SpanBuilder, d: Json) => string[];

const kindName = (b: SpanBuilder, kind: SpanKind, name: string) => {
  b.r.kind = kind;
  b.r.name = name;
};

const agent: TypeMapper = (b, d) => {
  kindName(b, 'agent', str(d.name));
  b.r.actionName = str(d.name);
  b.set('gen_ai.agent.name', d.name);
  b.set('agents.handoffs', d.handoffs);
  b.set('agents.tools', d.tools);
  b.set('agents.output_type', d.output_type);
  return ['name', 'handoffs', 'tools', 'output_type'];
};

const fn: TypeMapper = (b, d) => {
  kindName(b, 'tool', str(d.name));
  b.r.actionName = str(d.name);
  b.set('gen_ai.operation.name', 'execute_tool');
  b.set('gen_ai.tool.name', d.name);
  b.text('prompt', asText(d.input));
  b.text('response', asText(d.output));
  b.set('agents.mcp_data', d.mcp_data);
  return ['name', 'input', 'output', 'mcp_data'];
};

const generation: TypeMapper = (b, d) => {
  kindName(b, 'llm', str(d.model) || 'generation');
  b.r.model = str(d.model);
  b.set('gen_ai.operation.name', 'chat');
  if (b.r.model) b.set('gen_ai.request.model', b.r.model);
  const input = Array.isArray(d.input) ? d.input : [];
  const output = Array.isArray(d.output) ? d.output : [];
  b.text('prompt', promptText(input));
  b.text('response', responseText(output));
  b.set('gen_ai.input.messages', d.input);
  b.set('gen_ai.output.messages', d.output);
  b.set('agents.model_config', d.model_config);
  usage(b, d.usage, true);
  return ['input', 'output', 'model', 'model_config', 'usage'];
};

const response: TypeMapper = (b, d) => {
  kindName(b, 'llm', 'response');
  const id = str(d.response_id);
  b.r.requestId = id;
  b.set('gen_ai.operation.name', 'responses');
  if (id) b.set('gen_ai.response.id', id);
  usage(b, d.usage, false);
  return ['response_id', 'usage'];
};

const handoff: TypeMapper = (b, d) => {
  kindName(b, 'chain', `handoff ${str(d.from_agent) || '?'} → ${str(d.to_agent) || '?'}`);
  b.set('agents.handoff.from', d.from_agent);
  b.set('agents.handoff.to', d.to_agent);
  return ['from_agent', 'to_agent'];
};

const guardrail: TypeMapper = (b, d) => {
  kindName(b, 'guardrail', str(d.name));
  b.set('guardrail.name', d.name);
  b.set('guardrail.triggered', d.triggered === true);
  b.set('guardrail.tripwire_triggered', d.triggered === true);
  return ['name', 'triggered'];
};

const custom: TypeMapper = (b, d) => {
  const data = isObj(d.data) ? d.data : {};
  const sdk = str(data.sdk_span_type);
  if (sdk === 'task') kindName(b, 'chain', `task${typeof data.name === 'string' ? ` (${data.name})` : ''}`);
  else if (sdk === 'turn')
    kindName(b, 'chain', `turn ${typeof data.turn === 'number' ? data.turn : '?'}${agentOf(data)}`);
  else kindName(b, 'other', str(d.name));
  if (sdk === 'turn' && typeof data.agent_name === 'string') b.r.actionName = data.agent_name;
  if (sdk) usage(b, data.usage, false);
  b.set('agents.custom.name', d.name);
  b.set('agents.custom.data', d.data);
  return ['name', 'data'];
};
const agentOf = (data: Json) => (typeof data.agent_name === 'string' ? ` (${data.agent_name})` : '');

const mcpTools: TypeMapper = (b, d) => {
  kindName(b, 'tool', `mcp list_tools${str(d.server) ? ` ${str(d.server)}` : ''}`);
  b.set('agents.mcp.server', d.server);
  b.set('agents.mcp.result', d.result);
  return ['server', 'result'];
};

const transcription: TypeMapper = (b, d) => {
  kindName(b, 'llm', str(d.model) || 'transcription');
  b.r.model = str(d.model);
  b.set('agents.input', d.input);
  b.text('response', str(d.output));
  b.set('agents.model_config', d.model_config);
  return ['input', 'output', 'model', 'model_config'];
};

const speech: TypeMapper = (b, d) => {
  kindName(b, 'llm', str(d.model) || 'speech');
  b.r.model = str(d.model);
  b.text('prompt', str(d.input));
  b.set('agents.output', d.output);
  b.set('agents.model_config', d.model_config);
  b.set('agents.first_content_at', d.first_content_at);
  return ['input', 'output', 'model', 'model_config', 'first_content_at'];
};

const speechGroup: TypeMapper = (b, d) => {
  kindName(b, 'chain', 'speech_group');
  b.text('prompt', str(d.input));
  return ['input'];
};

const other: TypeMapper = (b, d) => {
  kindName(b, 'other', str(d.type));
  return [];
};

const MAPPERS: Record<string, TypeMapper> = {
  agent,
  function: fn,
  generation,
  response,
  handoff,
  guardrail,
  custom,
  mcp_tools: mcpTools,
  transcription,
  speech,
  speech_group: speechGroup,
};

// ---- usage

const tok = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) ? Math.min(Math.max(0, Math.round(v)), MAX_TOKENS) : undefined;
const first = (...vs: unknown[]) => {
  for (const v of vs) {
    const n = tok(v);
    if (n !== undefined) return n;
  }
  return undefined;
};
const sub = (o: unknown, k: string): Json => (isObj(o) && isObj(o[k]) ? (o[k] as Json) : {});

/**
 * Usage in any of the SDKs' shapes: Responses/Python (`input_tokens_details`, `output_tokens_details`), JS
 * generation (the rest moved under `details`), Chat Completions (`prompt_tokens`), task/turn (`cached_input_tokens`).
 * `price`: a model call whose model is known is priced here (cache reads at their rate).
 */
function usage(b: SpanBuilder, u: unknown, price: boolean): void {
  if (!isObj(u)) return;
  const { r } = b;
  const details = sub(u, 'details');
  const input = first(u.input_tokens, u.prompt_tokens, details.input_tokens) ?? 0;
  const output = first(u.output_tokens, u.completion_tokens, details.output_tokens) ?? 0;
  r.promptTokens = input;
  r.completionTokens = output;
  r.totalTokens = first(u.total_tokens, details.total_tokens) ?? Math.min(input + output, MAX_TOKENS);
  const cacheRead = first(
    sub(u, 'input_tokens_details').cached_tokens,
    sub(details, 'input_tokens_details').cached_tokens,
    u.cached_input_tokens,
    details.cached_input_tokens,
  );
  const cacheWrite = first(
    sub(u, 'input_tokens_details').cache_write_tokens,
    sub(details, 'input_tokens_details').cache_write_tokens,
    u.cache_write_input_tokens,
    details.cache_write_input_tokens,
  );
  const reasoning = first(
    sub(u, 'output_tokens_details').reasoning_tokens,
    sub(details, 'output_tokens_details').reasoning_tokens,
  );
  if (cacheRead !== undefined) b.set('gen_ai.usage.cache_read.input_tokens', cacheRead);
  if (cacheWrite) b.set('gen_ai.usage.cache_creation.input_tokens', cacheWrite);
  if (reasoning !== undefined) b.set('gen_ai.usage.reasoning.output_tokens', reasoning);
  const requests = first(u.requests, details.requests);
  if (requests !== undefined) b.set('gen_ai.usage.requests', requests);
  b.set('agents.usage', u);
  if (!price || !r.model || (input === 0 && output === 0)) return;
  r.costUsd = priceUsd(r.model, r.provider, { input, output, cacheRead: cacheRead ?? 0, cacheWrite: cacheWrite ?? 0 });
  b.set('tracegate.cost_source', r.costUsd > 0 ? 'price_table' : 'unpriced');
}

// ---- text

/** A function's input or output as text: strings as sent, anything else as JSON. */
function asText(v: unknown): string {
  if (v === undefined || v === null) return '';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

const TEXT_PARTS = new Set(['text', 'input_text', 'output_text', 'refusal']);
const MEDIA: Record<string, string> = {
  image_url: '[image]',
  input_image: '[image]',
  input_audio: '[audio]',
  input_file: '[file]',
  file: '[file]',
};

function partsText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p) => {
      if (typeof p === 'string') return p;
      if (!isObj(p)) return '';
      const type = str(p.type);
      if (TEXT_PARTS.has(type) || (!type && typeof p.text === 'string')) return str(p.text) || str(p.refusal);
      return MEDIA[type] ?? '';
    })
    .filter(Boolean)
    .join('\n');
}

/** Role and text of one message or item (Chat Completions messages, Responses items); tool calls have no text. */
function itemText(m: unknown): { role: string; text: string }[] {
  if (typeof m === 'string') return [{ role: 'user', text: m }];
  if (!isObj(m)) return [];
  if (Array.isArray(m.choices)) return m.choices.flatMap((c) => (isObj(c) ? itemText(c.message) : []));
  if (m.type === 'function_call_output') return [{ role: 'tool', text: asText(m.output) }];
  if (m.type === 'message' || m.role !== undefined || m.content !== undefined)
    return [{ role: str(m.role) || 'user', text: partsText(m.content) }];
  return [];
}

/** One `role: text` line per message, as the OTLP mapper renders prompts. */
function promptText(items: unknown[]): string {
  return items
    .flatMap(itemText)
    .filter((m) => m.text)
    .map((m) => `${m.role}: ${m.text}`)
    .join('\n');
}

/** The text the model answered, its messages joined by newlines. */
function responseText(items: unknown[]): string {
  return items
    .flatMap(itemText)
    .map((m) => m.text)
    .filter(Boolean)
    .join('\n');
}

// ---- the proxied call

/**
 * A response span whose call tracegate's proxy recorded (same response id, same workspace): that proxy span is the
 * model call, with its text, usage and cost. This one stays in the agent's tree as kind `chain` (not summed, as an
 * agent span over its calls is not), pointing at it: the call is counted once in usage and cost.
 */
export function markProxied(span: SpanRecord, call: { traceId: string; spanId: string }): SpanRecord {
  span.kind = 'chain';
  span.attributes['tracegate.proxied'] = true;
  span.attributes['tracegate.proxy.trace_id'] = call.traceId;
  span.attributes['tracegate.proxy.span_id'] = call.spanId;
  if (
    span.attributes['tracegate.cost_source'] === 'price_table' ||
    span.attributes['tracegate.cost_source'] === 'unpriced'
  ) {
    span.costUsd = 0;
    delete span.attributes['tracegate.cost_source'];
  }
  return span;
}

/** The response id of an agents `response` span ('' for other spans). */
export function responseIdOf(span: SpanRecord): string {
  return span.source === 'agents' && span.attributes['agents.span_type'] === 'response' ? span.requestId : '';
}
