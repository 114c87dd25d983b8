// wrapOpenAI: traces `responses.create` and `chat.completions.create` of an `openai` client, JSON and streamed.
// The application gets exactly what the unwrapped client gives (the same promise object with the same methods, the
// same data, the same stream, the same errors); the SDK only watches. The methods are replaced on the client's own
// resource objects, so the client's helpers that call them (`responses.stream()`, `responses.parse()`,
// `chat.completions.stream()`, `runTools()`) are traced too.
import type { TraceInput } from './payloads.ts';
import { chatPrompt, responsesOutputText, responsesPrompt } from './render.ts';

type Json = Record<string, unknown>;
type Api = 'responses' | 'chat';

export interface WrapOptions {
  actionName?: string;
  environment?: string;
  /** Added to every trace's metadata (the request's own `metadata` is merged over it). */
  metadata?: Record<string, unknown>;
  /** Added to every trace's parameters (`trainingPreferred`…). */
  parameters?: Record<string, unknown>;
  /**
   * Whether the client calls tracegate's proxy (`…/api/proxy/provider`), which stores a trace of every call itself.
   * Then the SDK sends no trace of its own (that would store the call twice), passes `actionName` and
   * `environment` to the proxy as `X-Tracegate-Action` / `X-Tracegate-Environment`, and `traceIdOf()` answers the
   * proxy's `X-Trace-Id`. Default: detected from the client's `baseURL`.
   */
  proxied?: boolean;
}

/** What the wrapper needs from the Tracegate client. */
export interface Recorder {
  record(trace: TraceInput): void;
  remember(result: unknown, traceId: string): void;
  newTraceId(): string;
  internal(where: string, err: unknown): void;
  alreadyWrapped(): void;
}

const WRAPPED = Symbol.for('tracegate.wrapOpenAI');
const PROXY_PATH = /\/api\/proxy\/provider\/?$/;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

export function wrapClient<T extends object>(client: T, rec: Recorder, opts: WrapOptions): T {
  const c = client as Json & { [WRAPPED]?: boolean };
  if (c[WRAPPED]) {
    rec.alreadyWrapped();
    return client;
  }
  const baseURL = str(c.baseURL);
  const proxied = opts.proxied ?? PROXY_PATH.test(baseURL);
  const ctx: Ctx = { rec, opts, proxied, provider: providerFor(baseURL) };
  patch(c.responses, 'responses', ctx);
  patch(isObject(c.chat) ? c.chat.completions : undefined, 'chat', ctx);
  Object.defineProperty(c, WRAPPED, { value: true, configurable: true });
  return client;
}

interface Ctx {
  rec: Recorder;
  opts: WrapOptions;
  proxied: boolean;
  provider: string;
}

interface Call {
  api: Api;
  body: Json;
  startMs: number;
  traceId: string;
  ctx: Ctx;
  done: boolean;
}

function patch(resource: unknown, api: Api, ctx: Ctx): void {
  if (!isObject(resource) || typeof resource.create !== 'function') return;
  const original = resource.create as ((...args: unknown[]) => unknown) & { [WRAPPED]?: boolean };
  if (original[WRAPPED]) return;
  const create = function (this: unknown, ...args: unknown[]): unknown {
    let call: Call | undefined;
    try {
      call = begin(api, args, ctx);
    } catch (err) {
      ctx.rec.internal('wrapOpenAI', err);
    }
    const result = original.apply(this, args);
    if (!call) return result;
    try {
      return watch(result, call);
    } catch (err) {
      ctx.rec.internal('wrapOpenAI', err);
      return result;
    }
  };
  Object.defineProperty(create, WRAPPED, { value: true });
  resource.create = create;
}

function begin(api: Api, args: unknown[], ctx: Ctx): Call {
  const body = isObject(args[0]) ? args[0] : {};
  if (ctx.proxied) labelForProxy(args, ctx.opts);
  return { api, body, startMs: Date.now(), traceId: ctx.rec.newTraceId(), ctx, done: false };
}

/** The wrapper's labels reach the proxy's trace as its headers (they are not forwarded to the provider). */
function labelForProxy(args: unknown[], opts: WrapOptions): void {
  const labels: Record<string, string> = {};
  if (opts.actionName) labels['X-Tracegate-Action'] = opts.actionName;
  if (opts.environment) labels['X-Tracegate-Environment'] = opts.environment;
  if (!Object.keys(labels).length) return;
  const options = args[1];
  if (options === undefined) args[1] = { headers: labels };
  else if (isObject(options) && (options.headers === undefined || isObject(options.headers)))
    args[1] = { ...options, headers: { ...labels, ...(options.headers as Json | undefined) } };
}

type Then = (ok?: (v: unknown) => unknown, ko?: (e: unknown) => unknown) => Promise<unknown>;
interface ApiPromiseLike {
  then: Then;
  withResponse(): Promise<unknown>;
  asResponse?(): Promise<{ headers?: { get(name: string): string | null } }>;
  _thenUnwrap?(transform: unknown): unknown;
}

/**
 * The client's answer is an APIPromise: it parses only when someone awaits it (`then`) or asks `withResponse()`,
 * while `asResponse()` hands over the raw body instead. `then`, `catch`, `finally` and `withResponse` are
 * redirected, on this one object, through the original `then` plus a look at the data before the application gets
 * it (to tap a stream, or to record the answer); `asResponse()` is left alone (the body is the application's to
 * read, so that call is not traced). Whatever the original methods do, they still do: `withResponse()` runs the
 * original after the look. `_thenUnwrap()`, with which the client's own helpers (`responses.parse()`,
 * `responses.stream()`) derive a promise that parses the answer afresh, gives a derived promise watched the same way.
 */
function watch(result: unknown, call: Call): unknown {
  const p = result as ApiPromiseLike;
  if (!isObject(result) || typeof p.then !== 'function' || typeof p.withResponse !== 'function') return result;
  const then = p.then;
  const withResponse = p.withResponse;
  const asResponse = p.asResponse;
  const thenUnwrap = p._thenUnwrap;
  let seen: Promise<unknown> | undefined;
  const observed = () =>
    (seen ??= then.call(
      p,
      async (data: unknown) => {
        // Headers are needed only for the proxy's X-Trace-Id.
        const headers = call.ctx.proxied ? (await asResponse?.call(p).catch(() => undefined))?.headers : undefined;
        guard(call, () => settle(call, data, headers?.get('x-trace-id') ?? undefined));
        return data;
      },
      (err: unknown) => {
        guard(call, () => failed(call, err));
        throw err;
      },
    ));
  const methods = {
    // biome-ignore lint/suspicious/noThenProperty: the object is a promise; its own `then` must stay one.
    then: (ok?: (v: unknown) => unknown, ko?: (e: unknown) => unknown) => observed().then(ok, ko),
    catch: (ko?: (e: unknown) => unknown) => observed().catch(ko),
    finally: (f?: () => void) => observed().finally(f),
    withResponse: () => observed().then(() => withResponse.call(p)),
    ...(typeof thenUnwrap === 'function'
      ? { _thenUnwrap: (transform: unknown) => watch(thenUnwrap.call(p, transform), call) }
      : {}),
  };
  for (const [name, value] of Object.entries(methods))
    Object.defineProperty(p, name, { value, configurable: true, writable: true });
  return p;
}

function guard(call: Call, fn: () => void): void {
  try {
    fn();
  } catch (err) {
    call.ctx.rec.internal('wrapOpenAI', err);
  }
}

function settle(call: Call, data: unknown, proxyTraceId: string | undefined): void {
  if (call.ctx.proxied) {
    if (proxyTraceId) call.ctx.rec.remember(data, proxyTraceId);
    return;
  }
  call.ctx.rec.remember(data, call.traceId);
  if (call.body.stream === true && isObject(data) && Symbol.asyncIterator in data) {
    tapStream(data, call);
    return;
  }
  if (isObject(data)) finish(call, call.api === 'responses' ? fromResponse(data) : fromChatCompletion(data));
}

function failed(call: Call, err: unknown): void {
  if (call.ctx.proxied) {
    const id = (err as { headers?: { get?(n: string): string | null } })?.headers?.get?.('x-trace-id');
    if (id) call.ctx.rec.remember(err, id);
    return;
  }
  call.ctx.rec.remember(err, call.traceId);
  finish(call, fromError(err));
}

/** What a finished call adds to the trace. */
interface Outcome {
  status: string;
  model?: string;
  response?: string;
  finishReason?: string;
  usage?: { input?: number; output?: number; total?: number; cached?: number; reasoning?: number };
  attributes?: Json;
}

function finish(call: Call, o: Outcome): void {
  if (call.done) return;
  call.done = true;
  const { ctx, body } = call;
  const requestMetadata = isObject(body.metadata) ? body.metadata : undefined;
  const metadata = ctx.opts.metadata || requestMetadata ? { ...ctx.opts.metadata, ...requestMetadata } : undefined;
  const u = o.usage ?? {};
  const attributes: Json = {
    'gen_ai.operation.name': call.api === 'responses' ? 'responses' : 'chat',
    'gen_ai.request.model': str(body.model) || undefined,
    'gen_ai.request.stream': body.stream === true,
    'gen_ai.usage.cache_read.input_tokens': u.cached,
    'gen_ai.usage.reasoning.output_tokens': u.reasoning,
    ...o.attributes,
  };
  ctx.rec.record({
    requestId: call.traceId,
    model: o.model || str(body.model) || undefined,
    provider: ctx.provider,
    prompt: call.api === 'responses' ? responsesPrompt(body) : chatPrompt(body),
    response: o.response,
    status: o.status,
    actionName: ctx.opts.actionName,
    environment: ctx.opts.environment,
    parameters: ctx.opts.parameters,
    metadata,
    metrics: {
      promptTokens: u.input,
      completionTokens: u.output,
      totalTokens: u.total,
      latencyMs: Math.max(0, Date.now() - call.startMs),
      finishReason: o.finishReason || undefined,
    },
    attributes,
  });
}

// ---- JSON answers

const RESPONSE_STATUS: Record<string, string> = { failed: 'error' };

function fromResponse(resp: Json): Outcome {
  const status = str(resp.status) || 'completed';
  const output = Array.isArray(resp.output) ? resp.output.filter(isObject) : [];
  const calls = output.filter((i) => i.type === 'function_call');
  const u = isObject(resp.usage) ? resp.usage : {};
  const inDetails = isObject(u.input_tokens_details) ? u.input_tokens_details : {};
  const outDetails = isObject(u.output_tokens_details) ? u.output_tokens_details : {};
  const error = isObject(resp.error) ? resp.error : undefined;
  let finishReason = '';
  if (status === 'completed') finishReason = calls.length ? 'tool_calls' : 'stop';
  else if (status === 'incomplete')
    finishReason = str(isObject(resp.incomplete_details) ? resp.incomplete_details.reason : '') || 'incomplete';
  else if (status === 'failed') finishReason = str(error?.code) || 'error';
  return {
    status: RESPONSE_STATUS[status] ?? status,
    model: str(resp.model),
    response: responsesOutputText(resp),
    finishReason,
    usage: {
      input: num(u.input_tokens),
      output: num(u.output_tokens),
      total: num(u.total_tokens),
      cached: num(inDetails.cached_tokens),
      reasoning: num(outDetails.reasoning_tokens),
    },
    attributes: {
      'gen_ai.response.id': str(resp.id) || undefined,
      'gen_ai.response.tool_calls': calls.length
        ? calls.map((c) => ({ name: str(c.name), call_id: str(c.call_id) }))
        : undefined,
      error: error ? { code: str(error.code), message: str(error.message) } : undefined,
    },
  };
}

function fromChatCompletion(c: Json): Outcome {
  const choice = Array.isArray(c.choices) && isObject(c.choices[0]) ? c.choices[0] : {};
  const message = isObject(choice.message) ? choice.message : {};
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls.filter(isObject) : [];
  const u = isObject(c.usage) ? c.usage : {};
  return chatOutcome({
    model: str(c.model),
    id: str(c.id),
    text: str(message.content) || str(message.refusal),
    finishReason: str(choice.finish_reason),
    calls: calls.map((t) => ({ name: str(isObject(t.function) ? t.function.name : ''), call_id: str(t.id) })),
    usage: u,
  });
}

function chatOutcome(x: {
  model: string;
  id: string;
  text: string;
  finishReason: string;
  calls: Array<{ name: string; call_id: string }>;
  usage: Json;
  status?: string;
}): Outcome {
  const inDetails = isObject(x.usage.prompt_tokens_details) ? x.usage.prompt_tokens_details : {};
  const outDetails = isObject(x.usage.completion_tokens_details) ? x.usage.completion_tokens_details : {};
  return {
    // A reply cut at max_tokens is incomplete, as the Responses API says of one.
    status: x.status ?? (x.finishReason === 'length' ? 'incomplete' : 'completed'),
    model: x.model,
    response: x.text,
    finishReason: x.finishReason,
    usage: {
      input: num(x.usage.prompt_tokens),
      output: num(x.usage.completion_tokens),
      total: num(x.usage.total_tokens),
      cached: num(inDetails.cached_tokens),
      reasoning: num(outDetails.reasoning_tokens),
    },
    attributes: {
      'gen_ai.response.id': x.id || undefined,
      'gen_ai.response.tool_calls': x.calls.length ? x.calls : undefined,
    },
  };
}

function fromError(err: unknown): Outcome {
  const e = (isObject(err) ? err : {}) as Json;
  const status = num(e.status);
  // openai's errors leave `name` as 'Error': the class says which one it is.
  const cls = err instanceof Error ? err.constructor.name : '';
  const type = (cls && cls !== 'Error' ? cls : str(e.name)) || 'Error';
  const code = str(e.code) || str(e.type) || (status ? String(status) : type);
  return {
    status: 'error',
    finishReason: code,
    attributes: {
      'http.response.status_code': status,
      error: { type, code, message: str(e.message) || String(err) },
    },
  };
}

// ---- streams

interface Tap {
  push(event: unknown): void;
  /** The outcome when the stream ended: `done` (fully read), `return` (left early), `throw` (broke). */
  end(how: 'done' | 'return' | 'throw', err?: unknown): Outcome;
}

/**
 * The stream object stays the application's; only where its events come from is wrapped, so every way of reading
 * it (`for await`, `tee()`, `toReadableStream()`) passes them by the SDK once. The trace is sent when the stream
 * ends: fully read, left early (`break`), or broken.
 */
function tapStream(stream: Json, call: Call): void {
  const tap: Tap = call.api === 'responses' ? responsesTap() : chatTap();
  const end = (how: 'done' | 'return' | 'throw', err?: unknown) => guard(call, () => finish(call, tap.end(how, err)));
  const wrap = (source: AsyncIterator<unknown>): AsyncIterator<unknown> => ({
    async next(...args: [] | [unknown]) {
      let r: IteratorResult<unknown>;
      try {
        r = await source.next(...args);
      } catch (err) {
        end('throw', err);
        throw err;
      }
      if (r.done) end('done');
      else guard(call, () => tap.push(r.value));
      return r;
    },
    async return(value?: unknown) {
      end('return');
      return source.return ? source.return(value) : { done: true, value };
    },
    ...(source.throw ? { throw: (e?: unknown) => source.throw!(e) } : {}),
  });
  // openai's Stream reads its events from `iterator`, which every way of consuming it calls.
  const s = stream as {
    iterator?: () => AsyncIterator<unknown>;
    [Symbol.asyncIterator]?: () => AsyncIterator<unknown>;
  };
  if (typeof s.iterator === 'function') {
    const from = s.iterator;
    s.iterator = () => wrap(from.call(stream));
  } else {
    const from = s[Symbol.asyncIterator]!;
    Object.defineProperty(stream, Symbol.asyncIterator, {
      value: () => wrap(from.call(stream)),
      configurable: true,
      writable: true,
    });
  }
}

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed', 'response.cancelled']);

function responsesTap(): Tap {
  let text = '';
  let last: Json | undefined;
  let terminal = false;
  let error: Json | undefined;
  return {
    push(ev) {
      if (!isObject(ev)) return;
      const type = str(ev.type);
      if (type === 'response.output_text.delta') text += str(ev.delta);
      else if (type === 'error') error = isObject(ev.error) ? ev.error : ev;
      else if (type.startsWith('response.') && isObject(ev.response) && !terminal) {
        last = ev.response;
        terminal = TERMINAL.has(type);
      }
    },
    end(how, err) {
      const o: Outcome = last ? fromResponse(last) : { status: 'error' };
      if (!o.response) o.response = text;
      if (error || how === 'throw') {
        const e = error ?? (isObject(err) ? err : { message: String(err) });
        return {
          ...o,
          status: 'error',
          finishReason: str(e.code) || 'error',
          attributes: { ...o.attributes, error: { code: str(e.code), message: str(e.message) } },
        };
      }
      if (terminal) return o;
      if (how === 'return') return { ...o, status: 'cancelled', finishReason: 'cancelled' };
      return { ...o, status: 'error', finishReason: 'stream_truncated' };
    },
  };
}

function chatTap(): Tap {
  let text = '';
  let model = '';
  let id = '';
  let finishReason = '';
  let usage: Json = {};
  const calls = new Map<number, { name: string; call_id: string }>();
  return {
    push(chunk) {
      if (!isObject(chunk)) return;
      model ||= str(chunk.model);
      id ||= str(chunk.id);
      if (isObject(chunk.usage)) usage = chunk.usage;
      const choice = Array.isArray(chunk.choices) && isObject(chunk.choices[0]) ? chunk.choices[0] : undefined;
      if (!choice) return;
      if (str(choice.finish_reason)) finishReason = str(choice.finish_reason);
      const delta = isObject(choice.delta) ? choice.delta : {};
      text += str(delta.content);
      for (const t of Array.isArray(delta.tool_calls) ? delta.tool_calls.filter(isObject) : []) {
        const at = num(t.index) ?? 0;
        const call = calls.get(at) ?? { name: '', call_id: '' };
        call.call_id ||= str(t.id);
        call.name ||= str(isObject(t.function) ? t.function.name : '');
        calls.set(at, call);
      }
    },
    end(how, err) {
      const o = chatOutcome({ model, id, text, finishReason, calls: [...calls.values()], usage });
      if (how === 'throw') {
        const e = fromError(err);
        return {
          ...o,
          status: 'error',
          finishReason: e.finishReason,
          attributes: { ...o.attributes, ...e.attributes },
        };
      }
      if (finishReason) return o;
      return how === 'return'
        ? { ...o, status: 'cancelled', finishReason: 'cancelled' }
        : { ...o, status: 'error', finishReason: 'stream_truncated' };
    },
  };
}

/** A provider name for pricing, from the client's base URL (the same rule as the proxy's). */
function providerFor(baseURL: string): string {
  let host = '';
  try {
    host = new URL(baseURL).hostname;
  } catch {
    return 'openai';
  }
  if (host.endsWith('.openai.azure.com')) return 'azure';
  if (host.endsWith('openrouter.ai')) return 'openrouter';
  if (host.endsWith('groq.com')) return 'groq';
  if (host.endsWith('x.ai')) return 'xai';
  return 'openai';
}
