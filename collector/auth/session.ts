// The session cookie (collector/workspaces/sessions.ts), for the web UI and the local workbench route. Looked up in
// storage on every request and never cached, so a sign-out or a revocation is refused at once by every collector
// sharing the storage. A request that changes state must come from this server's own origin (403) and carry JSON if
// anything (415): a cookie is sent by the browser on its own, so another site's page could otherwise use it.
// Failures are throttled per client address and audited, as for API keys.
import type { Context } from 'koa';
import type { Config } from '../../config/index.ts';
import { BackpressureError } from '../../core/errors.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import type { SessionRecord, Storage } from '../../core/ports/storage.ts';
import { LOOKUP_DEADLINE_MS, within } from '../../platform/slow-storage.ts';
import { bodyKind } from '../http/body.ts';
import { HttpError } from '../http/errors.ts';
import type { RateLimits } from '../http/rate-limit.ts';
import { isToken, type SessionState, sessionState, tokenHash, touchEveryMs } from '../workspaces/sessions.ts';
import { tooManyFailures } from './api-key.ts';
import { type RefusalAudit, routeOf } from './refusals.ts';
import { changesState, crossSiteReason, ownOrigin, sessionToken } from './session-cookie.ts';
import type { AuthStrategy } from './strategy.ts';

export interface SessionDeps {
  storage: Storage;
  limits: RateLimits;
  refusals: RefusalAudit;
  config: Pick<Config, 'SESSION_IDLE_SECONDS' | 'PUBLIC_ORIGIN'>;
}

const MESSAGES: Record<SessionState | 'missing' | 'unknown', string> = {
  missing: 'missing session cookie: sign in with POST /api/auth/session (this route takes no API key)',
  unknown: 'invalid session: sign in again',
  revoked: 'the session was signed out or revoked: sign in again',
  expired: 'the session has expired: sign in again',
  idle: 'the session expired after a time unused: sign in again',
  active: '',
};

/** Where the request must come from, for the same-origin check of a cookie that changes state. */
export function requestOrigin(ctx: Context, publicOrigin: string | undefined): string | null {
  return ownOrigin(publicOrigin, ctx.protocol, ctx.get('host'));
}

/** 403 when a request that changes state comes from another origin (see crossSiteReason). */
export function refuseCrossSite(ctx: Context, publicOrigin: string | undefined): void {
  const why = crossSiteReason(
    ctx.get('origin') || undefined,
    ctx.get('referer') || undefined,
    requestOrigin(ctx, publicOrigin),
  );
  if (why)
    throw new HttpError(
      403,
      'cross_site_request',
      `refused: a session request that changes state must come from this server's own pages (${why})`,
    );
}

export class SessionAuth implements AuthStrategy {
  private readonly deps: SessionDeps;
  private readonly idleMs: number;
  constructor(deps: SessionDeps) {
    this.deps = deps;
    this.idleMs = deps.config.SESSION_IDLE_SECONDS * 1000;
  }

  present(ctx: Context): boolean {
    return sessionToken(ctx.get('cookie')) !== null;
  }

  async authenticate(ctx: Context): Promise<Caller> {
    const token = sessionToken(ctx.get('cookie'));
    if (token === null) return this.reject(ctx, 'missing');
    if (changesState(ctx.method)) {
      refuseCrossSite(ctx, this.deps.config.PUBLIC_ORIGIN);
      if (hasBody(ctx)) bodyKind(ctx, ['json']);
    }
    if (!isToken(token)) return this.reject(ctx, 'unknown');
    // An address over its failure limit gets a few lookups a window: forged tokens must not each cost a query.
    const lookup = await this.deps.limits.lookupAllowed(ctx.ip);
    if (!lookup.allowed) throw tooManyFailures(lookup.retryAfterSeconds);
    const session = await this.lookup(tokenHash(token));
    const now = Date.now();
    const state = session ? sessionState(session, now, this.idleMs) : 'unknown';
    if (!session || state !== 'active') return this.reject(ctx, state, session);
    if (now - session.lastSeenAtMs >= touchEveryMs(this.idleMs)) await this.touch(ctx, session, now);
    ctx.state.session = session;
    return { workspaceId: session.workspaceId, keyId: session.sessionId };
  }

  private async lookup(hash: string): Promise<SessionRecord | null> {
    let got: { value: SessionRecord | null } | null;
    try {
      got = await within(this.deps.storage.getSession(hash), LOOKUP_DEADLINE_MS);
    } catch (err) {
      throw Object.assign(
        new BackpressureError('cannot verify the session while storage is unreachable; retry later', 5),
        {
          cause: err,
        },
      );
    }
    if (!got) throw new BackpressureError('cannot verify the session while storage is unreachable; retry later', 5);
    return got.value;
  }

  /** A failed write of the last use only makes the idle expiry come sooner: logged, not failed. */
  private async touch(ctx: Context, session: SessionRecord, now: number): Promise<void> {
    try {
      await this.deps.storage.touchSession(session, now);
      session.lastSeenAtMs = now;
    } catch (err) {
      ctx.state.log?.warn({ err, sessionId: session.sessionId }, 'the session use was not recorded');
    }
  }

  private async reject(ctx: Context, why: keyof typeof MESSAGES, session?: SessionRecord | null): Promise<never> {
    ctx.state.log?.info({ event: 'auth_rejected', route: routeOf(ctx) }, 'authentication rejected');
    const rejection = {
      ...(session ? { workspaceId: session.workspaceId } : {}),
      actor: session?.sessionId ?? '',
      reason: `${why}_session`,
    };
    const limit = await this.deps.limits.authFailure(ctx.ip);
    if (limit.throttled) {
      if (limit.tripped) this.deps.refusals.authRejected(ctx, { ...rejection, throttled: 'too_many_failures' });
      throw tooManyFailures(limit.retryAfterSeconds);
    }
    this.deps.refusals.authRejected(ctx, rejection);
    throw new HttpError(401, 'unauthorized', MESSAGES[why]);
  }
}

/** A request with a body (a length above 0, or chunked): only those are held to JSON. */
function hasBody(ctx: Context): boolean {
  const length = ctx.get('content-length');
  return ctx.get('transfer-encoding') !== '' || (length !== '' && length !== '0');
}
