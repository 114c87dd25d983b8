// Responses API request/response (JSON or SSE) → one span record. Pure: no I/O, no clock.
import {
  emptySpan,
  isTrainable,
  MAX_TOKENS,
  msToNs,
  type Attributes,
  type AttrValue,
  type SpanRecord,
} from '../core/record.ts';
import { priceUsd } from '../processors/cost.ts';
import { renameKeys } from '../processors/governance/redact.ts';
import { foldedFields, foldKey, isJsonObject } from '../platform/json-prescan.ts';
import { cutMarked } from '../protocols/otlp/normalized.ts';

type Json = Record<string, unknown>;
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
/** A usage count as stored: whole, non-negative, at most MAX_TOKENS (what is priced is what is stored). */
const tokens = (v: unknown): number =>
  typeof v === 'number' && Number.isFinite(v) ? Math.min(Math.max(0, Math.round(v)), MAX_TOKENS) : 0;

// ---- request text

/** One text field of a request, with its JSON path so redaction can rewrite exactly that field. */
export interface TextPart {
  path: Array<string | number>;
  role: string;
  text: string;
}

const TEXT_PART_TYPES = new Set(['input_text', 'output_text', 'text']);

/** The text a model will read: instructions, then input (a string, or the text parts of an item array). */
export function requestTextParts(body: Json): TextPart[] {
  const parts: TextPart[] = [];
  if (typeof body.instructions === 'string' && body.instructions)
    parts.push({ path: ['instructions'], role: 'system', text: body.instructions });
  const input = body.input;
  if (typeof input === 'string') {
    if (input) parts.push({ path: ['input'], role: 'user', text: input });
    return parts;
  }
  if (!Array.isArray(input)) return parts;
  input.forEach((item, i) => {
    if (!isJsonObject(item)) return;
    const role = str(item.role) || 'user';
    if (typeof item.content === 'string') {
      if (item.content) parts.push({ path: ['input', i, 'content'], role, text: item.content });
    } else if (Array.isArray(item.content)) {
      item.content.forEach((c, j) => {
        if (
          isJsonObject(c) &&
          typeof c.text === 'string' &&
          c.text &&
          (c.type === undefined || TEXT_PART_TYPES.has(str(c.type)))
        ) {
          parts.push({ path: ['input', i, 'content', j, 'text'], role, text: c.text });
        }
      });
    } else if (item.type === 'function_call_output') {
      // Tool results reach the model too (and are a classic injection carrier): a string or content parts.
      if (typeof item.output === 'string' && item.output)
        parts.push({ path: ['input', i, 'output'], role: 'tool', text: item.output });
      else if (Array.isArray(item.output)) {
        item.output.forEach((c, j) => {
          if (isJsonObject(c) && typeof c.text === 'string' && c.text)
            parts.push({ path: ['input', i, 'output', j, 'text'], role: 'tool', text: c.text });
        });
      }
    }
  });
  return parts;
}

/** One string anywhere in a request, for the preflight. `trusted`: the application's own configuration
 * (instructions, system and developer messages, tools, metadata, output format) rather than user or tool
 * content (`input`, prompt-template variables); there "ignore previous instructions" is an instruction, not an
 * injection, so only the PII and secret detectors run on it. `opaque`: the value of an identifier or enum field
 * (an id, a type, encrypted reasoning), where only the secret detector runs: digits in an id are not a phone
 * number, but a key pasted into one still reaches the provider. `key`: the text is the last path segment
 * itself, an object key (caller-named keys, such as metadata's or a JSON schema's, reach the provider too). */
export interface RequestString {
  path: Array<string | number>;
  text: string;
  trusted: boolean;
  opaque?: true;
  key?: true;
}

/** Keys whose string values are identifiers or enums, never text a model reads: only the secret detector runs on
 * them outside free-form maps (metadata, prompt variables, JSON schemas). What is under them is scanned in full. */
const OPAQUE_KEYS = new Set([
  'model',
  'type',
  'role',
  'id',
  'call_id',
  'status',
  'previous_response_id',
  'service_tier',
  'truncation',
  'encrypted_content',
  'file_id',
  'detail',
  'effort',
]);
/** Maps whose keys are the caller's own: every string under them is scanned. Matched case-folded (foldKey): a
 * provider that reads field names case-insensitively reads 'Variables' as variables. */
export const FREE_FORM = new Set(['metadata', 'variables', 'parameters', 'schema', 'properties']);
/** Inline file data under these keys is not scanned: a base64 payload is large and reads as false positives. */
const INLINE_DATA_KEYS = new Set(['image_url', 'file_data', 'file_url']);
/** Only a string that is a data URL from end to end, its payload nothing but base64: anything else in it
 * (text after the payload, a payload that is not base64) is scanned like every other string. */
const INLINE_DATA = /^data:[\w.+-]+\/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,[A-Za-z0-9+/]*={0,2}$/;
/** Lower-case letters and underscores, short: every API field name. Not scanned for PII or secrets (neither can
 * take that shape), only for injection where the key sits in user content ('ignore_previous_instructions'). */
const PLAIN_KEY = /^[a-z_]{1,32}$/;

/**
 * Every string the provider receives except inline file data: input items of any shape, instructions,
 * prompt-template variables, tool descriptions and schemas, image URLs, metadata, identifiers, object keys.
 * What the preflight scans, so a secret cannot slip past a policy by travelling in a field the prompt view ignores.
 */
export function requestStrings(body: Json): RequestString[] {
  const out: RequestString[] = [];
  const walk = (v: unknown, path: Array<string | number>, trusted: boolean, free: boolean): void => {
    if (typeof v === 'string') {
      const key = path[path.length - 1];
      if (!v) return;
      if (typeof key === 'string' && INLINE_DATA_KEYS.has(key) && INLINE_DATA.test(v)) return;
      out.push({
        path,
        text: v,
        trusted,
        ...(!free && typeof key === 'string' && OPAQUE_KEYS.has(key) ? { opaque: true as const } : {}),
      });
      return;
    }
    if (Array.isArray(v)) {
      v.forEach((x, i) => {
        walk(x, [...path, i], trusted, free);
      });
      return;
    }
    if (!isJsonObject(v)) return;
    const devRole = v.role === 'system' || v.role === 'developer';
    for (const k of Object.keys(v)) {
      // A key is as trusted as the object holding it (a key in user content is user content).
      // Plain keys in user content only when they could be words run together ('ignore_previous_instructions').
      if (!PLAIN_KEY.test(k) || (!trusted && k.length >= 12 && k.includes('_')))
        out.push({ path: [...path, k], text: k, trusted, key: true });
      // At the top, only input and prompt (its variables) are the user's (compared case-insensitively: a provider
      // may read 'INPUT' as input); below, a system or developer message is trusted.
      const lower = foldKey(k);
      walk(
        v[k],
        [...path, k],
        path.length === 0 ? lower !== 'input' && lower !== 'prompt' : trusted || devRole,
        free || FREE_FORM.has(lower),
      );
    }
  };
  walk(body, [], true, false);
  return out;
}

/** The prompt as stored: a lone user text as is, otherwise `role: text` blocks. */
export function renderPrompt(parts: readonly TextPart[]): string {
  if (parts.length === 1 && parts[0]!.role === 'user') return parts[0]!.text;
  return parts.map((p) => `${p.role}: ${p.text}`).join('\n\n');
}

/** A copy of `body` with the given text fields replaced (with `key`, the object key at `path` renamed);
 * everything else is kept as sent. */
export function withTexts(body: Json, parts: ReadonlyArray<Pick<TextPart, 'path' | 'text'> & { key?: true }>): Json {
  const out = structuredClone(body);
  const at = (path: ReadonlyArray<string | number>) => {
    let node = out as Record<string | number, unknown>;
    for (const seg of path) node = node[seg] as Record<string | number, unknown>;
    return node;
  };
  // Values first, then keys deepest first: a value's path and a deeper key's path name the keys as sent.
  const values = parts.filter((p) => !p.key);
  const keys = parts.filter((p) => p.key).sort((a, b) => b.path.length - a.path.length);
  for (const p of values) at(p.path.slice(0, -1))[p.path[p.path.length - 1]!] = p.text;
  // Keys renamed per object, all of an object's at once (renameKeys: order kept, clashes numbered).
  const byParent = new Map<string, { path: Array<string | number>; renames: Map<string, string> }>();
  for (const p of keys) {
    const parentPath = p.path.slice(0, -1);
    const id = JSON.stringify(parentPath);
    const entry = byParent.get(id) ?? byParent.set(id, { path: parentPath, renames: new Map() }).get(id)!;
    entry.renames.set(p.path[p.path.length - 1] as string, p.text);
  }
  for (const { path, renames } of byParent.values()) {
    const renamed = renameKeys(at(path) as Json, renames);
    if (path.length === 0) {
      for (const k of Object.keys(out)) delete out[k];
      Object.assign(out, renamed);
    } else at(path.slice(0, -1))[path[path.length - 1]!] = renamed;
  }
  return out;
}

// ---- response text

/** Concatenated `output_text` parts of message items (what the SDK calls `output_text`). */
export function responseOutputText(resp: Json | null): string {
  if (!resp || !Array.isArray(resp.output)) return '';
  let text = '';
  for (const item of resp.output) {
    if (!isJsonObject(item) || item.type !== 'message' || !Array.isArray(item.content)) continue;
    for (const c of item.content) if (isJsonObject(c) && c.type === 'output_text') text += str(c.text);
  }
  return text;
}

// ---- SSE

export interface StreamSummary {
  events: number;
  /** Text assembled from response.output_text.delta events. */
  text: string;
  /** The response object of the terminal event (completed / incomplete / failed), or of the last created/in_progress. */
  response: Json | null;
  terminal: boolean;
  /** From an `error` event (both the flat and the nested `error` shapes). */
  error: { code: string; message: string } | null;
  firstDeltaAtMs: number | null;
}

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled']);

/**
 * Incremental Responses SSE parser fed with raw chunks as they are forwarded. Handles `event:`/`data:` fields,
 * multi-line data, comments, CRLF/CR line ends and chunks split anywhere (including inside a UTF-8 sequence).
 */
export class ResponsesStreamAssembler {
  private readonly decoder = new TextDecoder('utf-8');
  private buf = '';
  private eventName = '';
  private data: string[] = [];
  private readonly s: StreamSummary = {
    events: 0,
    text: '',
    response: null,
    terminal: false,
    error: null,
    firstDeltaAtMs: null,
  };

  push(chunk: Uint8Array, atMs = 0): void {
    this.buf += this.decoder.decode(chunk, { stream: true });
    this.drain(atMs, false);
  }

  end(): StreamSummary {
    this.buf += this.decoder.decode();
    this.drain(0, true);
    this.dispatch(0);
    return this.s;
  }

  summary(): StreamSummary {
    return this.s;
  }

  private drain(atMs: number, final: boolean): void {
    // A trailing CR may be the first half of CRLF: keep it until the next chunk decides.
    const cut = !final && this.buf.endsWith('\r') ? this.buf.length - 1 : this.buf.length;
    const lines = this.buf.slice(0, cut).split(/\r\n|\r|\n/);
    this.buf = lines.pop()! + this.buf.slice(cut);
    for (const line of lines) this.line(line, atMs);
    if (final && this.buf) {
      this.line(this.buf, atMs);
      this.buf = '';
    }
  }

  private line(line: string, atMs: number): void {
    if (line === '') return this.dispatch(atMs);
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.eventName = value;
    else if (field === 'data') this.data.push(value);
  }

  private dispatch(atMs: number): void {
    const name = this.eventName;
    const data = this.data.join('\n');
    this.eventName = '';
    this.data = [];
    if (!data) return;
    this.s.events++;
    let ev: Json;
    try {
      const parsed: unknown = JSON.parse(data);
      if (!isJsonObject(parsed)) return;
      ev = parsed;
    } catch {
      return; // e.g. a `[DONE]` sentinel
    }
    const type = str(ev.type) || name;
    if (type === 'response.output_text.delta') {
      if (this.s.firstDeltaAtMs === null) this.s.firstDeltaAtMs = atMs;
      this.s.text += str(ev.delta);
    } else if (type === 'error') {
      const e = isJsonObject(ev.error) ? ev.error : ev;
      this.s.error = { code: str(e.code) || 'error', message: str(e.message) };
    } else if (type.startsWith('response.') && isJsonObject(ev.response) && !this.s.terminal) {
      this.s.response = ev.response;
      if (TERMINAL.has(type)) this.s.terminal = true;
    }
  }
}

// ---- record

export type ProxyOutcome =
  | { kind: 'blocked'; message: string }
  | { kind: 'cancelled' }
  | { kind: 'transport_error'; code: string; message: string }
  /** The upstream answered: `body` is its parsed JSON (JSON path), `stream` the SSE summary (stream path). */
  | { kind: 'upstream'; httpStatus: number; requestId: string; body: Json | null; stream: StreamSummary | null };

export interface ProxyExchange {
  workspaceId: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  startMs: number;
  endMs: number;
  /** The request as forwarded (after redaction). */
  request: Json;
  /** Rendered prompt as forwarded. */
  prompt: string;
  provider: string;
  environment: string;
  actionName: string;
  stream: boolean;
  outcome: ProxyOutcome;
  /** Anything the route measured or decided (governance, timings). */
  attributes: Attributes;
  /** Partial stream data for a cancelled or broken stream. */
  partial?: StreamSummary | null;
}

const STATUS: Record<string, string> = {
  completed: 'completed',
  incomplete: 'incomplete',
  failed: 'error',
  cancelled: 'cancelled',
};

const REQUEST_ATTRS = [
  'temperature',
  'top_p',
  'max_output_tokens',
  'previous_response_id',
  'tool_choice',
  'parallel_tool_calls',
  'store',
  'service_tier',
  'truncation',
  'background',
  'user',
  'safety_identifier',
  'prompt_cache_key',
];

export interface ProxyMapLimits {
  /** The stored prompt and response are cut to this many UTF-8 bytes (TRACEGATE_MAX_STRING_BYTES) and marked. */
  maxStringBytes: number;
}

/** The record of one exchange. What was forwarded is not touched: only the stored copy is cut to `limits`. */
export function mapProxy(x: ProxyExchange, limits: ProxyMapLimits = { maxStringBytes: Infinity }): SpanRecord {
  const r = emptySpan(x.workspaceId, 'proxy');
  r.traceId = x.traceId;
  r.spanId = x.spanId;
  r.parentSpanId = x.parentSpanId;
  r.name = 'responses.create';
  r.kind = 'llm';
  r.startTimeNs = msToNs(x.startMs);
  r.endTimeNs = msToNs(x.endMs);
  r.durationMs = Math.max(0, x.endMs - x.startMs);
  r.provider = x.provider;
  r.prompt = x.prompt;
  r.environment = x.environment;
  r.actionName = x.actionName;
  r.ingestedAtMs = x.endMs;
  const requestModel = str(x.request.model);
  r.model = requestModel;

  const a: Attributes = {
    'gen_ai.operation.name': 'responses',
    'gen_ai.request.model': requestModel,
    'proxy.stream': x.stream,
  };
  // In any letter case, as the route reads previous_response_id (the route refused case-folded duplicates).
  const given = foldedFields(x.request);
  for (const k of REQUEST_ATTRS) {
    const v = given.get(k);
    if (v !== undefined && v !== null) a[`gen_ai.request.${k}`] = v as AttrValue;
  }
  const metadata = given.get('metadata');
  if (isJsonObject(metadata)) a['metadata'] = metadata as AttrValue;
  const tools = given.get('tools');
  if (Array.isArray(tools))
    a['gen_ai.request.tools'] = tools.map((t) => (isJsonObject(t) ? str(t.name) || str(t.type) : '')).filter(Boolean);

  const o = x.outcome;
  if (o.kind === 'blocked') {
    r.status = 'blocked';
    r.statusMessage = o.message;
  } else if (o.kind === 'transport_error') {
    fillFromResponse(r, a, x.partial?.response ?? null, x.partial?.text ?? '');
    r.status = 'error';
    r.statusMessage = o.message;
    r.finishReason = o.code;
  } else if (o.kind === 'cancelled') {
    fillFromResponse(r, a, x.partial?.response ?? null, x.partial?.text ?? '');
    r.status = 'cancelled';
    r.statusMessage = 'client disconnected before the response completed';
    r.finishReason = 'cancelled';
  } else {
    r.requestId = o.requestId;
    a['http.response.status_code'] = o.httpStatus;
    const resp = o.stream ? o.stream.response : o.body;
    if (o.httpStatus >= 400) {
      const err = isJsonObject(o.body) && isJsonObject(o.body.error) ? o.body.error : null;
      r.status = 'error';
      r.statusMessage = err ? str(err.message) : `upstream answered ${o.httpStatus}`;
      r.finishReason = err ? str(err.code) || str(err.type) || 'error' : 'error';
    } else {
      fillFromResponse(r, a, resp, o.stream?.text ?? '');
      if (o.stream) {
        a['proxy.stream.events'] = o.stream.events;
        if (o.stream.error) {
          r.status = 'error';
          r.statusMessage = o.stream.error.message;
          r.finishReason = o.stream.error.code;
        } else if (!o.stream.terminal) {
          r.status = 'error';
          r.statusMessage = 'the upstream stream ended before a terminal event';
          r.finishReason = 'stream_truncated';
        }
      }
    }
  }
  Object.assign(a, x.attributes);
  // Cut as OTLP cuts its extracted prompt/response: at a UTF-8 boundary, never inside a PII or secret value,
  // listed in tracegate.truncated under the same names.
  r.prompt = cutMarked(r.prompt, limits.maxStringBytes, a, 'tracegate.prompt');
  r.response = cutMarked(r.response, limits.maxStringBytes, a, 'tracegate.response');
  r.attributes = a;
  r.trainable = isTrainable(r);
  return r;
}

function fillFromResponse(r: SpanRecord, a: Attributes, resp: Json | null, streamedText: string): void {
  r.response = responseOutputText(resp) || streamedText;
  if (!resp) return;
  if (str(resp.id)) a['gen_ai.response.id'] = str(resp.id);
  if (str(resp.model)) {
    r.model = str(resp.model);
    a['gen_ai.response.model'] = r.model;
  }
  const status = str(resp.status);
  r.status = (Object.hasOwn(STATUS, status) ? STATUS[status] : undefined) ?? (status || r.status);
  const output = Array.isArray(resp.output) ? resp.output.filter(isJsonObject) : [];
  const calls = output.filter((i) => i.type === 'function_call');
  if (calls.length)
    a['gen_ai.response.tool_calls'] = calls.map((c) => ({ name: str(c.name), call_id: str(c.call_id) }));
  const refusal = output
    .flatMap((i) => (Array.isArray(i.content) ? i.content : []))
    .find((c) => isJsonObject(c) && c.type === 'refusal');
  if (isJsonObject(refusal)) a['gen_ai.response.refusal'] = str(refusal.refusal);
  if (status === 'incomplete')
    r.finishReason = isJsonObject(resp.incomplete_details)
      ? str(resp.incomplete_details.reason) || 'incomplete'
      : 'incomplete';
  else if (status === 'failed') {
    const e = isJsonObject(resp.error) ? resp.error : {};
    r.finishReason = str(e.code) || 'error';
    r.statusMessage = str(e.message);
  } else if (status === 'completed') r.finishReason = calls.length ? 'tool_calls' : 'stop';

  const u = isJsonObject(resp.usage) ? resp.usage : null;
  if (!u) return;
  const inDetails = isJsonObject(u.input_tokens_details) ? u.input_tokens_details : {};
  const outDetails = isJsonObject(u.output_tokens_details) ? u.output_tokens_details : {};
  r.promptTokens = tokens(u.input_tokens);
  r.completionTokens = tokens(u.output_tokens);
  r.totalTokens = tokens(u.total_tokens) || Math.min(r.promptTokens + r.completionTokens, MAX_TOKENS);
  const cached = tokens(inDetails.cached_tokens);
  const cacheWrite = tokens(inDetails.cache_write_tokens);
  const reasoning = tokens(outDetails.reasoning_tokens);
  a['gen_ai.usage.cache_read.input_tokens'] = cached;
  if (cacheWrite) a['gen_ai.usage.cache_creation.input_tokens'] = cacheWrite;
  a['gen_ai.usage.reasoning.output_tokens'] = reasoning;
  // input_tokens include the cached ones, which is what priceUsd expects; it charges those at the cache rate.
  r.costUsd = priceUsd(r.model, r.provider, {
    input: r.promptTokens,
    output: r.completionTokens,
    cacheRead: cached,
    cacheWrite,
  });
  a['tracegate.cost_source'] = r.costUsd > 0 ? 'price_table' : 'unpriced';
}

/** A provider name for pricing and display, from the upstream host. Anything unknown speaks the OpenAI API. */
export function providerFor(baseUrl: string): string {
  const host = new URL(baseUrl).hostname;
  if (host.endsWith('.openai.azure.com')) return 'azure';
  if (host.endsWith('openrouter.ai')) return 'openrouter';
  if (host.endsWith('groq.com')) return 'groq';
  if (host.endsWith('x.ai')) return 'xai';
  return 'openai';
}
