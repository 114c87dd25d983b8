// POST /api/proxy/provider/responses: governance preflight, forward to the workspace's provider (JSON or SSE
// passthrough), and persist the trace in the same call. Errors use the provider's shape so SDKs surface them.
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import type { RouteContext } from '../http/context.ts';
import { bodyKind, parseJson, readBody, releaseBody } from '../http/body.ts';
import { HttpError } from '../../core/errors.ts';
import { providerErrorSchema as providerError } from '../http/openapi.ts';
import { duplicateKey, foldedFields, isJsonObject } from '../../platform/json-prescan.ts';
import type { Caller } from '../workspaces/api-keys.ts';
import type { SpanRecord } from '../../core/record.ts';
import type { PreflightResult } from '../../core/ports/ingest.ts';
import {
  FREE_FORM,
  mapProxy,
  providerFor,
  ResponsesStreamAssembler,
  type ProxyExchange,
  type StreamSummary,
} from '../../mappers/proxy.ts';
import { blockMessage } from './preflight.ts';
import { PreflightThread } from './preflight-thread.ts';
import { ownershipOf, ResponseOwners, serverOf, upstreamOf } from './ownership.ts';
import { storedObjectReference } from './references.ts';
import {
  passBackHeaders,
  RESPONSE_ID,
  responseItemTarget,
  responsesTarget,
  transportFailure,
  upstreamHeaders,
  Upstreams,
} from './upstream.ts';

const PATH = '/api/proxy/provider/responses';
/** Bodies from this size up give the event loop a turn between parsing and the duplicate-key scan. */
const LARGE_BODY = 256 * 1024;
/** A turn for pending I/O (twice setImmediate: the first may run before the poll phase has read anything new). */
const breathe = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

/** Headers stored as the trace's environment and action name; the native route's limit for those fields (256). */
const LABEL_HEADERS = ['x-tracegate-environment', 'x-tracegate-action'] as const;
const MAX_LABEL_CHARS = 256;
const ITEM = `${PATH}/:responseId`;

/** Our own errors (auth, rate limit, validation, policy) in the provider's `{ error: { message, type, param, code } }` shape. */
async function providerErrors(ctx: Context, next: Next): Promise<void> {
  try {
    await next();
  } catch (err) {
    if (!(err instanceof HttpError)) throw err;
    ctx.status = err.status;
    for (const [k, v] of Object.entries(err.headers)) ctx.set(k, v);
    const extra = (err.details && typeof err.details === 'object' ? err.details : {}) as Record<string, unknown>;
    ctx.body = {
      error: {
        message: err.message,
        type: extra.type ?? 'tracegate_error',
        param: extra.param ?? null,
        code: err.code,
        ...(extra.tracegate ? { tracegate: extra.tracegate } : {}),
      },
    };
  }
}

/**
 * The provider refused the key tracegate holds, not the caller's. Passed through, the SDK would report the caller's
 * own key as wrong, and the provider's message quotes part of ours: a 502 instead, which SDKs should not retry.
 */
const HELD_KEY_REJECTED = {
  error: {
    message:
      'the provider rejected the API key tracegate holds for this workspace; an operator must set it (`tracegate provider set` or TRACEGATE_PROVIDER_API_KEY)',
    type: 'upstream_error',
    param: null,
    code: 'provider_auth_failed',
  },
};

/**
 * What the trace stores when the provider refuses the caller's own key: the caller gets the provider's 401 as is
 * (it is their key), but its message quotes part of that key, and we never store a caller's key.
 */
const CALLER_KEY_REJECTED = {
  error: {
    message: "provider rejected the caller's API key (401)",
    type: 'upstream_error',
    param: null,
    code: 'caller_key_rejected',
  },
};

function heldKeyRejected(ctx: Context, origin: string): void {
  ctx.state.log.warn({ origin }, 'proxy: the provider rejected the configured provider API key');
  ctx.status = 502;
  ctx.set('x-should-retry', 'false');
  ctx.body = HELD_KEY_REJECTED;
}

/** Join the caller's W3C trace when it sent one; otherwise a new trace. */
function traceContext(traceparent: string): { traceId: string; parentSpanId: string } {
  const m = /^[\da-f]{2}-([\da-f]{32})-([\da-f]{16})-[\da-f]{2}$/.exec(traceparent.trim());
  if (m && !/^0+$/.test(m[1]!) && !/^0+$/.test(m[2]!)) return { traceId: m[1]!, parentSpanId: m[2]! };
  return { traceId: randomUUID().replaceAll('-', ''), parentSpanId: '' };
}

/** randomUUID draws from a batched entropy cache: much cheaper per call than randomBytes on the hot path. */
const newSpanId = () => randomUUID().replaceAll('-', '').slice(16);

export function proxyRoutes(r: RouteContext): void {
  const mapLimits = { maxStringBytes: r.config.MAX_STRING_BYTES };
  const upstreams = new Upstreams(r.config);
  const preflights = new PreflightThread();
  // Stored spans become readable about a flush interval after they are spooled (plus the insert itself).
  const owners = new ResponseOwners(r.storage, r.config.FLUSH_INTERVAL_MS + 250);
  r.onClose(() => upstreams.close());
  r.onClose(() => preflights.close());
  r.docs.push({
    method: 'post',
    path: PATH,
    tag: 'proxy',
    auth: 'apiKey',
    errors: 'provider',
    summary:
      "Governance preflight, forward to the provider's Responses API (JSON, or SSE passthrough when stream is true), persist the trace",
    request: {
      contentTypes: ['application/json'],
      schema: z.looseObject({
        model: z.string().min(1),
        input: z.unknown().optional(),
        stream: z.boolean().optional(),
      }),
    },
    responses: {
      200: {
        description:
          "The provider's answer passed through (application/json, or text/event-stream when stream is true); X-Trace-Id names the stored trace",
      },
      400: {
        description:
          "Not a JSON object with a non-empty string model, a key repeated in one object (the body is forwarded as sent, so it must read one way only), an X-Tracegate-Environment / X-Tracegate-Action header over 256 characters (code invalid_header), a previous_response_id the proxy did not give this workspace (code previous_response_not_found, as the provider answers an unknown one; checked when the request goes out with the provider key tracegate holds), a prompt_cache_options.comparison_response_id the proxy did not give this workspace (code response_not_found, the same check), either of them given as anything but a string or null (code invalid_type), or, with the server's provider key that workspaces share, a conversation, an item, container or skill reference, a file, vector store, container or MCP tunnel stored at the provider (code stored_object_not_allowed, param the path of the first one)",
        schema: providerError,
      },
      401: { description: 'Missing or invalid workspace API key', schema: providerError },
      403: {
        description:
          'Blocked by the workspace policy: the provider is not called; the attempt is stored with status blocked',
        schema: providerError,
      },
      413: {
        description:
          'The body is over TRACEGATE_MAX_BODY_BYTES after decompression (payload_too_large), or holds more than TRACEGATE_MAX_JSON_VALUES JSON values (too_many_values)',
        schema: providerError,
      },
      429: {
        description:
          "This route's own rate limit, or too many failed authentications from this address (Retry-After, X-RateLimit-Remaining); a provider 429 is passed through as is",
        schema: providerError,
      },
      502: {
        description:
          "The provider could not be reached, or refused the provider API key tracegate holds (code provider_auth_failed; a caller's own key gets the provider's 401 as is)",
        schema: providerError,
      },
      503: {
        description:
          'Retry-After: too many request bodies are being received or processed at once (code server_busy, TRACEGATE_MAX_INFLIGHT_BODY_BYTES), or storage could not be reached for the workspace settings, to verify the API key or to look up the workspace of a previous_response_id (code unavailable)',
        schema: providerError,
      },
      504: { description: 'The provider timed out', schema: providerError },
    },
  });

  /**
   * Durable before the answer goes out. On failure (back-pressure) the caller still gets the completion it has
   * paid for, marked X-Tracegate-Telemetry: not-stored: a 503 would make it retry and pay twice.
   */
  async function persist(ctx: Context, record: SpanRecord, preflight?: PreflightResult): Promise<boolean> {
    // Remembered even if the spool refuses the record: the caller has the id, and this collector gave it out.
    const owned = ownershipOf(record);
    if (owned) owners.remember(owned);
    try {
      const caller = ctx.state.caller as Caller;
      await r.pipeline.ingest([record], {
        workspaceId: caller.workspaceId,
        keyId: caller.keyId,
        route: `POST ${PATH}`,
        ...(preflight ? { preflight } : {}),
      });
      r.metrics.ingested.inc({ source: 'proxy' });
      return true;
    } catch (err) {
      ctx.state.log.warn({ err: (err as Error).message, traceId: record.traceId }, 'proxy: telemetry not stored');
      return false;
    }
  }

  /**
   * The provider may stay silent up to its headers or body timeout (a reasoning model, a pause in a stream): while
   * the answer is relayed, the connection's idle limit (TRACEGATE_SOCKET_IDLE_TIMEOUT_MS, app.ts) waits that long
   * too. Node sets its keep-alive timeout back when the answer is finished.
   */
  /** Whether the proxy gave this response id to the caller's workspace from the provider at `baseUrl`. */
  const ownsResponse = (ctx: Context, id: string, baseUrl: string): Promise<boolean> =>
    RESPONSE_ID.test(id)
      ? owners.owns((ctx.state.caller as Caller).workspaceId, id, upstreamOf(baseUrl), (work) => r.read(work))
      : Promise.resolve(false);

  const upstreamWaits = async (ctx: Context, next: Next) => {
    ctx.state.ownIdleTimeout = true;
    ctx.req.socket.setTimeout(Math.max(r.config.PROXY_HEADERS_TIMEOUT_MS, r.config.PROXY_BODY_TIMEOUT_MS) + 5_000);
    await next();
  };

  r.router.post(PATH, providerErrors, upstreamWaits, ...r.ingestGuard('proxy'), async (ctx) => {
    const startMs = Date.now();
    bodyKind(ctx, ['json']);
    // The labels are stored and filtered on like the native route's: the same limit, checked before anything is read or forwarded.
    for (const header of LABEL_HEADERS) {
      const value = ctx.get(header);
      if (value.length > MAX_LABEL_CHARS) {
        const name = header.replace(/(^|-)[a-z]/g, (c) => c.toUpperCase());
        throw new HttpError(
          400,
          'invalid_header',
          `${name} is ${value.length} characters long; the limit is ${MAX_LABEL_CHARS}`,
          { type: 'invalid_request_error', param: name },
        );
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
    // The body is forwarded as sent: a key given twice could be read one way by the preflight and another upstream.
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
    const caller = ctx.state.caller as Caller;
    const settings = await r.settings.forWorkspace(caller.workspaceId);
    const provider = settings.provider;
    const callerKey = provider.allowCallerKey ? ctx.get('x-provider-api-key') : '';
    const fields = foldedFields(body); // any spelling of a key, as an upstream may read it
    // A stored response the request names goes out with the key tracegate holds only when the proxy gave it to this
    // workspace; otherwise the provider's own answer for an unknown id (the SDK raises the same BadRequestError).
    const requireOwned = async (id: unknown, code: string, what: string, param: string) => {
      if (id === undefined || id === null || callerKey) return;
      // Not a string (a list, an object): unchecked, an upstream reading it leniently could reach another's response.
      if (typeof id !== 'string')
        throw new HttpError(400, 'invalid_type', `${param} must be a string`, { type: 'invalid_request_error', param });
      if (await ownsResponse(ctx, id, provider.baseUrl)) return;
      throw new HttpError(400, code, `${what} with id '${RESPONSE_ID.test(id) ? id : '…'}' not found.`, {
        type: 'invalid_request_error',
        param,
      });
    };
    await requireOwned(
      fields.get('previous_response_id'),
      'previous_response_not_found',
      'Previous response',
      'previous_response_id',
    );
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
    const stream = fields.get('stream') === true;
    const { traceId, parentSpanId } = traceContext(ctx.get('traceparent'));
    ctx.set('X-Trace-Id', traceId);
    const environment = ctx.get('x-tracegate-environment');

    const pre = await preflights.run(settings.policy, raw, body, environment);
    const server = serverOf(provider.baseUrl);
    const base = {
      workspaceId: caller.workspaceId,
      traceId,
      spanId: newSpanId(),
      parentSpanId,
      startMs,
      request: pre.request,
      prompt: pre.prompt,
      provider: providerFor(provider.baseUrl),
      environment,
      actionName: ctx.get('x-tracegate-action'),
      stream,
      attributes: {
        ...pre.attributes,
        'server.address': server.address,
        'server.port': server.port,
        ...(callerKey ? { 'proxy.caller_key': true } : {}),
      },
    };
    const announceStreamed = (id: unknown): void => {
      if (typeof id === 'string' && RESPONSE_ID.test(id))
        owners.remember({
          workspaceId: caller.workspaceId,
          responseId: id,
          upstream: upstreamOf(provider.baseUrl),
          traceId,
        });
    };
    const finish = async (outcome: ProxyExchange['outcome'], extra: Partial<ProxyExchange> = {}) =>
      persist(
        ctx,
        mapProxy(
          { ...base, ...extra, attributes: { ...base.attributes, ...extra.attributes }, endMs: Date.now(), outcome },
          mapLimits,
        ),
        { ...pre.result, spanId: base.spanId },
      );

    if (pre.decision === 'block') {
      // 403: the request is well-formed and authenticated but refused; 400 would read as "fix your JSON".
      const message = blockMessage(pre);
      if (!(await finish({ kind: 'blocked', message }))) ctx.set('X-Tracegate-Telemetry', 'not-stored');
      const categories = (pre.attributes['governance.categories'] ?? []) as string[];
      throw new HttpError(403, 'policy_blocked', message, {
        type: 'policy_violation',
        tracegate: { decision: 'block', categories, reasons: pre.reasons.map((x) => x.code), traceId },
      });
    }

    releaseBody(ctx); // parsed and preflighted: what goes upstream is `pre.forward`, and the wait may be long
    const target = responsesTarget(provider.baseUrl);
    const abort = new AbortController();
    // The client went away before we finished answering: stop paying for the upstream generation.
    const onClose = () => {
      if (!ctx.res.writableFinished) abort.abort();
    };
    ctx.res.once('close', onClose);
    if (ctx.req.socket.destroyed) abort.abort(); // gone during the preflight, before the listener was attached
    const t = r.config;

    let up: Dispatcher.ResponseData;
    try {
      up = await upstreams.pool(target.origin).request({
        method: 'POST',
        path: target.path,
        body: pre.forward,
        signal: abort.signal,
        headers: upstreamHeaders(ctx.req.headers, callerKey || provider.apiKey, callerKey !== '', caller.workspaceId),
        headersTimeout: t.PROXY_HEADERS_TIMEOUT_MS,
        bodyTimeout: t.PROXY_BODY_TIMEOUT_MS,
      });
    } catch (err) {
      if (abort.signal.aborted) {
        ctx.status = 499;
        await finish({ kind: 'cancelled' });
        return;
      }
      const f = transportFailure(err);
      ctx.state.log.warn({ code: f.code, origin: target.origin }, 'proxy: upstream request failed');
      if (!(await finish({ kind: 'transport_error', code: f.code, message: f.message })))
        ctx.set('X-Tracegate-Telemetry', 'not-stored');
      throw new HttpError(f.status, f.code, f.message, { type: 'upstream_error' });
    }

    const headers = passBackHeaders(up.headers);
    const requestId = headers['x-request-id'] ?? '';
    if (requestId) ctx.set('X-Tracegate-Request-Id', ctx.state.requestId as string);
    const contentType = String(up.headers['content-type'] ?? '');
    const upstreamTtfb = { 'proxy.upstream_headers_ms': Date.now() - startMs };

    if (!contentType.toLowerCase().startsWith('text/event-stream')) {
      let buf: Buffer;
      try {
        buf = Buffer.from(await up.body.arrayBuffer());
      } catch (err) {
        if (abort.signal.aborted) {
          ctx.status = 499;
          await finish({ kind: 'cancelled' });
          return;
        }
        const f = transportFailure(err);
        if (!(await finish({ kind: 'transport_error', code: f.code, message: f.message })))
          ctx.set('X-Tracegate-Telemetry', 'not-stored');
        throw new HttpError(f.status, f.code, f.message, { type: 'upstream_error' });
      } finally {
        ctx.res.off('close', onClose);
      }
      let json: Record<string, unknown> | null = null;
      try {
        const v: unknown = JSON.parse(buf.toString('utf8'));
        json = isJsonObject(v) ? v : null;
      } catch {
        /* not JSON: pass it through anyway */
      }
      if (up.statusCode === 401 && !callerKey) {
        if (
          !(await finish(
            { kind: 'upstream', httpStatus: 401, requestId, body: HELD_KEY_REJECTED, stream: null },
            { attributes: upstreamTtfb },
          ))
        )
          ctx.set('X-Tracegate-Telemetry', 'not-stored');
        heldKeyRejected(ctx, target.origin);
        return;
      }
      const kept = up.statusCode === 401 ? CALLER_KEY_REJECTED : json; // a 401 here refused the caller's key
      const stored = await finish(
        { kind: 'upstream', httpStatus: up.statusCode, requestId, body: kept, stream: null },
        { attributes: upstreamTtfb },
      );
      ctx.status = up.statusCode;
      ctx.set(headers);
      if (!stored) ctx.set('X-Tracegate-Telemetry', 'not-stored');
      if (contentType) ctx.set('Content-Type', contentType);
      ctx.body = buf;
      return;
    }

    // SSE: raw bytes straight through, each chunk written as it arrives; the parser only reads a copy.
    ctx.respond = false;
    const res = ctx.res;
    res.statusCode = up.statusCode;
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    res.setHeader('Content-Type', contentType);
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    const asm = new ResponsesStreamAssembler();
    let failure: ReturnType<typeof transportFailure> | null = null;
    // The id is the caller's from response.created on (a background stream may be cancelled while it runs): known
    // to this collector before the chunk holding it is passed on, to other collectors once the span is stored.
    let announced = callerKey !== '' || up.statusCode < 200 || up.statusCode >= 300; // as the stored span will prove it
    try {
      for await (const chunk of up.body) {
        asm.push(chunk as Buffer, Date.now());
        const response = announced ? null : asm.summary().response;
        if (response) {
          announced = true;
          announceStreamed(response.id);
        }
        if (!res.write(chunk)) await once(res, 'drain', { signal: abort.signal });
      }
    } catch (err) {
      if (!abort.signal.aborted) failure = transportFailure(err);
    }
    const summary: StreamSummary = asm.end();
    ctx.res.off('close', onClose);
    const timing = {
      ...upstreamTtfb,
      ...(summary.firstDeltaAtMs !== null
        ? { 'gen_ai.response.time_to_first_token_ms': summary.firstDeltaAtMs - startMs }
        : {}),
    };

    if (abort.signal.aborted) {
      up.body.destroy();
      // A client that leaves after the terminal event (the SDK's `break` on response.completed) has its whole
      // answer: stored as the provider gave it, below.
      if (!summary.terminal) {
        await finish({ kind: 'cancelled' }, { partial: summary, attributes: timing });
        return;
      }
    }
    if (failure) {
      // Headers are gone already: tell the client in-band, the way the provider reports stream errors.
      res.write(
        `event: error\ndata: ${JSON.stringify({ type: 'error', code: failure.code, message: failure.message, param: null })}\n\n`,
      );
      const stored = await finish(
        { kind: 'transport_error', code: failure.code, message: failure.message },
        { partial: summary, attributes: timing },
      );
      if (!stored && !res.destroyed) res.write(': tracegate telemetry not stored\n\n');
    } else {
      const stored = await finish(
        { kind: 'upstream', httpStatus: up.statusCode, requestId, body: null, stream: summary },
        { attributes: timing },
      );
      if (!stored && !res.destroyed) res.write(': tracegate telemetry not stored\n\n');
    }
    res.end();
  });

  // Calls about a stored response (retrieve, delete, cancel, input items), so the official client's
  // `responses.retrieve(id)` and friends work through the proxy too. Passed through as they are: no
  // preflight (no prompt goes out) and no trace (no model call), same key, limit and provider settings.
  // With the key tracegate holds, only for ids the proxy gave the caller's workspace (ownership.ts).
  const relay = (method: 'GET' | 'DELETE' | 'POST', sub: '' | '/cancel' | '/input_items') => async (ctx: Context) => {
    const id = String(ctx.params.responseId ?? '');
    if (!RESPONSE_ID.test(id))
      throw new HttpError(400, 'invalid_request', 'malformed response id', {
        type: 'invalid_request_error',
        param: 'response_id',
      });
    const caller = ctx.state.caller as Caller;
    const provider = (await r.settings.forWorkspace(caller.workspaceId)).provider;
    const callerKey = provider.allowCallerKey ? ctx.get('x-provider-api-key') : '';
    const audit = async (outcome: string, status: number) => {
      if (method === 'GET') return;
      // Deleting or cancelling a stored response changes it: audited (durably) with its outcome, refusals too.
      // The call has happened (or been refused) by now, so a spool that cannot take the record only costs a logged error.
      const rec = r.enrichment.audit.append({
        workspaceId: caller.workspaceId,
        atMs: Date.now(),
        actor: caller.keyId,
        action: method === 'DELETE' ? 'proxy.response.delete' : 'proxy.response.cancel',
        route: `${ctx.method} ${ctx.path}`,
        outcome,
        accepted: 0,
        rejected: 0,
        details: JSON.stringify({ responseId: id, status }),
      });
      await r.pipeline
        .record([rec])
        .catch((err: unknown) => ctx.state.log.error({ err }, 'audit record of a relayed call not spooled'));
    };
    if (!callerKey && !(await ownsResponse(ctx, id, provider.baseUrl))) {
      // The provider's answer for an id it does not know: another workspace's id is not confirmed to exist.
      await audit('denied', 404);
      throw new HttpError(404, 'response_not_found', `Response with id '${id}' not found.`, {
        type: 'invalid_request_error',
      });
    }
    const target = responseItemTarget(provider.baseUrl, id, sub, new URLSearchParams(ctx.querystring));
    const abort = new AbortController();
    ctx.res.once('close', () => {
      if (!ctx.res.writableFinished) abort.abort();
    });
    let up: Dispatcher.ResponseData;
    try {
      up = await upstreams.pool(target.origin).request({
        method,
        path: target.path,
        signal: abort.signal,
        ...(method === 'POST' ? { body: '{}' } : {}),
        headers: upstreamHeaders(ctx.req.headers, callerKey || provider.apiKey, callerKey !== '', caller.workspaceId),
        headersTimeout: r.config.PROXY_HEADERS_TIMEOUT_MS,
        bodyTimeout: r.config.PROXY_BODY_TIMEOUT_MS,
      });
    } catch (err) {
      const f = transportFailure(err);
      throw new HttpError(f.status, f.code, f.message, { type: 'upstream_error' });
    }
    await audit(up.statusCode < 400 ? 'ok' : 'error', up.statusCode);
    if (up.statusCode === 401 && !callerKey) {
      await up.body.dump();
      heldKeyRejected(ctx, target.origin);
      return;
    }
    ctx.status = up.statusCode;
    const headers = passBackHeaders(up.headers);
    ctx.set(headers);
    // As on the create route: the provider's request id takes X-Request-Id, ours moves aside.
    if (headers['x-request-id']) ctx.set('X-Tracegate-Request-Id', ctx.state.requestId as string);
    const contentType = String(up.headers['content-type'] ?? '');
    if (contentType) ctx.set('Content-Type', contentType);
    if (contentType.toLowerCase().startsWith('text/event-stream')) ctx.set('Cache-Control', 'no-cache');
    ctx.body = up.body; // streamed: a retrieve with ?stream=true is SSE
  };
  const guard = [providerErrors, upstreamWaits, ...r.ingestGuard('proxy')];
  r.router.get(ITEM, ...guard, relay('GET', ''));
  r.router.delete(ITEM, ...guard, relay('DELETE', ''));
  r.router.post(`${ITEM}/cancel`, ...guard, relay('POST', '/cancel'));
  r.router.get(`${ITEM}/input_items`, ...guard, relay('GET', '/input_items'));
  for (const [method, path, summary] of [
    ['get', ITEM, 'Retrieve a stored response from the provider (passed through; SSE with ?stream=true)'],
    ['delete', ITEM, 'Delete a stored response at the provider (passed through)'],
    ['post', `${ITEM}/cancel`, 'Cancel a background response at the provider (passed through)'],
    ['get', `${ITEM}/input_items`, 'List the input items of a stored response (passed through)'],
  ] as const) {
    r.docs.push({
      method,
      path: path.replace(':responseId', '{responseId}'),
      tag: 'proxy',
      auth: 'apiKey',
      errors: 'provider',
      summary,
      responses: {
        200: { description: "The provider's answer passed through, with its status" },
        400: { description: 'Malformed response id', schema: providerError },
        401: { description: 'Missing or invalid workspace API key', schema: providerError },
        404: {
          description:
            "With the provider key tracegate holds: the proxy did not give this response id to the caller's workspace from this provider (code response_not_found; the provider is not called). Otherwise the provider's own 404",
          schema: providerError,
        },
        502: {
          description:
            'The provider could not be reached, or refused the provider API key tracegate holds (code provider_auth_failed)',
          schema: providerError,
        },
        503: {
          description:
            "Storage could not be reached for the workspace settings, to verify the API key or to look up the response id's workspace (code unavailable; Retry-After)",
          schema: providerError,
        },
        504: { description: 'The provider timed out (code upstream_timeout)', schema: providerError },
      },
    });
  }
}
