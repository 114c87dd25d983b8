// The Koa app: a scope per request (id, log, metrics, error rendering), the route modules and receivers the route
// host compiles, and the answer for what no route took.
import { randomUUID } from 'node:crypto';
import Router from '@koa/router';
import Koa, { type Context, type Next } from 'koa';
import { authStrategies } from './auth/index.ts';
import { RefusalAudit } from './auth/refusals.ts';
import type { AppDeps } from './host/context.ts';
import { RouteHost } from './host/routes.ts';
import { HttpError, publicError, RENDER, renderEnvelope } from './http/errors.ts';
import { routeModules } from './route-modules.ts';
import { adminRoutes } from './routes/admin.ts';

export function createApp(deps: AppDeps): Koa {
  const app = new Koa();
  app.proxy = false;
  const router = new Router();
  const refusals = new RefusalAudit(deps);
  const host = new RouteHost(deps, router, authStrategies({ ...deps, refusals }), refusals);
  const routes = host.context();
  for (const register of routeModules) register(routes);
  if (deps.adminToken) adminRoutes(routes, deps.adminToken);

  app.use(idleAfterHandler(deps));
  app.use(requestScope(deps));
  app.use(router.routes());
  app.use(unmatched(host.families));
  return app;
}

/**
 * A client that stops reading its response: once the handler is done and the answer is being written, a connection
 * on which nothing moves for SOCKET_IDLE_TIMEOUT_MS is closed (freeing the buffered answer). Not while a handler
 * works (a long verify), nor on routes that wait for a provider (ctx.state.ownIdleTimeout); Node puts its keep-alive
 * timeout back when the answer is finished.
 */
function idleAfterHandler(deps: AppDeps) {
  return async (c: Context, next: Next): Promise<void> => {
    try {
      await next();
    } finally {
      if (!c.state.ownIdleTimeout) c.req.socket.setTimeout(deps.config.SOCKET_IDLE_TIMEOUT_MS);
    }
  };
}

/** Request id and logger, the JSON error envelope for whatever a route family did not render, metrics. */
function requestScope(deps: AppDeps) {
  return async (c: Context, next: Next): Promise<void> => {
    const requestId = /^[\w.-]{1,128}$/.test(c.get('x-request-id')) ? c.get('x-request-id') : randomUUID();
    c.state.requestId = requestId;
    c.state.log = deps.log.child({ requestId });
    c.set('X-Request-Id', requestId);
    const started = performance.now();
    try {
      // Node's own check is off (collector/server.ts) so that this answer has the JSON shape too.
      if (c.req.httpVersion === '1.1' && c.req.headers.host === undefined) {
        throw new HttpError(400, 'malformed_request', 'an HTTP/1.1 request needs a Host header', null, {
          Connection: 'close',
        });
      }
      await next();
      // Serialized here rather than by Koa after every middleware has returned: an answer too large for one string
      // (RangeError: Invalid string length) was then Koa's plain-text 500, past this handler.
      if (isKoaJson(c.body)) c.body = JSON.stringify(c.body);
    } catch (err) {
      renderEnvelope(c, publicError(err, c.state.log));
    } finally {
      const route = (c as unknown as { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      deps.metrics.requests.inc({ method: c.method, route, status: String(c.status) });
      c.state.log.debug(
        { method: c.method, route, status: c.status, ms: +(performance.now() - started).toFixed(2) },
        'request',
      );
    }
  };
}

/**
 * What no route took. A path some route serves with other methods: 405 with Allow (OPTIONS: 204 with Allow), in the
 * error shape of that path's family; any other path: 404. (router.allowedMethods cannot do this here: it decides
 * after next(), and this handler has thrown the 404 by then; in throw mode it also sets no Allow.)
 */
function unmatched(families: ReadonlyMap<string, keyof typeof RENDER>) {
  return async (c: Context): Promise<void> => {
    const layers = (c as unknown as { matched?: Array<{ path: unknown; methods: string[] }> }).matched ?? [];
    const matched = layers.filter((l) => l.methods.length > 0);
    if (matched.length === 0) throw new HttpError(404, 'not_found', `no route for ${c.method} ${c.path}`);
    const allow = [...new Set(matched.flatMap((l) => l.methods))];
    if (!allow.includes('OPTIONS')) allow.push('OPTIONS');
    c.set('Allow', allow.join(', '));
    if (c.method === 'OPTIONS') {
      c.status = 204;
      return;
    }
    const message = `${c.method} is not allowed on ${c.path}; allowed: ${allow.join(', ')}`;
    const err = new HttpError(405, 'method_not_allowed', message, { allow }, { Allow: allow.join(', ') });
    RENDER[families.get(String(matched[0]!.path)) ?? 'envelope'](c, err);
  };
}

/** A body Koa would answer with JSON.stringify (not nothing, a string, a Buffer, or a stream of some kind). */
function isKoaJson(body: unknown): boolean {
  if (body === null || typeof body !== 'object' || Buffer.isBuffer(body)) return false;
  if (typeof (body as { pipe?: unknown }).pipe === 'function') return false;
  return !(body instanceof Blob || body instanceof ReadableStream || body instanceof Response);
}
