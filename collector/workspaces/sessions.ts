// Browser sessions (issue 43): the web UI and the local workbench route authenticate with a session cookie instead of
// the workspace API key. A session token is 32 random bytes, sent only in the cookie and stored only as its SHA-256
// (256 bits of entropy: a fast hash is enough, as for API keys). A one-time sign-in link (`tracegate sessions
// create`) carries another such token, exchanged once for a session. Shared by the session routes, the auth
// strategy, the loopback admin routes and the CLI.
import { createHash, randomBytes } from 'node:crypto';
import type { SessionRecord, Storage } from '../../core/ports/storage.ts';
import type { AuditEvent } from '../../processors/audit.ts';
import { type AuditSink, workspaceId } from './admin.ts';

/** The cookie's name. */
export const SESSION_COOKIE = 'tg_session';
/** base64url of 32 bytes: anything else is refused without a storage lookup. */
const TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;
/** The web UI's sign-in page (issue 45): it posts the link's token (from the fragment, never sent to a server). */
export const SIGNIN_PATH = '/ui/signin';

export const newToken = (): string => randomBytes(32).toString('base64url');
export const isToken = (s: string): boolean => TOKEN_RE.test(s);
export const tokenHash = (token: string): string => createHash('sha256').update(token).digest('hex');

/** How long sessions last: the settings, in ms. */
export interface SessionTerms {
  idleMs: number;
  maxMs: number;
}

/**
 * A use is recorded when the one recorded is this old: a write per request would cost more than the lookup. So the
 * idle expiry counts from a use up to this much older than the last (at most a minute, a tenth of the idle time).
 */
export const touchEveryMs = (idleMs: number): number => Math.min(60_000, Math.floor(idleMs / 10));

export type SessionState = 'active' | 'revoked' | 'expired' | 'idle';

export function sessionState(s: SessionRecord, nowMs: number, idleMs: number): SessionState {
  if (s.revokedAtMs > 0) return 'revoked';
  if (nowMs >= s.expiresAtMs) return 'expired';
  if (nowMs >= s.lastSeenAtMs + idleMs) return 'idle';
  return 'active';
}

/** When the session ends if not used again: the idle expiry, or the absolute one if sooner. */
export const endsAtMs = (s: SessionRecord, idleMs: number): number => Math.min(s.expiresAtMs, s.lastSeenAtMs + idleMs);

/** A new session for the workspace: its token (for the cookie, never stored) and its record. */
export function newSession(workspaceId: string, terms: SessionTerms, nowMs: number) {
  const token = newToken();
  const record: SessionRecord = {
    sessionId: `ses_${randomBytes(8).toString('hex')}`,
    tokenHash: tokenHash(token),
    workspaceId,
    createdAtMs: nowMs,
    lastSeenAtMs: nowMs,
    expiresAtMs: nowMs + terms.maxMs,
    revokedAtMs: 0,
  };
  return { token, record };
}

/** A session as shown (the API, the CLI): never its token hash. */
export function sessionView(s: SessionRecord, nowMs: number, idleMs: number) {
  return {
    id: s.sessionId,
    workspaceId: s.workspaceId,
    state: sessionState(s, nowMs, idleMs),
    createdAt: new Date(s.createdAtMs).toISOString(),
    lastSeenAt: new Date(s.lastSeenAtMs).toISOString(),
    expiresAt: new Date(s.expiresAtMs).toISOString(),
    idleExpiresAt: new Date(endsAtMs(s, idleMs)).toISOString(),
    revokedAt: s.revokedAtMs > 0 ? new Date(s.revokedAtMs).toISOString() : null,
  };
}
export type SessionView = ReturnType<typeof sessionView>;

export function sessionEvent(
  workspaceId: string,
  action: 'session.create' | 'session.revoke' | 'session.link',
  actor: string,
  route: string,
  details: object,
): AuditEvent {
  return {
    workspaceId,
    atMs: Date.now(),
    actor,
    action,
    route,
    outcome: 'ok',
    accepted: 0,
    rejected: 0,
    details: JSON.stringify(details),
  };
}

/**
 * The origin a sign-in link points at when TRACEGATE_PUBLIC_ORIGIN is unset: this machine, at the server's port (a
 * server listening on every address is reached as localhost; one listening on a single address, there).
 */
export function defaultOrigin(host: string, port: number): string {
  const name = host === '0.0.0.0' || host === '::' || host === '' ? 'localhost' : host;
  return `http://${name.includes(':') ? `[${name}]` : name}:${port}`;
}

/** The sign-in link for a link token: the token in the fragment, which browsers never send to a server. */
export const signInLink = (origin: string, token: string): string => `${origin}${SIGNIN_PATH}#token=${token}`;

/** A one-time sign-in link for an existing workspace (by name or id); 404 when there is none. */
export async function createSignInLink(storage: Storage, workspace: string, linkMs: number, audit: AuditSink) {
  const wsId = await workspaceId(storage, workspace);
  const ws = await storage.getWorkspace(wsId);
  const token = newToken();
  const now = Date.now();
  await storage.putSignInLink({
    tokenHash: tokenHash(token),
    workspaceId: wsId,
    createdAtMs: now,
    expiresAtMs: now + linkMs,
  });
  await audit(sessionEvent(wsId, 'session.link', 'cli', 'admin', { expiresAtMs: now + linkMs }));
  return {
    workspaceId: wsId,
    workspace: ws?.name ?? workspace,
    token,
    expiresAt: new Date(now + linkMs).toISOString(),
  };
}

/** Sessions not past their absolute expiry, newest first: of a workspace (by name or id), or of all. */
export async function listSessions(storage: Storage, workspace: string | undefined, idleMs: number) {
  const wsId = workspace === undefined ? undefined : await workspaceId(storage, workspace);
  const now = Date.now();
  const found = await storage.listSessions({ ...(wsId === undefined ? {} : { workspaceId: wsId }), nowMs: now });
  return found.map((s) => sessionView(s, now, idleMs));
}

/** Revokes a session by id; false when there is none. Every collector sharing the storage refuses it from then on. */
export async function revokeSession(
  storage: Storage,
  sessionId: string,
  audit: AuditSink,
  actor = 'cli',
  route = 'admin',
): Promise<boolean> {
  const revoked = await storage.revokeSession(sessionId, Date.now());
  if (!revoked) return false;
  await audit(sessionEvent(revoked.workspaceId, 'session.revoke', actor, route, { sessionId }));
  return true;
}
