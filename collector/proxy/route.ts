// The proxy routes: POST /api/proxy/provider/responses (create.ts) and the calls about a stored response
// (relay.ts), behind the workspace key, the `proxy` rate limit and the provider's error shape.
import type { Context, Next } from 'koa';
import type { GuardOptions, RouteContext } from '../host/context.ts';
import { createResponse, type ProxyParts } from './create.ts';
import { createDoc, ITEM, PATH, relayDocs } from './docs.ts';
import { ResponseOwners } from './ownership.ts';
import { PreflightThread } from './preflight-thread.ts';
import { relay } from './relay.ts';
import { Upstreams } from './upstream.ts';

export function proxyRoutes(r: RouteContext): void {
  const parts: ProxyParts = {
    r,
    upstreams: new Upstreams(r.config),
    preflights: new PreflightThread(),
    // Stored spans become readable about a flush interval after they are spooled (plus the insert itself).
    owners: new ResponseOwners(r.storage, r.config.FLUSH_INTERVAL_MS + 250),
  };
  r.onClose(() => parts.upstreams.close());
  r.onClose(() => parts.preflights.close());

  /**
   * The provider may stay silent up to its headers or body timeout (a reasoning model, a pause in a stream): while
   * the answer is relayed, the connection's idle limit (TRACEGATE_SOCKET_IDLE_TIMEOUT_MS, app.ts) waits that long
   * too. Node sets its keep-alive timeout back when the answer is finished.
   */
  const upstreamWaits = async (ctx: Context, next: Next) => {
    ctx.state.ownIdleTimeout = true;
    ctx.req.socket.setTimeout(Math.max(r.config.PROXY_HEADERS_TIMEOUT_MS, r.config.PROXY_BODY_TIMEOUT_MS) + 5_000);
    await next();
  };
  const guard: GuardOptions = { limiter: 'proxy', errors: 'provider', auditRefusals: true };

  r.docs.push(createDoc);
  r.on('post', PATH, guard, upstreamWaits, createResponse(parts));
  r.on('get', ITEM, guard, upstreamWaits, relay(parts, 'GET', ''));
  r.on('delete', ITEM, guard, upstreamWaits, relay(parts, 'DELETE', ''));
  r.on('post', `${ITEM}/cancel`, guard, upstreamWaits, relay(parts, 'POST', '/cancel'));
  r.on('get', `${ITEM}/input_items`, guard, upstreamWaits, relay(parts, 'GET', '/input_items'));
  r.docs.push(...relayDocs());
}
