// The workspace API key, sent as `Authorization: Bearer <key>`. Failed attempts are throttled per client address
// and audited: in the workspace of a real key id (wrong secret, revoked), where its owners read them, or in _system.
import type { Context } from 'koa';
import { BackpressureError } from '../../core/errors.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import { HttpError } from '../http/errors.ts';
import type { RateLimits } from '../http/rate-limit.ts';
import { parseKey } from '../workspaces/api-keys.ts';
import type { KeyVerifier } from './key-verifier.ts';
import { type RefusalAudit, routeOf } from './refusals.ts';
import type { AuthStrategy } from './strategy.ts';

export function bearer(ctx: Context): string | null {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'));
  return m ? m[1]! : null;
}

/** 429 for an address past its failed-authentication limit (every credential's strategy answers it so). */
export const tooManyFailures = (retryAfterSeconds: number) =>
  new HttpError(
    429,
    'rate_limited',
    `too many failed authentications from this address; retry in ${retryAfterSeconds}s`,
    { retryAfterSeconds },
    { 'Retry-After': String(retryAfterSeconds), 'X-RateLimit-Remaining': '0' },
  );

export interface ApiKeyDeps {
  keys: KeyVerifier;
  limits: RateLimits;
  refusals: RefusalAudit;
}

export class ApiKeyAuth implements AuthStrategy {
  private readonly deps: ApiKeyDeps;
  constructor(deps: ApiKeyDeps) {
    this.deps = deps;
  }

  present(ctx: Context): boolean {
    return bearer(ctx) !== null;
  }

  async authenticate(ctx: Context): Promise<Caller> {
    const key = bearer(ctx);
    const unseen = key !== null && !this.deps.keys.known(key);
    if (unseen) {
      const lookup = await this.deps.limits.lookupAllowed(ctx.ip);
      if (!lookup.allowed) throw tooManyFailures(lookup.retryAfterSeconds);
    }
    const caller = await this.verify(ctx, key, unseen);
    if (caller) return caller;
    return this.reject(ctx, key);
  }

  private async verify(ctx: Context, key: string | null, unseen: boolean): Promise<Caller | null> {
    try {
      return key ? await this.deps.keys.verify(key) : null;
    } catch (err) {
      // A never-seen key id that storage could not check in time (503) counts against the address as a failure:
      // random ids sent while storage is slow would otherwise each cost a lookup and never throttle the address.
      if (unseen && err instanceof BackpressureError) await this.deps.limits.authFailure(ctx.ip).catch(() => {});
      throw err;
    }
  }

  private async reject(ctx: Context, key: string | null): Promise<never> {
    ctx.state.log.info({ event: 'auth_rejected', route: routeOf(ctx) }, 'authentication rejected');
    const keyId = key ? (parseKey(key)?.keyId ?? '') : '';
    const owner = key ? this.deps.keys.rejection(key) : null;
    const rejection = {
      ...(owner ? { workspaceId: owner.workspaceId } : {}),
      actor: keyId,
      reason: owner?.reason ?? (key ? 'unknown_key' : 'missing_key'),
    };
    const limit = await this.deps.limits.authFailure(ctx.ip);
    if (limit.throttled) {
      // One audit record when an address goes over its limit, not one per attempt; and one per real key id
      // attempted while throttled, in that key's workspace.
      if (limit.tripped || (owner && (await this.deps.limits.firstThrottledAttempt(ctx.ip, keyId))))
        this.deps.refusals.authRejected(ctx, { ...rejection, throttled: 'too_many_failures' });
      throw tooManyFailures(limit.retryAfterSeconds);
    }
    this.deps.refusals.authRejected(ctx, rejection);
    throw new HttpError(
      401,
      'unauthorized',
      key ? 'invalid or revoked API key' : 'missing API key: send Authorization: Bearer <key>',
      null,
      { 'WWW-Authenticate': 'Bearer' },
    );
  }
}
