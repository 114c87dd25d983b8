// A one-time sign-in link (`tracegate sessions create`), exchanged for a session by the web UI's sign-in page:
// `POST /api/auth/session` with `{"linkToken": "…"}`. The link is taken by its first use (every collector sharing the
// storage agrees), so a link copied from a browser's history after that signs nobody in. The page posts it from this
// server's origin (403 otherwise: another site could sign a visitor into its own workspace), as JSON (415).
import type { Context } from 'koa';
import type { Config } from '../../config/index.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { bodyKind, parseJson, readBody } from '../http/body.ts';
import { HttpError } from '../http/errors.ts';
import type { RateLimits } from '../http/rate-limit.ts';
import { isToken, tokenHash } from '../workspaces/sessions.ts';
import { tooManyFailures } from './api-key.ts';
import { type RefusalAudit, routeOf } from './refusals.ts';
import { refuseCrossSite } from './session.ts';
import type { AuthStrategy } from './strategy.ts';

export interface SignInLinkDeps {
  storage: Storage;
  limits: RateLimits;
  refusals: RefusalAudit;
  config: Pick<Config, 'PUBLIC_ORIGIN'>;
}

/** The public id of a link (audit records, rate limits): never its token. */
export const linkId = (hash: string): string => `link_${hash.slice(0, 16)}`;

export class SignInLinkAuth implements AuthStrategy {
  private readonly deps: SignInLinkDeps;
  constructor(deps: SignInLinkDeps) {
    this.deps = deps;
  }

  /** The link travels in the body: a request with one. */
  present(ctx: Context): boolean {
    const length = ctx.get('content-length');
    return ctx.get('transfer-encoding') !== '' || (length !== '' && length !== '0');
  }

  async authenticate(ctx: Context): Promise<Caller> {
    refuseCrossSite(ctx, this.deps.config.PUBLIC_ORIGIN);
    bodyKind(ctx, ['json']);
    const body = parseJson(await readBody(ctx, 4096), 4) as { linkToken?: unknown } | null;
    if (typeof body?.linkToken !== 'string')
      throw new HttpError(400, 'invalid_request', 'linkToken (string) is required: the token of a sign-in link', {
        field: 'linkToken',
      });
    if (!isToken(body.linkToken)) return this.reject(ctx, '');
    const lookup = await this.deps.limits.lookupAllowed(ctx.ip);
    if (!lookup.allowed) throw tooManyFailures(lookup.retryAfterSeconds);
    const hash = tokenHash(body.linkToken);
    // No deadline: a claim given up on could still take the link, leaving the page no session and a used link.
    const link = await this.deps.storage.claimSignInLink(hash, Date.now());
    if (!link) return this.reject(ctx, linkId(hash));
    return { workspaceId: link.workspaceId, keyId: linkId(hash) };
  }

  private async reject(ctx: Context, actor: string): Promise<never> {
    ctx.state.log?.info({ event: 'auth_rejected', route: routeOf(ctx) }, 'authentication rejected');
    const rejection = { actor, reason: 'unknown_or_used_link' };
    const limit = await this.deps.limits.authFailure(ctx.ip);
    if (limit.throttled) {
      if (limit.tripped) this.deps.refusals.authRejected(ctx, { ...rejection, throttled: 'too_many_failures' });
      throw tooManyFailures(limit.retryAfterSeconds);
    }
    this.deps.refusals.authRejected(ctx, rejection);
    throw new HttpError(401, 'unauthorized', 'the sign-in link is unknown, expired or already used: ask for a new one');
  }
}
