// The Koa app: request ids, logging, error rendering, metrics, and the route modules.
import Koa, { type Context, type Next } from 'koa';
import Router from '@koa/router';
import { randomUUID } from 'node:crypto';
import { BackpressureError, HttpError, isMarkedStorageOutage, StorageUnavailableError } from '../core/errors.ts';
import { BodyBudget, bodyBudget } from './http/body.ts';
import { READ_LIVENESS_AFTER_MS, ReadGate } from './http/read-gate.ts';
import { encodeStatus } from '../protocols/otlp/index.ts';
import { type KeyVerifier, parseKey, type Caller } from './workspaces/api-keys.ts';
import { SYSTEM_WORKSPACE } from '../processors/audit.ts';
import type { RouteDoc } from './http/openapi.ts';
import { routeModules } from './route-modules.ts';
import { bearer, renderError, type AppDeps, type RouteContext } from './http/context.ts';
import { adminRoutes } from './routes/admin.ts';

export function createApp(deps: AppDeps): Koa {
  const app = new Koa();
  app.proxy = false;
  const router = new Router();
  // One budget of body bytes being received or processed, shared by every route that reads a body (see body.ts).
  const budget = new BodyBudget(deps.config.MAX_INFLIGHT_BODY_BYTES, deps.config.BODY_IDLE_TIMEOUT_MS);
  deps.metrics.inflight.bytes = () => budget.inUse;
  router.use(bodyBudget(budget));
  const docs: RouteDoc[] = [];

  const tooManyFailures = (retryAfterSeconds: number) =>
    new HttpError(
      429,
      'rate_limited',
      `too many failed authentications from this address; retry in ${retryAfterSeconds}s`,
      { retryAfterSeconds },
      { 'Retry-After': String(retryAfterSeconds), 'X-RateLimit-Remaining': '0' },
    );
  const requireKey = async (ctx: Context, next: Next) => {
    const key = bearer(ctx);
    const unseen = key !== null && !deps.keys.known(key);
    if (unseen) {
      const lookup = await deps.limits.lookupAllowed(ctx.ip);
      if (!lookup.allowed) throw tooManyFailures(lookup.retryAfterSeconds);
    }
    let caller: Caller | null;
    try {
      caller = key ? await deps.keys.verify(key) : null;
    } catch (err) {
      // A never-seen key id that storage could not check in time (503) counts against the address as a failure:
      // random ids sent while storage is slow would otherwise each cost a lookup and never throttle the address.
      if (unseen && err instanceof BackpressureError) await deps.limits.authFailure(ctx.ip).catch(() => {});
      throw err;
    }
    if (!caller) {
      ctx.state.log.info({ event: 'auth_rejected', route: routeOf(ctx) }, 'authentication rejected');
      const keyId = key ? (parseKey(key)?.keyId ?? '') : '';
      const owner = key ? deps.keys.rejection(key) : null;
      const limit = await deps.limits.authFailure(ctx.ip);
      if (limit.throttled) {
        // One audit record when an address goes over its limit, not one per attempt; and one per real key id
        // attempted while throttled, in that key's workspace.
        if (limit.tripped || (owner && (await deps.limits.firstThrottledAttempt(ctx.ip, keyId))))
          auditRejected(ctx, key, keyId, owner, 'too_many_failures');
        throw tooManyFailures(limit.retryAfterSeconds);
      }
      auditRejected(ctx, key, keyId, owner);
      throw new HttpError(
        401,
        'unauthorized',
        key ? 'invalid or revoked API key' : 'missing API key: send Authorization: Bearer <key>',
        null,
        { 'WWW-Authenticate': 'Bearer' },
      );
    }
    ctx.state.caller = caller satisfies Caller;
    await next();
  };
  // Every rejected authentication is audited. Spooled without waiting: a flood of bad keys must not queue requests
  // behind fsyncs. The key id (never the key) is kept when the key was well-formed; an attempt with a real key id
  // (wrong secret, revoked key) goes to that key's workspace, where its owners read it, the rest to _system.
  // The route pattern, not the raw path: a caller must not write arbitrary text into a workspace's audit log.
  const routeOf = (c: Context) => (c as unknown as { _matchedRoute?: string })._matchedRoute ?? c.path.slice(0, 200);
  // A record the spool cannot take must not advance the chain (that would leave a gap): with the spool full, skip.
  const spoolFull = () => deps.pipeline.stats().spoolBytes >= deps.config.SPOOL_MAX_BYTES;
  // Such records are written without waiting, so a lost one is counted and logged (at most every 10 s) here.
  let lastDropLog = 0;
  const auditDropped = (reason: 'spool_full' | 'spool_error', err?: unknown) => {
    deps.metrics.auditDropped.inc({ reason });
    const now = Date.now();
    if (now - lastDropLog < 10_000) return;
    lastDropLog = now;
    deps.log.warn(
      { reason, err },
      'audit records of refused requests are not being written (tracegate_audit_records_dropped_total counts them)',
    );
  };
  const spoolAudit = (rec: Parameters<typeof deps.pipeline.record>[0][number]) => {
    deps.pipeline.record([rec]).catch((err: unknown) => auditDropped('spool_error', err));
  };
  const auditRejected = (
    c: Context,
    key: string | null,
    keyId: string,
    owner: ReturnType<KeyVerifier['rejection']>,
    throttled?: 'too_many_failures',
  ) => {
    if (spoolFull()) return auditDropped('spool_full');
    const rec = deps.enrichment.audit.append({
      workspaceId: owner?.workspaceId ?? SYSTEM_WORKSPACE,
      atMs: Date.now(),
      actor: keyId || 'anonymous',
      action: 'auth.rejected',
      route: routeOf(c),
      outcome: 'denied',
      accepted: 0,
      rejected: 0,
      details: JSON.stringify({
        reason: owner?.reason ?? (key ? 'unknown_key' : 'missing_key'),
        ip: c.ip,
        ...(throttled ? { throttled } : {}),
      }),
    });
    spoolAudit(rec);
  };
  // Requests refused after authentication (bad body, too large) are audited too; accepted ones are audited
  // by the audit processor, atomically with their records.
  const auditRejectedRequest = (route: string) => async (c: Context, next: Next) => {
    try {
      await next();
    } catch (err) {
      if (err instanceof HttpError && err.status >= 400 && err.status < 500 && err.status !== 429) {
        if (spoolFull()) {
          auditDropped('spool_full');
          throw err;
        }
        const caller = c.state.caller as Caller;
        const rec = deps.enrichment.audit.append({
          workspaceId: caller.workspaceId,
          atMs: Date.now(),
          actor: caller.keyId,
          action: 'ingest',
          route: `${c.method} ${routeOf(c)}`,
          outcome: 'rejected',
          accepted: 0,
          rejected: err.rejectedItems ?? 1,
          details: JSON.stringify({ status: err.status, code: err.code, limiter: route }),
        });
        spoolAudit(rec);
      }
      throw err;
    }
  };
  const reads = new ReadGate(() => deps.storage.ping(), {
    livenessAfterMs: deps.storage.kind === 'clickhouse' ? READ_LIVENESS_AFTER_MS : undefined,
  });
  const ctx: RouteContext = {
    ...deps,
    router,
    docs,
    requireKey,
    onClose: (fn) => {
      deps.closers?.push(fn);
    },
    ingestGuard: (route) => [requireKey, deps.limits.middleware(route), auditRejectedRequest(route)],
    readGuard: (route) => [requireKey, deps.limits.middleware(route)],
    read: (work) => reads.run(work),
  };
  for (const register of routeModules) register(ctx);
  if (deps.adminToken) adminRoutes(ctx, deps.adminToken);

  // A client that stops reading its response: once the handler is done and the answer is being written, a
  // connection on which nothing moves for SOCKET_IDLE_TIMEOUT_MS is closed (freeing the buffered answer). Not while
  // a handler works (a long verify), nor on routes that wait for a provider (ctx.state.ownIdleTimeout); Node puts
  // its keep-alive timeout back when the answer is finished.
  app.use(async (c, next) => {
    try {
      await next();
    } finally {
      if (!c.state.ownIdleTimeout) c.req.socket.setTimeout(deps.config.SOCKET_IDLE_TIMEOUT_MS);
    }
  });
  app.use(async (c, next) => {
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
      if (err instanceof HttpError) {
        renderError(c, err);
      } else if (isMarkedStorageOutage(err)) {
        // Storage refused, reset or timed out a call a route made outside ReadGate: an outage, not a bug.
        c.state.log.warn({ err }, 'storage unavailable');
        renderError(c, new StorageUnavailableError());
      } else {
        c.state.log.error({ err }, 'unhandled error');
        renderError(c, new HttpError(500, 'internal', 'internal error'));
      }
    } finally {
      const route = (c as unknown as { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      deps.metrics.requests.inc({ method: c.method, route, status: String(c.status) });
      c.state.log.debug(
        { method: c.method, route, status: c.status, ms: +(performance.now() - started).toFixed(2) },
        'request',
      );
    }
  });
  app.use(router.routes());
  // What no route took. A path some route serves with other methods: 405 with Allow (OPTIONS: 204 with Allow), in
  // the error shape of that route's family; any other path: 404. (router.allowedMethods cannot do this here: it
  // decides after next(), and this handler has thrown the 404 by then; in throw mode it also sets no Allow.)
  const families = errorFamilies(docs);
  app.use(async (c) => {
    const matched = ((c as unknown as { matched?: Array<{ path: unknown; methods: string[] }> }).matched ?? []).filter(
      (l) => l.methods.length > 0,
    );
    if (matched.length === 0) throw new HttpError(404, 'not_found', `no route for ${c.method} ${c.path}`);
    const allow = [...new Set(matched.flatMap((l) => l.methods))];
    if (!allow.includes('OPTIONS')) allow.push('OPTIONS');
    c.set('Allow', allow.join(', '));
    if (c.method === 'OPTIONS') {
      c.status = 204;
      return;
    }
    const message = `${c.method} is not allowed on ${c.path}; allowed: ${allow.join(', ')}`;
    const family = families.get(String(matched[0]!.path));
    c.status = 405;
    if (family === 'rpc-status') {
      // google.rpc.Status, as the OTLP routes answer every error (UNIMPLEMENTED: the method is not served here).
      const proto = /^application\/(x-)?protobuf\b/i.test(c.get('content-type'));
      c.set('Content-Type', proto ? 'application/x-protobuf' : 'application/json');
      c.body = proto ? encodeStatus(12, message, 'protobuf') : encodeStatus(12, message, 'json');
    } else if (family === 'provider') {
      // The provider's error shape, as the proxy routes answer every error.
      c.body = { error: { message, type: 'tracegate_error', param: null, code: 'method_not_allowed' } };
    } else {
      renderError(c, new HttpError(405, 'method_not_allowed', message, { allow }, { Allow: allow.join(', ') }));
    }
  });
  return app;
}

/** A body Koa would answer with JSON.stringify (not nothing, a string, a Buffer, or a stream of some kind). */
function isKoaJson(body: unknown): boolean {
  if (body === null || typeof body !== 'object' || Buffer.isBuffer(body)) return false;
  if (typeof (body as { pipe?: unknown }).pipe === 'function') return false;
  return !(body instanceof Blob || body instanceof ReadableStream || body instanceof Response);
}

/**
 * Route pattern (as @koa/router knows it, `/a/:id`) → the error shape its family answers in, from the route docs:
 * the OTLP routes answer google.rpc.Status, the proxy routes the provider's error object.
 */
function errorFamilies(docs: RouteDoc[]): { get(path: string): 'rpc-status' | 'provider' | undefined } {
  return {
    get: (path) => {
      const doc = docs.find((d) => d.path === path.replace(/:(\w+)/g, '{$1}'));
      if (!doc) return undefined;
      return doc.errors === 'rpc-status' ? 'rpc-status' : doc.tag === 'proxy' ? 'provider' : undefined;
    },
  };
}
