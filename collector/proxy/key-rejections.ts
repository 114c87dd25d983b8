// A provider refusing an API key: whose key it was decides what the caller and the trace see.
import type { Context } from 'koa';

/**
 * The provider refused the key tracegate holds, not the caller's. Passed through, the SDK would report the caller's
 * own key as wrong, and the provider's message quotes part of ours: a 502 instead, which SDKs should not retry.
 */
export const HELD_KEY_REJECTED = {
  error: {
    message:
      'the provider rejected the API key tracegate holds for this workspace; an operator must set it (`tracegate provider set` or TRACEGATE_PROVIDER_API_KEY)',
    type: 'upstream_error',
    param: null,
    code: 'provider_auth_failed',
  },
};

/**
 * What the trace stores when the provider refuses the caller's own key: the caller gets the provider's 401 as is
 * (it is their key), but its message quotes part of that key, and we never store a caller's key.
 */
export const CALLER_KEY_REJECTED = {
  error: {
    message: "provider rejected the caller's API key (401)",
    type: 'upstream_error',
    param: null,
    code: 'caller_key_rejected',
  },
};

export function heldKeyRejected(ctx: Context, origin: string): void {
  ctx.state.log.warn({ origin }, 'proxy: the provider rejected the configured provider API key');
  ctx.status = 502;
  ctx.set('x-should-retry', 'false');
  ctx.body = HELD_KEY_REJECTED;
}
