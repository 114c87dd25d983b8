/**
 * OTLP → SpanRecord mapper (pure): `mapOtlp(request, workspaceId, ingestedAtMs, limits)`.
 *
 * EVERY span becomes a record (`source: 'otlp'`), LLM or not. Generic OTel data:
 *
 * | record field            | from                                                                 |
 * |-------------------------|----------------------------------------------------------------------|
 * | traceId/spanId/parent   | span ids (lowercase hex; '' parent = root)                           |
 * | name, start/end, durMs  | span name, start/end time (ns strings), end − start in ms            |
 * | status                  | status.code ERROR → 'error'; UNSET/OK → 'completed'                  |
 * | statusMessage           | status.message, else (on error) `error.type`                         |
 * | resourceAttributes      | resource attributes (copied per record)                              |
 * | attributes              | span attributes + `otel.span_kind` (internal/server/client/producer/ |
 * |                         | consumer/unspecified), `otel.scope.name`, `otel.scope.version`,      |
 * |                         | `otel.scope.attributes`, `otel.status_code` (ok/error, when set),    |
 * |                         | `otel.links` [{traceId, spanId, traceState?, attributes?}],          |
 * |                         | `otel.trace_state`, `otel.dropped_{attributes,events,links}_count`   |
 * |                         | (when > 0), `tracegate.truncated` (keys cut to the size limits);     |
 * |                         | a client's own `tracegate.x` arrives as `client.tracegate.x`         |
 * |                         | (renamed by the decoder, also in resource/scope/event/link sets)     |
 * | events                  | span events {name, timeNs, attributes}                               |
 * | environment             | resource `deployment.environment.name` → `deployment.environment`    |
 * |                         | → the same keys on the span                                          |
 *
 * LLM fields — first match wins, left to right. "A" = span attributes, overlaid on the
 * attributes of a `gen_ai.client.inference.operation.details` event when there is one
 * (span attributes win).
 *
 * | field        | precedence                                                                                   |
 * |--------------|----------------------------------------------------------------------------------------------|
 * | kind         | 1 `gen_ai.operation.name`: chat/text_completion/generate_content/completion/generate → llm;  |
 * |              |   embeddings → embedding; execute_tool → tool; invoke_agent/create_agent → agent;            |
 * |              |   invoke_workflow/plan/agent_step → chain; retrieval/rerank → retrieval                       |
 * |              | 2 `openinference.span.kind`: LLM → llm, EMBEDDING → embedding, CHAIN → chain,                |
 * |              |   RETRIEVER/RERANKER → retrieval, TOOL → tool, AGENT → agent, GUARDRAIL/EVALUATOR → guardrail |
 * |              | 3 `traceloop.span.kind`: workflow/task → chain, agent → agent, tool → tool;                  |
 * |              |   `llm.request.type`: chat/completion → llm, embedding → embedding, rerank → retrieval       |
 * |              | 4 Vercel `ai.operationId` (or span name `ai.*`): *.doGenerate/*.doStream → llm,              |
 * |              |   *.doEmbed → embedding, ai.toolCall → tool, other ai.* (generateText, streamText, embed…)   |
 * |              |   → chain                                                                                    |
 * |              | 5 `gen_ai.tool.name` / `gen_ai.tool.call.id` → tool                                          |
 * |              | 6 a model attribute or LLM messages present → llm                                           |
 * |              | 7 `gen_ai.agent.name` → agent; otherwise other                                              |
 * |              | then: an llm/embedding span with no more usage than the llm/embedding spans directly below   |
 * |              |   it in the same request → chain, `tracegate.wrapper: true`, computed cost dropped (its usage |
 * |              |   is theirs, and sums count model spans only; see markWrappers)                              |
 * | model        | response models first: gen_ai.response.model → ai.response.model → llm.response.model_name → |
 * |              | llm.model_name → embedding.model_name → gen_ai.request.model → llm.request.model_name →      |
 * |              | ai.model.id                                                                                  |
 * | provider     | gen_ai.provider.name → ai.model.provider (part before the first '.', e.g. "openai.chat" →    |
 * |              | "openai"; Vercel also copies that raw value into gen_ai.system) → gen_ai.system →            |
 * |              | llm.provider → llm.system; lower-cased                                                       |
 * | promptTokens | gen_ai.usage.input_tokens → gen_ai.usage.prompt_tokens → llm.token_count.prompt →            |
 * |              | ai.usage.inputTokens → ai.usage.promptTokens → ai.usage.tokens (AI SDK embeddings)           |
 * | completion…  | gen_ai.usage.output_tokens → gen_ai.usage.completion_tokens → llm.token_count.completion →   |
 * |              | ai.usage.outputTokens → ai.usage.completionTokens                                            |
 * | totalTokens  | gen_ai.usage.total_tokens → llm.usage.total_tokens → llm.token_count.total →                 |
 * |              | ai.usage.totalTokens → promptTokens + completionTokens                                       |
 * | (cache, for  | read: gen_ai.usage.cache_read.input_tokens → gen_ai.usage.cache_read_input_tokens →          |
 * |  pricing)    | llm.token_count.prompt_details.cache_read → ai.usage.inputTokenDetails.cacheReadTokens →     |
 * |              | ai.usage.cachedInputTokens; write: gen_ai.usage.cache_creation.input_tokens →                |
 * |              | gen_ai.usage.cache_write.input_tokens → gen_ai.usage.cache_creation_input_tokens →           |
 * |              | llm.token_count.prompt_details.cache_write → ai.usage.inputTokenDetails.cacheWriteTokens     |
 * |              | (reasoning tokens are part of output tokens and need no separate handling)                  |
 * | costUsd      | llm.cost.total → gen_ai.usage.cost → llm.cost.prompt + llm.cost.completion → for kind        |
 * |              | llm/embedding only: priceUsd(model, provider, tokens) (0 if unknown/local) → 0. Wrapper     |
 * |              | spans (agent, chain) keep their tokens but get no computed cost, so sums don't double count. |
 * | finishReason | gen_ai.response.finish_reasons (distinct values joined with ',') → llm.finish_reason →       |
 * |              | gen_ai.completion.N.finish_reason → ai.response.finishReason → output message finish_reason |
 * |              | → gen_ai.choice event finish_reason                                                          |
 * | requestId    | gen_ai.response.id → ai.response.id                                                          |
 * | actionName   | (tool spans first: gen_ai.tool.name → tool.name → ai.toolCall.name → traceloop.entity.name)  |
 * |              | → gen_ai.agent.name →                                                                        |
 * |              | gen_ai.workflow.name → traceloop.workflow.name → ai.telemetry.functionId → agent.name        |
 * | prompt       | gen_ai.system_instructions (as a leading `system:` line, whatever the source below) +       |
 * |              | 1 gen_ai.input.messages (structured or JSON string)                                          |
 * |              | 2 legacy events gen_ai.{system,user,assistant,tool}.message (in order)                       |
 * |              | 3 llm.input_messages.N.* (OpenInference; also an unflattened llm.input_messages array)       |
 * |              | 4 gen_ai.prompt.N.* (OpenLLMetry)                                                            |
 * |              | 5 ai.prompt.messages → ai.prompt → ai.value → ai.values (Vercel)                             |
 * |              | 6 input.value → traceloop.entity.input                                                       |
 * |              | 7 gen_ai.tool.call.arguments → ai.toolCall.args → ai.toolCall.input                          |
 * | response     | 1 gen_ai.output.messages  2 gen_ai.choice events  3 llm.output_messages.N.* (or array)       |
 * |              | 4 gen_ai.completion.N.*  5 ai.response.text → ai.response.object  6 output.value →           |
 * |              | traceloop.entity.output (only when no output messages were sent: messages holding only tool  |
 * |              | calls leave the response empty)  7 gen_ai.tool.call.result → ai.toolCall.result →            |
 * |              | ai.toolCall.output                                                                           |
 * | trainable    | isTrainable(record): completed with non-empty prompt and response                           |
 *
 * Text rendering: the prompt is one `role: text` line per message (system instructions first,
 * as `system: …`); the response is the plain text of the output message(s), joined by newlines.
 * Only text is rendered: tool-call parts are left out (they stay in the attributes); tool
 * results are rendered as the tool message's text; media parts become `[image]`, `[audio]`, ….
 * A JSON-string message attribute that does not parse (e.g. truncated) is used verbatim.
 * Prompt and response are cut to `maxStringBytes` (marked `tracegate.prompt` /
 * `tracegate.response` in `tracegate.truncated`).
 * Token values may be numbers or numeric strings; unknown `gen_ai.usage.*` keys are ignored
 * (they stay in the attributes), and a failure while extracting LLM fields keeps what was
 * extracted so far — it never drops the span.
 */
import {
  emptySpan,
  isTrainable,
  MAX_COST_USD,
  MAX_TOKENS,
  nsDiffMs,
  USAGE_KINDS,
  type Attributes,
  type AttrValue,
  type SpanEvent,
  type SpanKind,
  type SpanRecord,
} from '../core/record.ts';
import {
  cutMarked,
  type NormalizedRequest,
  type NormalizedResourceSpans,
  type NormalizedScope,
  type NormalizedScopeSpans,
  type NormalizedSpan,
  type OtlpLimits,
} from '../protocols/otlp/decode.ts';
import { priceUsd } from '../processors/cost.ts';
import { LOG_BODY, LOG_SIGNAL_ATTR } from '../protocols/otlp/logs.ts';

export type OtlpMapLimits = Pick<OtlpLimits, 'maxStringBytes'>;

const SPAN_KIND_NAMES = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'];

export function mapOtlp(
  req: NormalizedRequest,
  workspaceId: string,
  ingestedAtMs: number,
  limits: OtlpMapLimits,
): SpanRecord[] {
  const out: SpanRecord[] = [];
  for (const rs of req.resourceSpans) {
    const res = rs.resource.attributes;
    const env = str(res['deployment.environment.name']) || str(res['deployment.environment']);
    for (const ss of rs.scopeSpans) {
      const envelope = envelopeAttributes(rs, ss);
      for (const span of ss.spans)
        out.push(mapSpan(span, res, ss.scope, env, workspaceId, ingestedAtMs, limits, envelope));
    }
  }
  markWrappers(out);
  return out;
}

/**
 * A model span whose usage its model spans below (in the same request) already carry repeats it: the AI SDK's
 * `embeddings` operation span over its provider calls, a framework's instrumented LLM call over the client
 * library's. Trace and analytics sums count model spans only, so it would be counted twice: it becomes a wrapper
 * (kind chain, no computed cost, `tracegate.wrapper`). A model span with more usage than the model spans
 * directly below it together is a call of its own and stays as it is.
 */
function markWrappers(out: SpanRecord[]): void {
  let byId: Map<string, SpanRecord> | null = null;
  const below = new Map<SpanRecord, { tokens: number; cost: number }>();
  for (const r of out) {
    if (!USAGE_KINDS.has(r.kind) || r.parentSpanId === '' || (r.totalTokens === 0 && r.costUsd === 0)) continue;
    byId ??= new Map(out.map((x) => [`${x.traceId}:${x.spanId}`, x]));
    let parent = byId.get(`${r.traceId}:${r.parentSpanId}`);
    for (let hops = 0; parent !== undefined && hops < 64 && !USAGE_KINDS.has(parent.kind); hops++) {
      parent = parent.parentSpanId === '' ? undefined : byId.get(`${parent.traceId}:${parent.parentSpanId}`);
    }
    if (parent === undefined || !USAGE_KINDS.has(parent.kind)) continue;
    const sum = below.get(parent) ?? { tokens: 0, cost: 0 };
    sum.tokens += r.totalTokens;
    sum.cost += r.costUsd;
    below.set(parent, sum);
  }
  for (const [w, sum] of below) {
    if (w.totalTokens > sum.tokens || (w.totalTokens === 0 && sum.tokens === 0 && w.costUsd > sum.cost)) continue;
    w.kind = 'chain';
    w.attributes['tracegate.wrapper'] = true;
    const source = w.attributes['tracegate.cost_source'];
    if (source === 'price_table' || source === 'unpriced') {
      w.costUsd = 0;
      delete w.attributes['tracegate.cost_source'];
    }
  }
}

/** What the resource and scope envelopes carry besides attributes: schema URLs and dropped-attribute counts. */
function envelopeAttributes(rs: NormalizedResourceSpans, ss: NormalizedScopeSpans): Attributes {
  const e: Attributes = {};
  if (rs.schemaUrl) e['otel.resource.schema_url'] = rs.schemaUrl;
  if (rs.resource.droppedAttributesCount > 0)
    e['otel.resource.dropped_attributes_count'] = rs.resource.droppedAttributesCount;
  if (ss.schemaUrl) e['otel.scope.schema_url'] = ss.schemaUrl;
  if (ss.scope.droppedAttributesCount > 0) e['otel.scope.dropped_attributes_count'] = ss.scope.droppedAttributesCount;
  return e;
}

function mapSpan(
  span: NormalizedSpan,
  res: Attributes,
  scope: NormalizedScope,
  env: string,
  workspaceId: string,
  ingestedAtMs: number,
  limits: OtlpMapLimits,
  envelope: Attributes = {},
): SpanRecord {
  const r = emptySpan(workspaceId, 'otlp');
  const a = span.attributes;
  r.traceId = span.traceId;
  r.spanId = span.spanId;
  r.parentSpanId = span.parentSpanId;
  r.name = span.name;
  r.startTimeNs = span.startTimeNs;
  r.endTimeNs = span.endTimeNs;
  r.durationMs = durationMs(span.startTimeNs, span.endTimeNs);
  r.status = span.statusCode === 2 ? 'error' : 'completed';
  r.statusMessage = span.statusMessage || (span.statusCode === 2 ? str(a['error.type']) : '');
  r.environment = env || str(a['deployment.environment.name']) || str(a['deployment.environment']);
  r.ingestedAtMs = ingestedAtMs;
  r.resourceAttributes = { ...res };

  r.attributes = spanAttributes(span, scope, envelope);
  r.events = spanEvents(span);

  if (span.log) {
    logEventFields(r, span, span.log.body, limits);
    return r;
  }
  try {
    extractLlm(r, span, limits);
  } catch {
    // Unexpected shapes must never lose the span: keep the record with what was extracted.
  }
  r.trainable = isTrainable(r);
  return r;
}

/** The span's attributes, with what OTLP carries beside them as `otel.*` keys. */
function spanAttributes(span: NormalizedSpan, scope: NormalizedScope, envelope: Attributes): Attributes {
  const attrs: Attributes = { ...span.attributes };
  attrs['otel.span_kind'] = SPAN_KIND_NAMES[span.kind] ?? 'unspecified';
  if (scope.name) attrs['otel.scope.name'] = scope.name;
  if (scope.version) attrs['otel.scope.version'] = scope.version;
  if (hasKeys(scope.attributes)) attrs['otel.scope.attributes'] = scope.attributes;
  if (span.statusCode === 1) attrs['otel.status_code'] = 'ok';
  else if (span.statusCode === 2) attrs['otel.status_code'] = 'error';
  if (span.traceState) attrs['otel.trace_state'] = span.traceState;
  if (span.flags) attrs['otel.flags'] = span.flags;
  for (const k in envelope) attrs[k] = envelope[k]!;
  if (span.links.length > 0) {
    attrs['otel.links'] = span.links.map((l) => {
      const o: { [k: string]: AttrValue } = { traceId: l.traceId, spanId: l.spanId };
      if (l.traceState) o.traceState = l.traceState;
      if (l.flags) o.flags = l.flags;
      if (hasKeys(l.attributes)) o.attributes = l.attributes;
      if (l.droppedAttributesCount > 0) o.droppedAttributesCount = l.droppedAttributesCount;
      return o;
    });
  }
  if (span.droppedAttributesCount > 0) attrs['otel.dropped_attributes_count'] = span.droppedAttributesCount;
  if (span.droppedEventsCount > 0) attrs['otel.dropped_events_count'] = span.droppedEventsCount;
  if (span.droppedLinksCount > 0) attrs['otel.dropped_links_count'] = span.droppedLinksCount;
  return attrs;
}

function spanEvents(span: NormalizedSpan): SpanEvent[] {
  const events: SpanEvent[] = new Array(span.events.length);
  for (let i = 0; i < span.events.length; i++) {
    const e = span.events[i]!;
    events[i] = {
      name: e.name,
      timeNs: e.timeNs,
      attributes:
        e.droppedAttributesCount > 0
          ? { ...e.attributes, 'otel.dropped_attributes_count': e.droppedAttributesCount }
          : e.attributes,
    };
  }
  return events;
}

/**
 * An event span made from a log record (protocols/otlp/logs.ts): its text is read as the span event it stands for
 * (`gen_ai.user.message` with its body, `gen_ai.client.inference.operation.details` with its attributes, …) and
 * kept as its prompt/response, which the trace view shows on the model call's span. It is not a model call: no
 * kind, usage or cost of its own (the span it belongs to has those), never trainable on its own.
 */
function logEventFields(r: SpanRecord, span: NormalizedSpan, body: AttrValue | undefined, limits: OtlpMapLimits): void {
  const eventAttrs: Attributes = { ...span.attributes };
  delete eventAttrs[LOG_BODY];
  if (body !== undefined) eventAttrs.body = body;
  try {
    extractLlm(
      r,
      {
        ...span,
        attributes: {},
        events: [{ name: span.name, timeNs: span.startTimeNs, attributes: eventAttrs, droppedAttributesCount: 0 }],
      },
      limits,
    );
  } catch {
    // as for spans: keep what was extracted
  }
  r.kind = 'other';
  r.promptTokens = 0;
  r.completionTokens = 0;
  r.totalTokens = 0;
  r.costUsd = 0;
  delete r.attributes['tracegate.cost_source'];
  r.attributes[LOG_SIGNAL_ATTR] = 'logs';
  delete r.attributes['otel.span_kind']; // no OpenTelemetry span stands behind it
  r.trainable = false;
}

// ---------------------------------------------------------------------------
// Small helpers

function hasKeys(o: object): boolean {
  for (const _ in o) return true;
  return false;
}

function str(v: AttrValue | undefined): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return '';
}

function firstStr(a: Attributes, keys: readonly string[]): string {
  for (let i = 0; i < keys.length; i++) {
    const v = a[keys[i]!];
    if (v !== undefined && v !== null) {
      const s = str(v);
      if (s !== '') return s;
    }
  }
  return '';
}

/**
 * A token count sent as a number or a decimal string ("0x10", " 7 " and "1e3" are not counts), capped at
 * MAX_TOKENS as storage keeps it (the cost is priced from the stored count). An absurd one (beyond 2^53, such as
 * a -1 sent as uint64) is not a count and is ignored, as a cost over MAX_COST_USD is.
 */
function tok(v: AttrValue | undefined): number | undefined {
  const n = typeof v === 'number' ? v : typeof v === 'string' && DECIMAL.test(v) ? Number(v) : NaN;
  return Number.isFinite(n) && n >= 0 && n <= Number.MAX_SAFE_INTEGER ? Math.min(Math.round(n), MAX_TOKENS) : undefined;
}

const DECIMAL = /^\d+(?:\.\d+)?$/;
const DECIMAL_EXP = /^\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

function firstTok(a: Attributes, keys: readonly string[]): number | undefined {
  for (let i = 0; i < keys.length; i++) {
    const v = a[keys[i]!];
    if (v !== undefined) {
      const n = tok(v);
      if (n !== undefined) return n;
    }
  }
  return undefined;
}

/** A cost in USD, 0 to MAX_COST_USD, as a number or a decimal string; anything else is not a cost. */
function money(v: AttrValue | undefined): number | undefined {
  const n = typeof v === 'number' ? v : typeof v === 'string' && DECIMAL_EXP.test(v) ? Number(v) : NaN;
  return Number.isFinite(n) && n >= 0 && n <= MAX_COST_USD ? n : undefined;
}

/** end − start in ms, exact for durations below 2^53 ns (~104 days); same result as nsDiffMs. */
function durationMs(start: string, end: string): number {
  if (start.length === end.length && end.length > 9) {
    const k = end.length - 9;
    const ds = Number(end.slice(0, k)) - Number(start.slice(0, k));
    const dn = Number(end.slice(k)) - Number(start.slice(k));
    const d = ds * 1e9 + dn;
    if (Math.abs(ds) < 9e6) return d <= 0 ? 0 : d / 1e6;
  }
  return nsDiffMs(start, end);
}

function parseJson(s: string): unknown {
  const c = s.charCodeAt(0);
  if (c !== 0x5b && c !== 0x7b && c !== 0x22) return undefined; // [ { "
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

type Obj = { [k: string]: unknown };
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Any value as display text: strings verbatim, everything else as JSON. */
function valueText(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  try {
    return JSON.stringify(v) ?? '';
  } catch {
    return '';
  }
}

// ---------------------------------------------------------------------------
// Message rendering (GenAI parts, OpenAI/Vercel content arrays, OpenInference contents)

const MEDIA_PARTS = new Set([
  'blob',
  'file',
  'uri',
  'image',
  'image_url',
  'input_image',
  'audio',
  'input_audio',
  'video',
  'document',
]);
const SKIP_PARTS = new Set([
  'tool_call',
  'tool-call',
  'function_call',
  'tool_use',
  'server_tool_call',
  'reasoning',
  'thinking',
  'redacted_thinking',
]);
const RESULT_PARTS = new Set([
  'tool_call_response',
  'tool-result',
  'tool_result',
  'function_call_output',
  'server_tool_call_response',
]);

/** A part's text; `output`: in a model's output message, where a tool result is not the model's text. */
function partText(p: unknown, output = false): string {
  if (typeof p === 'string') return p;
  if (!isObj(p)) return '';
  const type = typeof p.type === 'string' ? p.type : '';
  if (type === 'text' || type === 'input_text' || type === 'output_text') {
    return typeof p.content === 'string' ? p.content : typeof p.text === 'string' ? p.text : '';
  }
  if (SKIP_PARTS.has(type)) return '';
  if (RESULT_PARTS.has(type)) return output ? '' : toolOutputText(p.response ?? p.result ?? p.output ?? p.content);
  if (MEDIA_PARTS.has(type)) return `[${typeof p.modality === 'string' && p.modality ? p.modality : type}]`;
  if (typeof p.content === 'string') return p.content;
  if (typeof p.text === 'string') return p.text;
  if (isObj(p.message_content)) return partText(p.message_content, output); // OpenInference contents
  return '';
}

/** A tool result; the AI SDK (5+) wraps it as {type: 'text' | 'json' | 'error-text' | 'error-json', value}. */
function toolOutputText(v: unknown): string {
  if (isObj(v) && typeof v.type === 'string' && has(v, 'value') && /^(?:error-)?(?:text|json)$/.test(v.type))
    return valueText(v.value);
  return valueText(v);
}

const has = (o: Obj, k: string) => Object.hasOwn(o, k);

function contentText(c: unknown, output = false): string {
  if (c === undefined || c === null) return '';
  if (typeof c === 'string') {
    // OpenLLMetry writes multi-part content as a JSON string of parts.
    if (c.length > 2 && c.charCodeAt(0) === 0x5b && c.charCodeAt(1) === 0x7b) {
      const parsed = parseJson(c);
      if (Array.isArray(parsed)) {
        const t = partsText(parsed, output);
        if (t !== '') return t;
      }
    }
    return c;
  }
  if (Array.isArray(c)) return partsText(c, output);
  if (isObj(c)) return partText(c, output);
  return valueText(c);
}

function partsText(parts: unknown[], output = false): string {
  let out = '';
  for (const p of parts) {
    const t = partText(p, output);
    if (t !== '') out = out === '' ? t : out + '\n' + t;
  }
  return out;
}

interface Msg {
  role: string;
  text: string;
  finish: string;
}

function toMsg(m: unknown, defaultRole: string, output = false): Msg {
  if (typeof m === 'string') return { role: defaultRole, text: m, finish: '' };
  if (!isObj(m)) return { role: defaultRole, text: valueText(m), finish: '' };
  let finish = typeof m.finish_reason === 'string' ? m.finish_reason : '';
  let src: Obj = m;
  if (isObj(m.message))
    src = m.message; // OpenInference {message:{…}}, gen_ai.choice {message:{…}}
  else if (typeof m.message === 'string') {
    const p = parseJson(m.message);
    if (isObj(p)) src = p;
  }
  if (!finish && typeof src.finish_reason === 'string') finish = src.finish_reason;
  let role = typeof src.role === 'string' && src.role ? src.role : defaultRole;
  // A message holding only tool results is the tool's answer, whatever role the instrumentation gave it (the
  // OpenTelemetry openai instrumentation sends a Responses function_call_output as a user message).
  if (
    role === 'user' &&
    Array.isArray(src.parts) &&
    src.parts.length > 0 &&
    src.parts.every((p) => isObj(p) && RESULT_PARTS.has(String(p.type)))
  )
    role = 'tool';
  let text = '';
  if (Array.isArray(src.parts)) text = partsText(src.parts, output);
  if (text === '' && src.content !== undefined) text = contentText(src.content, output);
  if (text === '' && Array.isArray(src.contents)) text = partsText(src.contents, output);
  if (text === '' && typeof src.text === 'string') text = src.text;
  return { role, text, finish };
}

/** A message-list attribute (array, or JSON string of one) → messages; a non-JSON string → one message. */
function messagesOf(v: AttrValue | undefined, defaultRole: string, output = false): Msg[] | null {
  if (v === undefined || v === null || v === '') return null;
  let list: unknown = v;
  if (typeof v === 'string') {
    const p = parseJson(v);
    if (p === undefined) return [{ role: defaultRole, text: v, finish: '' }];
    list = p;
  }
  if (Array.isArray(list)) return list.map((m) => toMsg(m, defaultRole, output));
  if (isObj(list)) return [toMsg(list, defaultRole, output)];
  return [{ role: defaultRole, text: valueText(list), finish: '' }];
}

function promptText(msgs: Msg[]): string {
  let out = '';
  for (const m of msgs) {
    if (m.text === '') continue;
    const line = m.role ? `${m.role}: ${m.text}` : m.text;
    out = out === '' ? line : out + '\n' + line;
  }
  return out;
}

function responseText(msgs: Msg[]): string {
  let out = '';
  for (const m of msgs) {
    if (m.text === '') continue;
    out = out === '' ? m.text : out + '\n' + m.text;
  }
  return out;
}

/**
 * `input.value` / `output.value` holding a JSON message list (an agent framework's input items, a Responses API
 * output) → readable text; '' when it is anything else (used verbatim then).
 */
function jsonMessagesText(v: AttrValue | undefined, output: boolean): string {
  if (typeof v !== 'string' || v.charCodeAt(0) !== 0x5b) return '';
  const list = parseJson(v);
  if (
    !Array.isArray(list) ||
    list.length === 0 ||
    !list.every((m) => isObj(m) && (typeof m.role === 'string' || m.type === 'message'))
  )
    return '';
  const msgs = list.map((m) => toMsg(m, output ? 'assistant' : 'user', output));
  return output ? responseText(msgs) : promptText(msgs);
}

/** System instructions (array of parts, a string, or JSON string) → text. */
function instructionsText(v: AttrValue | undefined): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') {
    const p = parseJson(v);
    return p === undefined ? v : contentText(p);
  }
  return contentText(v);
}

// ---------------------------------------------------------------------------
// Flattened message lists: llm.input_messages.N.message.*, gen_ai.prompt.N.*

interface FlatMsg {
  idx: number;
  role: string;
  content: string;
  parts: Map<number, string> | null;
  finish: string;
}

function flatEntry(list: FlatMsg[], idx: number): FlatMsg {
  for (const m of list) if (m.idx === idx) return m;
  const m: FlatMsg = { idx, role: '', content: '', parts: null, finish: '' };
  list.push(m);
  return m;
}

/** Parse "N.rest" at `from`; returns [N, rest] or null. */
function indexed(key: string, from: number): [number, string] | null {
  let i = from;
  let n = 0;
  while (i < key.length) {
    const c = key.charCodeAt(i);
    if (c < 48 || c > 57) break;
    n = n * 10 + (c - 48);
    i++;
  }
  if (i === from || i - from > 6 || key.charCodeAt(i) !== 46) return null;
  return [n, key.slice(i + 1)];
}

function addOpenInference(list: FlatMsg[], key: string, from: number, v: AttrValue): void {
  const ix = indexed(key, from);
  if (!ix) return;
  const [n, rest0] = ix;
  if (!rest0.startsWith('message.')) return;
  const rest = rest0.slice(8);
  const m = flatEntry(list, n);
  if (rest === 'role') m.role = str(v);
  else if (rest === 'content') m.content = typeof v === 'string' ? v : valueText(v);
  else if (rest.startsWith('contents.')) {
    const cx = indexed(rest, 9);
    if (!cx) return;
    const parts = (m.parts ??= new Map());
    if (cx[1] === 'message_content.text') parts.set(cx[0], str(v));
    // An image (or other media) part has a type and no text: shown as a marker, as in structured messages.
    else if (cx[1] === 'message_content.type' && MEDIA_PARTS.has(str(v)) && !parts.has(cx[0]))
      parts.set(cx[0], `[${str(v)}]`);
  }
}

function addOpenLLMetry(list: FlatMsg[], key: string, from: number, v: AttrValue): void {
  const ix = indexed(key, from);
  if (!ix) return;
  const [n, rest] = ix;
  if (rest === 'role') flatEntry(list, n).role = str(v);
  else if (rest === 'content') flatEntry(list, n).content = typeof v === 'string' ? v : valueText(v);
  else if (rest === 'finish_reason') flatEntry(list, n).finish = str(v);
}

function flatMsgs(list: FlatMsg[]): Msg[] {
  list.sort((x, y) => x.idx - y.idx);
  return list.map((m) => {
    // OpenLLMetry writes an assistant message holding only tool calls as the content "null".
    let text = m.content !== '' && !(m.content === 'null' && m.role === 'assistant') ? contentText(m.content) : '';
    if (text === '' && m.parts) {
      const ks = [...m.parts.keys()].sort((x, y) => x - y);
      text = ks
        .map((k) => m.parts!.get(k)!)
        .filter((t) => t !== '')
        .join('\n');
    }
    return { role: m.role, text, finish: m.finish };
  });
}

// ---------------------------------------------------------------------------
// Precedence lists

const MODEL_KEYS = [
  'gen_ai.response.model',
  'ai.response.model',
  'llm.response.model_name',
  'llm.model_name',
  'embedding.model_name',
  'gen_ai.request.model',
  'llm.request.model_name',
  'ai.model.id',
];
const PROVIDER_KEYS = ['gen_ai.system', 'llm.provider', 'llm.system'];
const INPUT_KEYS = [
  'gen_ai.usage.input_tokens',
  'gen_ai.usage.prompt_tokens',
  'llm.token_count.prompt',
  'ai.usage.inputTokens',
  'ai.usage.promptTokens',
  'ai.usage.tokens',
];
const OUTPUT_KEYS = [
  'gen_ai.usage.output_tokens',
  'gen_ai.usage.completion_tokens',
  'llm.token_count.completion',
  'ai.usage.outputTokens',
  'ai.usage.completionTokens',
];
const TOTAL_KEYS = [
  'gen_ai.usage.total_tokens',
  'llm.usage.total_tokens',
  'llm.token_count.total',
  'ai.usage.totalTokens',
];
const CACHE_READ_KEYS = [
  'gen_ai.usage.cache_read.input_tokens',
  'gen_ai.usage.cache_read_input_tokens',
  'llm.token_count.prompt_details.cache_read',
  'ai.usage.inputTokenDetails.cacheReadTokens',
  'ai.usage.cachedInputTokens',
];
const CACHE_WRITE_KEYS = [
  'gen_ai.usage.cache_creation.input_tokens',
  'gen_ai.usage.cache_write.input_tokens',
  'gen_ai.usage.cache_creation_input_tokens',
  'llm.token_count.prompt_details.cache_write',
  'ai.usage.inputTokenDetails.cacheWriteTokens',
];
const TOOL_NAME_KEYS = ['gen_ai.tool.name', 'tool.name', 'ai.toolCall.name', 'traceloop.entity.name'];
const ACTION_KEYS = [
  'gen_ai.agent.name',
  'gen_ai.workflow.name',
  'traceloop.workflow.name',
  'ai.telemetry.functionId',
  'agent.name',
];
const REQUEST_ID_KEYS = ['gen_ai.response.id', 'ai.response.id'];

const OPERATION_KIND: Record<string, SpanKind> = {
  chat: 'llm',
  text_completion: 'llm',
  generate_content: 'llm',
  completion: 'llm',
  generate: 'llm',
  embeddings: 'embedding',
  embedding: 'embedding',
  execute_tool: 'tool',
  invoke_agent: 'agent',
  create_agent: 'agent',
  invoke_workflow: 'chain',
  plan: 'chain',
  agent_step: 'chain',
  retrieval: 'retrieval',
  rerank: 'retrieval',
};
const OPENINFERENCE_KIND: Record<string, SpanKind> = {
  LLM: 'llm',
  EMBEDDING: 'embedding',
  CHAIN: 'chain',
  RETRIEVER: 'retrieval',
  RERANKER: 'retrieval',
  TOOL: 'tool',
  AGENT: 'agent',
  GUARDRAIL: 'guardrail',
  EVALUATOR: 'guardrail',
};
const TRACELOOP_KIND: Record<string, SpanKind> = { workflow: 'chain', task: 'chain', agent: 'agent', tool: 'tool' };
const LLM_REQUEST_TYPE_KIND: Record<string, SpanKind> = {
  chat: 'llm',
  completion: 'llm',
  embedding: 'embedding',
  rerank: 'retrieval',
};

const own = Object.prototype.hasOwnProperty;
const lookup = (t: Record<string, SpanKind>, k: string): SpanKind | undefined => (own.call(t, k) ? t[k] : undefined);

function vercelKind(op: string): SpanKind | undefined {
  if (!op.startsWith('ai.')) return undefined;
  if (op.endsWith('.doGenerate') || op.endsWith('.doStream')) return 'llm';
  if (op.endsWith('.doEmbed')) return 'embedding';
  if (op === 'ai.toolCall') return 'tool';
  return 'chain';
}

const OP_DETAILS_EVENT = 'gen_ai.client.inference.operation.details';
const EVENT_ROLE: Record<string, string> = {
  'gen_ai.system.message': 'system',
  'gen_ai.user.message': 'user',
  'gen_ai.assistant.message': 'assistant',
  'gen_ai.tool.message': 'tool',
};

/** The body of a legacy GenAI event, carried as span-event attributes (flat, or as a JSON body). */
function eventBody(a: Attributes): Obj {
  for (const k of ['gen_ai.event.content', 'body', 'event.body']) {
    const v = a[k];
    if (typeof v === 'string') {
      const p = parseJson(v);
      if (isObj(p)) return p;
    } else if (isObj(v)) return v as Obj;
  }
  const b: Obj = { ...a };
  // flattened `message.role` / `message.content` (gen_ai.choice)
  if (b.message === undefined && (a['message.content'] !== undefined || a['message.role'] !== undefined)) {
    b.message = { role: a['message.role'], content: a['message.content'] };
  }
  return b;
}

// ---------------------------------------------------------------------------
// LLM extraction: the steps below, in the order they fill the record (a failure keeps what was filled before it).

function extractLlm(r: SpanRecord, span: NormalizedSpan, limits: OtlpMapLimits): void {
  const s = llmSources(span);
  if (!s.llmish) return; // plain OTel span (HTTP, DB, …): kind 'other', no LLM fields

  const A: Attributes = s.opDetails ? { ...s.opDetails, ...span.attributes } : span.attributes;
  const genAi = genAiMessages(A);
  const model = firstStr(A, MODEL_KEYS);
  const provider = providerOf(A);
  r.kind = kindOf(A, span.name, model !== '' || hasMessages(A, s, genAi));
  r.model = model;
  r.provider = provider;
  usageAndCost(r, A);
  r.requestId = firstStr(A, REQUEST_ID_KEYS);
  r.actionName = (r.kind === 'tool' ? firstStr(A, TOOL_NAME_KEYS) : '') || firstStr(A, ACTION_KEYS);

  const olOut = s.olOut !== null ? flatMsgs(s.olOut) : null;
  const prompt = promptOf(A, s, genAi);
  const response = responseOf(A, s, genAi, olOut);
  r.prompt = cutMarked(prompt, limits.maxStringBytes, r.attributes, 'tracegate.prompt');
  r.response = cutMarked(response, limits.maxStringBytes, r.attributes, 'tracegate.response');
  r.finishReason = finishReasonOf(A, genAi, olOut, s.evOut);
}

/** What one pass over a span's attribute keys and one over its events find; each list null when there is none. */
interface LlmSources {
  /** Anything of an LLM convention at all. */
  llmish: boolean;
  /** OpenInference, flattened: llm.input_messages.N.*, llm.output_messages.N.* */
  oiIn: FlatMsg[] | null;
  oiOut: FlatMsg[] | null;
  /** OpenLLMetry, flattened: gen_ai.prompt.N.*, gen_ai.completion.N.* */
  olIn: FlatMsg[] | null;
  olOut: FlatMsg[] | null;
  /** OpenInference embeddings: [N, text] of embedding.embeddings.N.embedding.text */
  embedded: Array<[number, string]> | null;
  /** The attributes of a gen_ai.client.inference.operation.details event (the span's own win over them). */
  opDetails: Attributes | null;
  /** Legacy GenAI events: per-message (gen_ai.{system,user,assistant,tool}.message, gen_ai.choice), gen_ai.content.* */
  evIn: Msg[] | null;
  evOut: Msg[] | null;
}

function llmSources(span: NormalizedSpan): LlmSources {
  const s: LlmSources = {
    llmish: false,
    oiIn: null,
    oiOut: null,
    olIn: null,
    olOut: null,
    embedded: null,
    opDetails: null,
    evIn: null,
    evOut: null,
  };
  scanKeys(span.attributes, s);
  scanEvents(span.events, s);
  return s;
}

/** One pass over the keys: the flattened message families, and whether any key is LLM-ish. */
function scanKeys(sa: Attributes, s: LlmSources): void {
  for (const k in sa) {
    const c = k.charCodeAt(0);
    if (c === 103 /* g */) {
      if (!k.startsWith('gen_ai.')) continue;
      s.llmish = true;
      if (k.startsWith('gen_ai.prompt.')) addOpenLLMetry((s.olIn ??= []), k, 14, sa[k]!);
      else if (k.startsWith('gen_ai.completion.')) addOpenLLMetry((s.olOut ??= []), k, 18, sa[k]!);
    } else if (c === 108 /* l */) {
      if (!k.startsWith('llm.')) continue;
      s.llmish = true;
      if (k.startsWith('llm.input_messages.')) addOpenInference((s.oiIn ??= []), k, 19, sa[k]!);
      else if (k.startsWith('llm.output_messages.')) addOpenInference((s.oiOut ??= []), k, 20, sa[k]!);
    } else if (c === 97 /* a */) {
      if (k.startsWith('ai.')) s.llmish = true;
    } else if (c === 111 /* o */) {
      if (k === 'openinference.span.kind' || k === 'output.value') s.llmish = true;
    } else if (c === 116 /* t */) {
      if (k.startsWith('traceloop.') || k.startsWith('tool.')) s.llmish = true;
    } else if (c === 105 /* i */) {
      if (k === 'input.value') s.llmish = true;
    } else if (c === 101 /* e */) {
      // OpenInference embeddings: embedding.embeddings.N.embedding.text
      if (k.startsWith('embedding.embeddings.') && k.endsWith('.embedding.text')) {
        const ix = indexed(k, 21);
        if (ix && ix[1] === 'embedding.text' && typeof sa[k] === 'string') (s.embedded ??= []).push([ix[0], sa[k]]);
      }
    }
  }
}

/** The operation-details overlay and the legacy per-message events. */
function scanEvents(events: NormalizedSpan['events'], s: LlmSources): void {
  for (const e of events) {
    const n = e.name;
    if (n.charCodeAt(0) !== 103 || !n.startsWith('gen_ai.')) continue;
    if (n === OP_DETAILS_EVENT) {
      s.opDetails = e.attributes;
    } else if (n === 'gen_ai.choice') {
      const body = eventBody(e.attributes);
      (s.evOut ??= []).push(toMsg(body, 'assistant', true));
    } else if (own.call(EVENT_ROLE, n)) {
      const body = eventBody(e.attributes);
      (s.evIn ??= []).push(toMsg(body, EVENT_ROLE[n]!));
    } else if (n === 'gen_ai.content.prompt') {
      const m = messagesOf(e.attributes['gen_ai.prompt'], 'user');
      if (m) (s.evIn ??= []).push(...m);
    } else if (n === 'gen_ai.content.completion') {
      const m = messagesOf(e.attributes['gen_ai.completion'], 'assistant');
      if (m) (s.evOut ??= []).push(...m);
    } else continue;
    s.llmish = true;
  }
}

/** The current GenAI convention's gen_ai.input.messages, gen_ai.output.messages and gen_ai.system_instructions. */
interface GenAiMessages {
  input: Msg[] | null;
  output: Msg[] | null;
  system: string;
}

function genAiMessages(A: Attributes): GenAiMessages {
  return {
    input: messagesOf(A['gen_ai.input.messages'], 'user'),
    output: messagesOf(A['gen_ai.output.messages'], 'assistant', true),
    system: instructionsText(A['gen_ai.system_instructions']),
  };
}

/** Messages of any convention: with a model, what makes a span that names no kind a model call. */
function hasMessages(A: Attributes, s: LlmSources, genAi: GenAiMessages): boolean {
  return (
    genAi.input !== null ||
    genAi.output !== null ||
    genAi.system !== '' ||
    s.evIn !== null ||
    s.evOut !== null ||
    s.oiIn !== null ||
    s.oiOut !== null ||
    s.olIn !== null ||
    s.olOut !== null ||
    A['ai.prompt.messages'] !== undefined ||
    A['ai.prompt'] !== undefined ||
    A['ai.response.text'] !== undefined
  );
}

/**
 * The first convention that names the kind (the table at the top); else a tool, a model call or an agent by what the
 * span carries.
 */
function kindOf(A: Attributes, spanName: string, modelCall: boolean): SpanKind {
  const named =
    lookup(OPERATION_KIND, str(A['gen_ai.operation.name'])) ??
    lookup(OPENINFERENCE_KIND, str(A['openinference.span.kind']).toUpperCase()) ??
    lookup(TRACELOOP_KIND, str(A['traceloop.span.kind'])) ??
    lookup(LLM_REQUEST_TYPE_KIND, str(A['llm.request.type'])) ??
    vercelKind(str(A['ai.operationId']) || spanName);
  if (named !== undefined) return named;
  if (A['gen_ai.tool.name'] !== undefined || A['gen_ai.tool.call.id'] !== undefined) return 'tool';
  if (modelCall) return 'llm';
  if (A['gen_ai.agent.name'] !== undefined) return 'agent';
  return 'other';
}

/** gen_ai.provider.name → ai.model.provider → PROVIDER_KEYS, lower-cased. */
function providerOf(A: Attributes): string {
  let provider = str(A['gen_ai.provider.name']);
  if (provider === '') {
    // Vercel AI SDK: "openai.chat" → "openai" (it also copies that value into gen_ai.system).
    const p = str(A['ai.model.provider']);
    const dot = p.indexOf('.');
    provider = dot > 0 ? p.slice(0, dot) : p;
  }
  if (provider === '') provider = firstStr(A, PROVIDER_KEYS);
  return provider.trim().toLowerCase();
}

/**
 * Token counts, then the cost: the client's own, else priced from the tokens (model spans only: reads r.kind, r.model
 * and r.provider).
 */
function usageAndCost(r: SpanRecord, A: Attributes): void {
  const input = firstTok(A, INPUT_KEYS);
  const output = firstTok(A, OUTPUT_KEYS);
  const total = firstTok(A, TOTAL_KEYS);
  r.promptTokens = input ?? 0;
  r.completionTokens = output ?? 0;
  r.totalTokens = total ?? r.promptTokens + r.completionTokens;
  let cost = clientCost(A);
  // The marker tells the cost processor the span is settled (a sent cost of 0 stays 0).
  if (cost !== undefined) r.attributes['tracegate.cost_source'] = 'client';
  else if (USAGE_KINDS.has(r.kind) && r.model !== '' && (r.promptTokens > 0 || r.completionTokens > 0)) {
    cost = priceUsd(r.model, r.provider, {
      input: r.promptTokens,
      output: r.completionTokens,
      cacheRead: firstTok(A, CACHE_READ_KEYS),
      cacheWrite: firstTok(A, CACHE_WRITE_KEYS),
    });
    r.attributes['tracegate.cost_source'] = cost > 0 ? 'price_table' : 'unpriced';
  }
  r.costUsd = cost ?? 0;
}

/** llm.cost.total → gen_ai.usage.cost → llm.cost.prompt + llm.cost.completion; undefined when none was sent. */
function clientCost(A: Attributes): number | undefined {
  const cost = money(A['llm.cost.total']) ?? money(A['gen_ai.usage.cost']);
  if (cost !== undefined) return cost;
  const cp = money(A['llm.cost.prompt']);
  const cc = money(A['llm.cost.completion']);
  return cp !== undefined || cc !== undefined ? (cp ?? 0) + (cc ?? 0) : undefined;
}

const TOOL_ARGUMENT_KEYS = ['gen_ai.tool.call.arguments', 'ai.toolCall.args', 'ai.toolCall.input'];
const TOOL_RESULT_KEYS = ['gen_ai.tool.call.result', 'ai.toolCall.result', 'ai.toolCall.output'];
const VERCEL_RESPONSE_KEYS = ['ai.response.text', 'ai.response.object'];

/**
 * The prompt from the first source that gives one (the table at the top), led by the system instructions whatever the
 * source.
 */
function promptOf(A: Attributes, s: LlmSources, genAi: GenAiMessages): string {
  const prompt =
    messagesText(genAi.input, false) ||
    messagesText(s.evIn, false) ||
    openInferenceText(s.oiIn, A['llm.input_messages'], false) ||
    messagesText(s.olIn !== null ? flatMsgs(s.olIn) : null, false) ||
    vercelPrompt(A) ||
    vercelEmbedInput(A) ||
    embeddingsText(s.embedded) ||
    ioValueText(A, 'input.value', 'traceloop.entity.input', false) ||
    firstText(A, TOOL_ARGUMENT_KEYS);
  if (genAi.system === '') return prompt;
  return prompt === '' ? `system: ${genAi.system}` : `system: ${genAi.system}\n${prompt}`;
}

/** The response from the first source that gives one (the table at the top); `olOut`: OpenLLMetry's output messages. */
function responseOf(A: Attributes, s: LlmSources, genAi: GenAiMessages, olOut: Msg[] | null): string {
  // Output messages that hold only tool calls leave the response empty (the calls stay in the attributes):
  // output.value and its kin would show the provider's whole JSON answer instead.
  const structuredOut =
    genAi.output !== null ||
    s.evOut !== null ||
    s.oiOut !== null ||
    olOut !== null ||
    Array.isArray(A['llm.output_messages']);
  return (
    messagesText(genAi.output, true) ||
    messagesText(s.evOut, true) ||
    openInferenceText(s.oiOut, A['llm.output_messages'], true) ||
    messagesText(olOut, true) ||
    firstText(A, VERCEL_RESPONSE_KEYS) ||
    (structuredOut ? '' : ioValueText(A, 'output.value', 'traceloop.entity.output', true)) ||
    firstText(A, TOOL_RESULT_KEYS)
  );
}

/** Messages as prompt (`role: text` lines) or response (the texts) text; '' for none. */
function messagesText(msgs: Msg[] | null, output: boolean): string {
  if (msgs === null) return '';
  return output ? responseText(msgs) : promptText(msgs);
}

/** OpenInference's flattened llm.{input,output}_messages.N.*, else the attribute as an array of messages. */
function openInferenceText(flat: FlatMsg[] | null, list: AttrValue | undefined, output: boolean): string {
  const text = messagesText(flat !== null ? flatMsgs(flat) : null, output);
  if (text !== '' || !Array.isArray(list)) return text;
  return messagesText(messagesOf(list, output ? 'assistant' : 'user', output), output);
}

/** OpenInference embedding texts, in index order. */
function embeddingsText(embedded: Array<[number, string]> | null): string {
  if (embedded === null) return '';
  return embedded
    .sort((x, y) => x[0] - y[0])
    .map((e) => e[1])
    .filter((t) => t !== '')
    .join('\n');
}

/** OpenInference's input.value / output.value (a JSON message list made readable), then OpenLLMetry's entity value. */
function ioValueText(A: Attributes, valueKey: string, entityKey: string, output: boolean): string {
  return jsonMessagesText(A[valueKey], output) || valueText(A[valueKey]) || valueText(A[entityKey]);
}

/** The first of `keys` with display text. */
function firstText(A: Attributes, keys: readonly string[]): string {
  for (const k of keys) {
    const t = valueText(A[k]);
    if (t !== '') return t;
  }
  return '';
}

/** The finish reason: span attributes first, then the output messages' own. */
function finishReasonOf(A: Attributes, genAi: GenAiMessages, olOut: Msg[] | null, evOut: Msg[] | null): string {
  return (
    finishReasons(A['gen_ai.response.finish_reasons']) ||
    str(A['llm.finish_reason']) ||
    (olOut ? finishOf(olOut) : '') ||
    str(A['ai.response.finishReason']) ||
    (genAi.output ? finishOf(genAi.output) : '') ||
    (evOut ? finishOf(evOut) : '')
  );
}

function finishOf(msgs: Msg[]): string {
  for (const m of msgs) if (m.finish) return m.finish;
  return '';
}

function finishReasons(v: AttrValue | undefined): string {
  let list: unknown = v;
  if (typeof v === 'string') {
    if (v.charCodeAt(0) !== 0x5b) return v;
    list = parseJson(v);
  }
  if (!Array.isArray(list)) return '';
  const seen: string[] = [];
  for (const x of list) if (typeof x === 'string' && x !== '' && !seen.includes(x)) seen.push(x);
  return seen.join(',');
}

/** Vercel AI SDK legacy: ai.prompt.messages (JSON messages) → ai.prompt ({system, prompt, messages} JSON, or text). */
function vercelPrompt(A: Attributes): string {
  const pm = A['ai.prompt.messages'];
  if (pm !== undefined && pm !== null) {
    const msgs = messagesOf(pm, 'user');
    const t = msgs ? promptText(msgs) : '';
    if (t !== '') return t;
  }
  const p = A['ai.prompt'];
  if (p === undefined || p === null) return '';
  const o = typeof p === 'string' ? parseJson(p) : p;
  if (!isObj(o)) return typeof p === 'string' ? p : valueText(p);
  const msgs: Msg[] = [];
  // `system` is a string, or (AI SDK 6+) a system message or a list of them.
  const system =
    typeof o.system === 'string'
      ? o.system
      : o.system !== undefined && o.system !== null
        ? Array.isArray(o.system)
          ? o.system
              .map((m) => toMsg(m, 'system').text)
              .filter((t) => t !== '')
              .join('\n')
          : toMsg(o.system, 'system').text
        : '';
  if (system) msgs.push({ role: 'system', text: system, finish: '' });
  if (o.prompt !== undefined && o.prompt !== null) msgs.push({ role: 'user', text: contentText(o.prompt), finish: '' });
  if (Array.isArray(o.messages)) for (const m of o.messages) msgs.push(toMsg(m, 'user'));
  return promptText(msgs);
}

/** Vercel AI SDK legacy embeddings: `ai.value` (embed) or `ai.values` (embedMany), each value JSON-encoded. */
function vercelEmbedInput(A: Attributes): string {
  const one = A['ai.value'];
  if (one !== undefined && one !== null) return embedValueText(one);
  const many = A['ai.values'];
  if (Array.isArray(many))
    return many
      .map(embedValueText)
      .filter((t) => t !== '')
      .join('\n');
  return '';
}

function embedValueText(v: unknown): string {
  if (typeof v !== 'string') return valueText(v);
  const p = parseJson(v);
  return typeof p === 'string' ? p : v;
}
