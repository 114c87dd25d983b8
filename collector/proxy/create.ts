// POST /api/proxy/provider/responses, in steps: read and check the request, run the governance preflight, forward
// it to the workspace's provider, relay the answer (JSON, or SSE chunk by chunk) and persist the trace in the same
// call. Errors use the provider's shape so SDKs surface them.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { Context } from 'koa';
import type { Dispatcher } from 'undici';
import type { Caller, PreflightResult } from '../../core/ports/ingest.ts';
import type { SpanRecord } from '../../core/record.ts';
import {
  FREE_FORM,
  mapProxy,
  type ProxyExchange,
  providerFor,
  ResponsesStreamAssembler,
  type StreamSummary,
} from '../../mappers/proxy.ts';
import { duplicateKey, foldedFields, isJsonObject } from '../../platform/json-prescan.ts';
import type { RouteContext } from '../host/context.ts';
import { breathe, LARGE_BODY } from '../host/receiver.ts';
import { bodyKind, parseJson, readBody, releaseBody } from '../http/body.ts';
import { HttpError } from '../http/errors.ts';
import type { ResolvedSettings } from '../workspaces/settings.ts';
import { PATH } from './docs.ts';
import { CALLER_KEY_REJECTED, HELD_KEY_REJECTED, heldKeyRejected } from './key-rejections.ts';
import { ownershipOf, type ResponseOwners, serverOf, upstreamOf } from './ownership.ts';
import type { Preflight } from './preflight.ts';
import { blockMessage } from './preflight.ts';
import type { PreflightThread } from './preflight-thread.ts';
import { storedObjectReference } from './references.ts';
import {
  passBackHeaders,
  RESPONSE_ID,
  responsesTarget,
  type TransportFailure,
  transportFailure,
  type Upstreams,
  upstreamHeaders,
} from './upstream.ts';

/** Headers stored as the trace's environment and action name; the native route's limit for those fields (256). */
const LABEL_HEADERS = ['x-tracegate-environment', 'x-tracegate-action'] as const;
const MAX_LABEL_CHARS = 256;

/** What the proxy routes share: the upstream pools, the preflight thread, the memory of response ids given out. */
export interface ProxyParts {
  r: RouteContext;
  upstreams: Upstreams;
  preflights: PreflightThread;
  owners: ResponseOwners;
}

type Json = Record<string, unknown>;
type Provider = ResolvedSettings['provider'];

/** Join the caller's W3C trace when it sent one; otherwise a new trace. */
function traceContext(traceparent: string): { traceId: string; parentSpanId: string } {
  const m = /^[\da-f]{2}-([\da-f]{32})-([\da-f]{16})-[\da-f]{2}$/.exec(traceparent.trim());
  if (m && !/^0+$/.test(m[1]!) && !/^0+$/.test(m[2]!)) return { traceId: m[1]!, parentSpanId: m[2]! };
  return { traceId: randomUUID().replaceAll('-', ''), parentSpanId: '' };
}

/** randomUUID draws from a batched entropy cache: much cheaper per call than randomBytes on the hot path. */
const newSpanId = () => randomUUID().replaceAll('-', '').slice(16);

/** Whether the proxy gave this response id to the caller's workspace from the provider at `baseUrl`. */
export function ownsResponse(parts: ProxyParts, ctx: Context, id: string, baseUrl: string): Promise<boolean> {
  if (!RESPONSE_ID.test(id)) return Promise.resolve(false);
  const workspaceId = (ctx.state.caller as Caller).workspaceId;
  return parts.owners.owns(workspaceId, id, upstreamOf(baseUrl), (work) => parts.r.read(work));
}

/** Bounded labels, a JSON object with a model, each key once (the body goes out as sent: it must read one way). */
async function readRequest(ctx: Context, r: RouteContext): Promise<{ raw: Buffer; body: Json }> {
  bodyKind(ctx, ['json']);
  // Stored and filtered on like the native route's labels: the same limit, checked before anything is read.
  for (const header of LABEL_HEADERS) {
    const value = ctx.get(header);
    if (value.length > MAX_LABEL_CHARS) {
      const name = header.replace(/(^|-)[a-z]/g, (c) => c.toUpperCase());
      const message = `${name} is ${value.length} characters long; the limit is ${MAX_LABEL_CHARS}`;
      throw new HttpError(400, 'invalid_header', message, { type: 'invalid_request_error', param: name });
    }
  }
  const raw = await readBody(ctx, r.config.MAX_BODY_BYTES);
  const body = parseJson(raw, r.config.MAX_JSON_DEPTH, r.config.MAX_JSON_VALUES);
  if (!isJsonObject(body) || typeof body.model !== 'string' || body.model === '') {
    throw new HttpError(400, 'invalid_request', 'the body must be a JSON object with a string `model`', {
      type: 'invalid_request_error',
      param: 'model',
    });
  }
  if (raw.length >= LARGE_BODY) await breathe(); // parsing and the key scan below each take a while on a large body
  const dup = duplicateKey(raw, true, FREE_FORM);
  if (dup !== null) {
    const name = /^[a-z_]{1,40}$/i.test(dup) ? dup : null; // a caller-named key could hold anything: not echoed (audit keeps messages)
    throw new HttpError(
      400,
      'duplicate_key',
      `the body repeats ${name ? `the key "${name}"` : 'a key'} in one object (field names differing only in case count as the same); send each key once`,
      { type: 'invalid_request_error', param: name },
    );
  }
  return { raw, body };
}

/**
 * With the key tracegate holds, the request may name only stored responses the proxy gave this workspace, and no
 * other object stored at the provider; otherwise the provider's own answer for an unknown id.
 */
async function checkReferences(parts: ProxyParts, ctx: Context, body: Json, provider: Provider, callerKey: string) {
  const fields = foldedFields(body); // any spelling of a key, as an upstream may read it
  const requireOwned = async (id: unknown, code: string, what: string, param: string) => {
    if (id === undefined || id === null || callerKey) return;
    // Not a string (a list, an object): unchecked, an upstream reading it leniently could reach another's response.
    if (typeof id !== 'string')
      throw new HttpError(400, 'invalid_type', `${param} must be a string`, { type: 'invalid_request_error', param });
    if (await ownsResponse(parts, ctx, id, provider.baseUrl)) return;
    const shown = RESPONSE_ID.test(id) ? id : '…';
    throw new HttpError(400, code, `${what} with id '${shown}' not found.`, { type: 'invalid_request_error', param });
  };
  const previous = fields.get('previous_response_id');
  await requireOwned(previous, 'previous_response_not_found', 'Previous response', 'previous_response_id');
  // Prompt-cache diagnostics compare with a stored response.
  const cacheOptions = fields.get('prompt_cache_options');
  await requireOwned(
    isJsonObject(cacheOptions) ? foldedFields(cacheOptions).get('comparison_response_id') : undefined,
    'response_not_found',
    'Response',
    'prompt_cache_options.comparison_response_id',
  );
  const stored = !callerKey && provider.sharedKey ? storedObjectReference(body) : null;
  if (stored !== null) {
    const param = /^[\w.[\]]{1,200}$/.test(stored) ? stored : null; // a path through a key that is not a plain word is not echoed
    throw new HttpError(
      400,
      'stored_object_not_allowed',
      `the request names an object stored at the provider${param ? ` (${param})` : ''}: a conversation, an item, container or skill reference, a file, a vector store, a container or an MCP tunnel. With the provider key tracegate holds for every workspace, only responses the proxy gave this workspace can be named (previous_response_id); give the workspace a provider key of its own (tracegate provider set --api-key-env), or send yours in X-Provider-Api-Key where the workspace allows it`,
      { type: 'invalid_request_error', param },
    );
  }
  return { stream: fields.get('stream') === true };
}

/** One call on its way to the provider: what its trace holds so far, and how it ends. */
class Exchange {
  readonly ctx: Context;
  readonly parts: ProxyParts;
  readonly pre: Preflight;
  readonly provider: Provider;
  readonly callerKey: string;
  readonly base: Omit<ProxyExchange, 'endMs' | 'outcome'>;
  readonly abort = new AbortController();

  constructor(
    ctx: Context,
    parts: ProxyParts,
    call: { pre: Preflight; provider: Provider; callerKey: string; stream: boolean; startMs: number },
  ) {
    const { pre, provider, callerKey, stream, startMs } = call;
    this.ctx = ctx;
    this.parts = parts;
    this.pre = pre;
    this.provider = provider;
    this.callerKey = callerKey;
    const { traceId, parentSpanId } = traceContext(ctx.get('traceparent'));
    ctx.set('X-Trace-Id', traceId);
    const server = serverOf(provider.baseUrl);
    this.base = {
      workspaceId: (ctx.state.caller as Caller).workspaceId,
      traceId,
      spanId: newSpanId(),
      parentSpanId,
      startMs,
      request: pre.request,
      prompt: pre.prompt,
      provider: providerFor(provider.baseUrl),
      environment: ctx.get('x-tracegate-environment'),
      actionName: ctx.get('x-tracegate-action'),
      stream,
      attributes: {
        ...pre.attributes,
        'server.address': server.address,
        'server.port': server.port,
        ...(callerKey ? { 'proxy.caller_key': true } : {}),
      },
    };
  }

  /** Stores the trace of the call's outcome; false when it could not be (the answer goes out all the same). */
  finish(outcome: ProxyExchange['outcome'], extra: Partial<ProxyExchange> = {}): Promise<boolean> {
    const attributes = { ...this.base.attributes, ...extra.attributes };
    const exchange = { ...this.base, ...extra, attributes, endMs: Date.now(), outcome };
    const record = mapProxy(exchange, { maxStringBytes: this.parts.r.config.MAX_STRING_BYTES });
    return persist(this.parts, this.ctx, record, { ...this.pre.result, spanId: this.base.spanId });
  }

  /** finish(), saying in a header when the trace could not be stored. */
  async finishMarked(outcome: ProxyExchange['outcome'], extra: Partial<ProxyExchange> = {}): Promise<boolean> {
    const stored = await this.finish(outcome, extra);
    if (!stored) this.ctx.set('X-Tracegate-Telemetry', 'not-stored');
    return stored;
  }

  /** A streamed response's id is the caller's from response.created on: known here before it is passed on. */
  announce(id: unknown): void {
    if (typeof id !== 'string' || !RESPONSE_ID.test(id)) return;
    const { workspaceId, traceId } = this.base;
    this.parts.owners.remember({ workspaceId, responseId: id, upstream: upstreamOf(this.provider.baseUrl), traceId });
  }
}

/**
 * Durable before the answer goes out. On failure (back-pressure) the caller still gets the completion it has paid
 * for, marked X-Tracegate-Telemetry: not-stored: a 503 would make it retry and pay twice.
 */
async function persist(parts: ProxyParts, ctx: Context, record: SpanRecord, preflight: PreflightResult) {
  // Remembered even if the spool refuses the record: the caller has the id, and this collector gave it out.
  const owned = ownershipOf(record);
  if (owned) parts.owners.remember(owned);
  try {
    const caller = ctx.state.caller as Caller;
    const route = `POST ${PATH}`;
    await parts.r.pipeline.ingest([record], { workspaceId: caller.workspaceId, keyId: caller.keyId, route, preflight });
    parts.r.proxyCalls.remember(record); // once durable: a call whose span was lost is nobody's to link to
    parts.r.metrics.ingested.inc({ source: 'proxy' });
    return true;
  } catch (err) {
    ctx.state.log.warn({ err: (err as Error).message, traceId: record.traceId }, 'proxy: telemetry not stored');
    return false;
  }
}

/** 403: the request is well-formed and authenticated but refused; 400 would read as "fix your JSON". */
async function refuseBlocked(ex: Exchange): Promise<never> {
  const message = blockMessage(ex.pre);
  await ex.finishMarked({ kind: 'blocked', message });
  const categories = (ex.pre.attributes['governance.categories'] ?? []) as string[];
  throw new HttpError(403, 'policy_blocked', message, {
    type: 'policy_violation',
    tracegate: { decision: 'block', categories, reasons: ex.pre.reasons.map((x) => x.code), traceId: ex.base.traceId },
  });
}

/** The provider could not be reached or broke off: stored as such, answered in the provider's shape. */
async function transportFailed(ex: Exchange, f: TransportFailure): Promise<never> {
  await ex.finishMarked({ kind: 'transport_error', code: f.code, message: f.message });
  throw new HttpError(f.status, f.code, f.message, { type: 'upstream_error' });
}

/** Sends the (preflighted) request upstream; null when the client left meanwhile (499, stored as cancelled). */
async function forward(ex: Exchange): Promise<Dispatcher.ResponseData | null> {
  const { ctx, parts, provider, callerKey } = ex;
  const target = responsesTarget(provider.baseUrl);
  const caller = ctx.state.caller as Caller;
  try {
    return await parts.upstreams.pool(target.origin).request({
      method: 'POST',
      path: target.path,
      body: ex.pre.forward,
      signal: ex.abort.signal,
      headers: upstreamHeaders(ctx.req.headers, callerKey || provider.apiKey, callerKey !== '', caller.workspaceId),
      headersTimeout: parts.r.config.PROXY_HEADERS_TIMEOUT_MS,
      bodyTimeout: parts.r.config.PROXY_BODY_TIMEOUT_MS,
    });
  } catch (err) {
    if (ex.abort.signal.aborted) {
      ctx.status = 499;
      await ex.finish({ kind: 'cancelled' });
      return null;
    }
    const f = transportFailure(err);
    ctx.state.log.warn({ code: f.code, origin: target.origin }, 'proxy: upstream request failed');
    return transportFailed(ex, f);
  }
}

/** A JSON (or other non-stream) answer: read whole, stored, passed through with the provider's status. */
async function relayJson(ex: Exchange, up: Dispatcher.ResponseData, onClose: () => void): Promise<void> {
  const { ctx } = ex;
  const headers = passBackHeaders(up.headers);
  const requestId = headers['x-request-id'] ?? '';
  const contentType = String(up.headers['content-type'] ?? '');
  const attributes = { 'proxy.upstream_headers_ms': Date.now() - ex.base.startMs };
  let buf: Buffer;
  try {
    buf = Buffer.from(await up.body.arrayBuffer());
  } catch (err) {
    if (!ex.abort.signal.aborted) return transportFailed(ex, transportFailure(err));
    ctx.status = 499;
    await ex.finish({ kind: 'cancelled' });
    return;
  } finally {
    ctx.res.off('close', onClose);
  }
  if (up.statusCode === 401 && !ex.callerKey) {
    const held = { kind: 'upstream', httpStatus: 401, requestId, body: HELD_KEY_REJECTED, stream: null } as const;
    await ex.finishMarked(held, { attributes });
    heldKeyRejected(ctx, responsesTarget(ex.provider.baseUrl).origin);
    return;
  }
  const kept = up.statusCode === 401 ? CALLER_KEY_REJECTED : parsedObject(buf); // a 401 here refused the caller's key
  const outcome = { kind: 'upstream', httpStatus: up.statusCode, requestId, body: kept, stream: null } as const;
  const stored = await ex.finish(outcome, { attributes });
  ctx.status = up.statusCode;
  ctx.set(headers);
  if (!stored) ctx.set('X-Tracegate-Telemetry', 'not-stored');
  if (contentType) ctx.set('Content-Type', contentType);
  ctx.body = buf;
}

/** The body as a JSON object, or null (not JSON: passed through anyway). */
function parsedObject(buf: Buffer): Json | null {
  try {
    const v: unknown = JSON.parse(buf.toString('utf8'));
    return isJsonObject(v) ? v : null;
  } catch {
    return null;
  }
}

/** SSE: raw bytes straight through, each chunk written as it arrives; the parser only reads a copy. */
async function relaySse(ex: Exchange, up: Dispatcher.ResponseData, onClose: () => void): Promise<void> {
  const { ctx } = ex;
  const headers = passBackHeaders(up.headers);
  const requestId = headers['x-request-id'] ?? '';
  const upstreamTtfb = { 'proxy.upstream_headers_ms': Date.now() - ex.base.startMs };
  ctx.respond = false;
  const res = ctx.res;
  res.statusCode = up.statusCode;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.setHeader('Content-Type', String(up.headers['content-type'] ?? ''));
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('X-Accel-Buffering', 'no');
  res.flushHeaders();
  const { summary, failure } = await pipeStream(ex, up);
  ctx.res.off('close', onClose);
  const attributes = {
    ...upstreamTtfb,
    ...(summary.firstDeltaAtMs !== null
      ? { 'gen_ai.response.time_to_first_token_ms': summary.firstDeltaAtMs - ex.base.startMs }
      : {}),
  };
  if (ex.abort.signal.aborted) {
    up.body.destroy();
    // A client that leaves after the terminal event (the SDK's `break` on response.completed) has its whole
    // answer: stored as the provider gave it, below.
    if (!summary.terminal) {
      await ex.finish({ kind: 'cancelled' }, { partial: summary, attributes });
      return;
    }
  }
  let stored: boolean;
  if (failure) {
    // Headers are gone already: tell the client in-band, the way the provider reports stream errors.
    const event = { type: 'error', code: failure.code, message: failure.message, param: null };
    res.write(`event: error\ndata: ${JSON.stringify(event)}\n\n`);
    const outcome = { kind: 'transport_error', code: failure.code, message: failure.message } as const;
    stored = await ex.finish(outcome, { partial: summary, attributes });
  } else {
    const outcome = { kind: 'upstream', httpStatus: up.statusCode, requestId, body: null, stream: summary } as const;
    stored = await ex.finish(outcome, { attributes });
  }
  if (!stored && !res.destroyed) res.write(': tracegate telemetry not stored\n\n');
  res.end();
}

/** Writes each chunk to the client as it comes, reading a copy into the stream's summary. */
async function pipeStream(ex: Exchange, up: Dispatcher.ResponseData) {
  const res = ex.ctx.res;
  const asm = new ResponsesStreamAssembler();
  let failure: TransportFailure | null = null;
  // Known to other collectors once the span is stored; as the stored span will prove it, only for the held key's
  // successful answers.
  let announced = ex.callerKey !== '' || up.statusCode < 200 || up.statusCode >= 300;
  try {
    for await (const chunk of up.body) {
      asm.push(chunk as Buffer, Date.now());
      const response = announced ? null : asm.summary().response;
      if (response) {
        announced = true;
        ex.announce(response.id);
      }
      if (!res.write(chunk)) await once(res, 'drain', { signal: ex.abort.signal });
    }
  } catch (err) {
    if (!ex.abort.signal.aborted) failure = transportFailure(err);
  }
  const summary: StreamSummary = asm.end();
  return { summary, failure };
}

export function createResponse(parts: ProxyParts) {
  const { r } = parts;
  return async (ctx: Context): Promise<void> => {
    const startMs = Date.now();
    const { raw, body } = await readRequest(ctx, r);
    const caller = ctx.state.caller as Caller;
    const settings = await r.settings.forWorkspace(caller.workspaceId);
    const provider = settings.provider;
    const callerKey = provider.allowCallerKey ? ctx.get('x-provider-api-key') : '';
    const { stream } = await checkReferences(parts, ctx, body, provider, callerKey);
    const pre = await parts.preflights.run(settings.policy, raw, body, ctx.get('x-tracegate-environment'));
    const ex = new Exchange(ctx, parts, { pre, provider, callerKey, stream, startMs });
    if (pre.decision === 'block') return refuseBlocked(ex);

    releaseBody(ctx); // parsed and preflighted: what goes upstream is `pre.forward`, and the wait may be long
    // The client went away before we finished answering: stop paying for the upstream generation.
    const onClose = () => {
      if (!ctx.res.writableFinished) ex.abort.abort();
    };
    ctx.res.once('close', onClose);
    if (ctx.req.socket.destroyed) ex.abort.abort(); // gone during the preflight, before the listener was attached
    const up = await forward(ex);
    if (!up) return;
    if (passBackHeaders(up.headers)['x-request-id']) ctx.set('X-Tracegate-Request-Id', ctx.state.requestId as string);
    const contentType = String(up.headers['content-type'] ?? '');
    if (contentType.toLowerCase().startsWith('text/event-stream')) return relaySse(ex, up, onClose);
    return relayJson(ex, up, onClose);
  };
}
