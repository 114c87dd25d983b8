// Calls about a stored response (retrieve, delete, cancel, input items), so the official client's
// `responses.retrieve(id)` and friends work through the proxy too. Passed through as they are: no preflight (no
// prompt goes out) and no trace (no model call), same key, limit and provider settings. With the key tracegate
// holds, only for ids the proxy gave the caller's workspace (ownership.ts).
import type { Context } from 'koa';
import type { Dispatcher } from 'undici';
import type { Caller } from '../../core/ports/ingest.ts';
import { HttpError } from '../http/errors.ts';
import { ownsResponse, type ProxyParts } from './create.ts';
import { heldKeyRejected } from './key-rejections.ts';
import { passBackHeaders, RESPONSE_ID, responseItemTarget, transportFailure, upstreamHeaders } from './upstream.ts';

export type RelayMethod = 'GET' | 'DELETE' | 'POST';
export type RelayPath = '' | '/cancel' | '/input_items';

/** Deleting or cancelling a stored response changes it: audited (durably) with its outcome, refusals too. */
async function audit(
  parts: ProxyParts,
  ctx: Context,
  method: RelayMethod,
  id: string,
  outcome: string,
  status: number,
) {
  if (method === 'GET') return;
  const caller = ctx.state.caller as Caller;
  const rec = parts.r.enrichment.audit.append({
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
  // The call has happened (or been refused) by now, so a spool that cannot take the record only costs a logged error.
  await parts.r.pipeline
    .record([rec])
    .catch((err: unknown) => ctx.state.log.error({ err }, 'audit record of a relayed call not spooled'));
}

export function relay(parts: ProxyParts, method: RelayMethod, sub: RelayPath) {
  const { r } = parts;
  return async (ctx: Context): Promise<void> => {
    const id = String(ctx.params.responseId ?? '');
    if (!RESPONSE_ID.test(id)) {
      const details = { type: 'invalid_request_error', param: 'response_id' };
      throw new HttpError(400, 'invalid_request', 'malformed response id', details);
    }
    const caller = ctx.state.caller as Caller;
    const provider = (await r.settings.forWorkspace(caller.workspaceId)).provider;
    const callerKey = provider.allowCallerKey ? ctx.get('x-provider-api-key') : '';
    if (!callerKey && !(await ownsResponse(parts, ctx, id, provider.baseUrl))) {
      // The provider's answer for an id it does not know: another workspace's id is not confirmed to exist.
      await audit(parts, ctx, method, id, 'denied', 404);
      const details = { type: 'invalid_request_error' };
      throw new HttpError(404, 'response_not_found', `Response with id '${id}' not found.`, details);
    }
    const target = responseItemTarget(provider.baseUrl, id, sub, new URLSearchParams(ctx.querystring));
    const abort = new AbortController();
    ctx.res.once('close', () => {
      if (!ctx.res.writableFinished) abort.abort();
    });
    let up: Dispatcher.ResponseData;
    try {
      up = await parts.upstreams.pool(target.origin).request({
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
    await audit(parts, ctx, method, id, up.statusCode < 400 ? 'ok' : 'error', up.statusCode);
    if (up.statusCode === 401 && !callerKey) {
      await up.body.dump();
      heldKeyRejected(ctx, target.origin);
      return;
    }
    passThrough(ctx, up);
  };
}

function passThrough(ctx: Context, up: Dispatcher.ResponseData): void {
  ctx.status = up.statusCode;
  const headers = passBackHeaders(up.headers);
  ctx.set(headers);
  // As on the create route: the provider's request id takes X-Request-Id, ours moves aside.
  if (headers['x-request-id']) ctx.set('X-Tracegate-Request-Id', ctx.state.requestId as string);
  const contentType = String(up.headers['content-type'] ?? '');
  if (contentType) ctx.set('Content-Type', contentType);
  if (contentType.toLowerCase().startsWith('text/event-stream')) ctx.set('Cache-Control', 'no-cache');
  ctx.body = up.body; // streamed: a retrieve with ?stream=true is SSE
}
