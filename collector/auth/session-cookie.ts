// The session cookie and the rules for requests that carry it: how it is set and read, and which requests it may
// authenticate. Pure functions (test/unit/auth/session-cookie.test.ts).
import { SESSION_COOKIE } from '../workspaces/sessions.ts';

/** Methods that change nothing (RFC 9110 safe methods): the only ones a cookie authenticates without the checks. */
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);
export const changesState = (method: string): boolean => !SAFE.has(method.toUpperCase());

/** The session cookie's value from a Cookie header (the first one, as browsers send the most specific first). */
export function sessionToken(cookieHeader: string | undefined): string | null {
  if (!cookieHeader) return null;
  for (const part of cookieHeader.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== SESSION_COOKIE) continue;
    const value = part.slice(eq + 1).trim();
    return value.startsWith('"') && value.endsWith('"') && value.length >= 2 ? value.slice(1, -1) : value;
  }
  return null;
}

/**
 * Set-Cookie for a session: HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it), Path=/,
 * Secure when the browser reaches the server over TLS; Max-Age: until the session's absolute expiry. `token` null:
 * the cookie removed (sign-out).
 */
export function sessionCookie(token: string | null, opts: { secure: boolean; maxAgeSeconds: number }): string {
  const parts = [
    `${SESSION_COOKIE}=${token ?? ''}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Strict',
    `Max-Age=${token === null ? 0 : Math.max(0, Math.floor(opts.maxAgeSeconds))}`,
  ];
  if (opts.secure) parts.push('Secure');
  return parts.join('; ');
}

/** The origin browsers reach this server at: TRACEGATE_PUBLIC_ORIGIN, else scheme, host and port of the request. */
export function ownOrigin(publicOrigin: string | undefined, protocol: string, host: string): string | null {
  if (publicOrigin) return publicOrigin;
  if (!host) return null;
  try {
    return new URL(`${protocol}://${host}`).origin;
  } catch {
    return null;
  }
}

/**
 * Why a cookie-authenticated request that changes state is refused as cross-site, or null when it comes from this
 * server's own origin: `Origin` must name it exactly (scheme, host and port: other ports on the same host are other
 * sites to us, though not to SameSite); without `Origin`, the `Referer`'s origin; without either, refused.
 */
export function crossSiteReason(
  origin: string | undefined,
  referer: string | undefined,
  own: string | null,
): string | null {
  if (own === null) return 'the request names no Host, so its origin cannot be checked';
  if (origin) {
    if (origin === 'null') return 'Origin is null (an opaque origin)';
    return sameOrigin(origin, own) ? null : `Origin ${origin.slice(0, 200)} is not this server's origin (${own})`;
  }
  if (referer) return sameOrigin(referer, own) ? null : `Referer is not from this server's origin (${own})`;
  return 'neither Origin nor Referer says where the request comes from';
}

function sameOrigin(url: string, own: string): boolean {
  try {
    return new URL(url).origin === own;
  } catch {
    return false;
  }
}
