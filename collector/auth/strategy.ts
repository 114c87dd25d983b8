// An authentication strategy tells who is calling from a request, or refuses it. Route declarations name the
// strategy they take; the app builds one of each (collector/auth/index.ts), so a new credential is a new module
// and one entry there, never a change to the app or the receiver host.
import type { Context } from 'koa';
import type { Caller } from '../../core/ports/ingest.ts';

export interface AuthStrategy {
  /** Whether the request carries this strategy's credential at all (a route taking several: the first present decides). */
  present(ctx: Context): boolean;
  /** The caller; or throws a TracegateError: unauthenticated, rate_limited, or unavailable (cannot check now). */
  authenticate(ctx: Context): Promise<Caller>;
}

/** The strategies by the name route declarations use. */
export interface AuthStrategies {
  /** `Authorization: Bearer <workspace API key>`. */
  apiKey: AuthStrategy;
  /** The session cookie (`POST /api/auth/session`), for the web UI and the local workbench. */
  session: AuthStrategy;
  /** A one-time sign-in link's token in a JSON body (`POST /api/auth/session` only). */
  signInLink: AuthStrategy;
}
export type AuthName = keyof AuthStrategies;
