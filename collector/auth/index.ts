// The authentication strategies the app offers, by the names route declarations use.
import { ApiKeyAuth, type ApiKeyDeps } from './api-key.ts';
import { SessionAuth, type SessionDeps } from './session.ts';
import { SignInLinkAuth } from './signin-link.ts';
import type { AuthStrategies } from './strategy.ts';

export type AuthDeps = ApiKeyDeps & SessionDeps;

export function authStrategies(deps: AuthDeps): AuthStrategies {
  return { apiKey: new ApiKeyAuth(deps), session: new SessionAuth(deps), signInLink: new SignInLinkAuth(deps) };
}
