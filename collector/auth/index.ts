// The authentication strategies the app offers, by the names route declarations use.
import { ApiKeyAuth, type ApiKeyDeps } from './api-key.ts';
import type { AuthStrategies } from './strategy.ts';

export type AuthDeps = ApiKeyDeps;

export function authStrategies(deps: AuthDeps): AuthStrategies {
  return { apiKey: new ApiKeyAuth(deps) };
}
