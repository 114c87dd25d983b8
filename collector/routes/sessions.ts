// Sessions for the web UI and the local workbench: POST /api/auth/session signs in (a workspace API key, or a
// one-time sign-in link's token) and sets the session cookie; GET says who is signed in; DELETE signs out.
import type { Context } from 'koa';
import { z } from 'zod';
import type { Caller } from '../../core/ports/ingest.ts';
import type { SessionRecord } from '../../core/ports/storage.ts';
import type { AuditEvent } from '../../processors/audit.ts';
import { sessionCookie } from '../auth/session-cookie.ts';
import type { RouteContext } from '../host/context.ts';
import { errorSchema } from '../http/openapi.ts';
import { newSession, sessionEvent, sessionView } from '../workspaces/sessions.ts';
import { unavailableDoc } from './read.ts';

export const SESSION_PATH = '/api/auth/session';

const sessionBody = z.object({
  session: z.object({
    id: z.string().describe('ses_… : what `tracegate sessions list` shows and `sessions revoke` takes'),
    workspaceId: z.string(),
    workspace: z.string().describe("The workspace's name"),
    state: z.enum(['active', 'revoked', 'expired', 'idle']),
    createdAt: z.string(),
    lastSeenAt: z.string().describe('The last use recorded (recorded at most about once a minute)'),
    expiresAt: z.string().describe('Absolute expiry (TRACEGATE_SESSION_MAX_SECONDS after sign-in)'),
    idleExpiresAt: z
      .string()
      .describe('When the session ends if not used again (TRACEGATE_SESSION_IDLE_SECONDS), or expiresAt if sooner'),
    revokedAt: z.string().nullable(),
  }),
});
const signInRequest = z.object({
  linkToken: z.string().describe('The token of a one-time sign-in link (the #token=… of `tracegate sessions create`)'),
});

export function sessionRoutes(r: RouteContext): void {
  const idleMs = r.config.SESSION_IDLE_SECONDS * 1000;
  const terms = { idleMs, maxMs: r.config.SESSION_MAX_SECONDS * 1000 };
  const audit = (e: AuditEvent) => r.pipeline.record([r.enrichment.audit.append(e)]);
  /** Secure when the browser reaches us over TLS: here, or at the proxy TRACEGATE_PUBLIC_ORIGIN names. */
  const cookie = (ctx: Context, token: string | null) =>
    sessionCookie(token, {
      secure: ctx.secure || r.config.PUBLIC_ORIGIN?.startsWith('https:') === true,
      maxAgeSeconds: r.config.SESSION_MAX_SECONDS,
    });
  const view = async (s: SessionRecord) => {
    const ws = await r.storage.getWorkspace(s.workspaceId);
    const { id, workspaceId, ...rest } = sessionView(s, Date.now(), idleMs);
    return { session: { id, workspaceId, workspace: ws?.name ?? '', ...rest } } satisfies z.output<typeof sessionBody>;
  };
  docs(r);

  r.on('post', SESSION_PATH, { auth: ['apiKey', 'signInLink'], limiter: 'auth:session' }, async (ctx) => {
    const caller = ctx.state.caller as Caller;
    const { token, record } = newSession(caller.workspaceId, terms, Date.now());
    await r.storage.putSession(record);
    await audit(
      sessionEvent(caller.workspaceId, 'session.create', caller.keyId, `POST ${SESSION_PATH}`, {
        sessionId: record.sessionId,
      }),
    );
    ctx.set('Set-Cookie', cookie(ctx, token));
    ctx.set('Cache-Control', 'no-store');
    ctx.status = 201;
    ctx.body = await view(record);
  });

  r.on('get', SESSION_PATH, { auth: 'session', limiter: 'auth:session' }, async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await r.read(() => view(ctx.state.session as SessionRecord));
  });

  r.on('delete', SESSION_PATH, { auth: 'session', limiter: 'auth:session' }, async (ctx) => {
    const session = ctx.state.session as SessionRecord;
    await r.storage.revokeSession(session.sessionId, Date.now());
    await audit(
      sessionEvent(session.workspaceId, 'session.revoke', session.sessionId, `DELETE ${SESSION_PATH}`, {
        sessionId: session.sessionId,
      }),
    );
    ctx.set('Set-Cookie', cookie(ctx, null));
    ctx.body = { revoked: session.sessionId };
  });
}

function docs(r: RouteContext): void {
  r.docs.push(
    {
      method: 'post',
      path: SESSION_PATH,
      tag: 'sessions',
      auth: 'apiKey',
      summary:
        "Sign in: with the workspace API key (Authorization: Bearer), or a one-time sign-in link's token in the body (from this server's own pages). Sets the session cookie (HttpOnly, SameSite=Strict, Path=/, Secure over TLS)",
      request: { contentTypes: ['application/json'], schema: signInRequest },
      responses: {
        201: {
          description: 'Signed in: the session (its token is only in the Set-Cookie header)',
          schema: sessionBody,
        },
        403: { description: "A sign-in link posted from another origin than the server's own", schema: errorSchema },
      },
    },
    {
      method: 'get',
      path: SESSION_PATH,
      tag: 'sessions',
      auth: 'session',
      summary: 'Who is signed in: the session and its workspace, and when it expires',
      responses: { 200: { description: 'The session', schema: sessionBody }, 503: unavailableDoc },
    },
    {
      method: 'delete',
      path: SESSION_PATH,
      tag: 'sessions',
      auth: 'session',
      summary:
        'Sign out: the session is revoked (at once on every collector sharing the storage) and its cookie removed',
      responses: {
        200: { description: 'Signed out', schema: z.object({ revoked: z.string() }) },
      },
    },
  );
}
