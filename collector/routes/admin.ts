// Loopback-only admin routes, so the CLI can manage keys and settings while the server holds the embedded
// database open (DuckDB allows one writing process). Guarded by a random token in DATA_DIR (mode 0600).
import { timingSafeEqual } from 'node:crypto';
import type { Context, Next } from 'koa';
import type { RouteContext } from '../host/context.ts';
import { bearer } from '../auth/api-key.ts';
import { HttpError } from '../http/errors.ts';
import {
  createKey,
  listKeys,
  parseSettingsPatch,
  revokeKey,
  showSettings,
  updateSettings,
  workspaceId,
  type AuditSink,
} from '../workspaces/admin.ts';
import { parseJson, readBody } from '../http/body.ts';
import { addWebhookSecret, listWebhookSecrets, revokeWebhookSecret } from '../workspaces/webhook-secrets.ts';
import { createSignInLink, listSessions, revokeSession } from '../workspaces/sessions.ts';
import { verificationKeys } from '../../processors/signing.ts';
import { verifyWorkspace } from '../../processors/verify-workspace.ts';
import { answerExport, checkedExport } from './export.ts';

export function adminRoutes(r: RouteContext, adminToken: string): void {
  const guard = async (ctx: Context, next: Next) => {
    const remote = ctx.req.socket.remoteAddress ?? '';
    const loopback = remote === '127.0.0.1' || remote === '::1' || remote === '::ffff:127.0.0.1';
    const given = Buffer.from(bearer(ctx) ?? '');
    const want = Buffer.from(adminToken);
    if (!loopback || given.length !== want.length || !timingSafeEqual(given, want))
      throw new HttpError(403, 'forbidden', 'admin routes are loopback-only and need the admin token');
    await next();
  };
  const audit: AuditSink = (e) => r.pipeline.record([r.enrichment.audit.append(e)]);
  const wsParam = async (ctx: Context) => {
    const name = ctx.query.workspace;
    if (typeof name !== 'string') throw new HttpError(400, 'invalid_request', 'workspace query parameter is required');
    return workspaceId(r.storage, name); // 404 when there is none
  };

  r.router.post('/admin/keys', guard, async (ctx) => {
    const body = parseJson(await readBody(ctx, 4096), 8) as { workspace?: unknown };
    if (typeof body?.workspace !== 'string')
      throw new HttpError(400, 'invalid_request', 'workspace (string) is required');
    ctx.body = await createKey(r.storage, body.workspace, audit); // 400 for an invalid name
  });
  r.router.get('/admin/keys', guard, async (ctx) => {
    ctx.body = {
      keys: await listKeys(r.storage, typeof ctx.query.workspace === 'string' ? ctx.query.workspace : undefined),
    };
  });
  r.router.post('/admin/keys/:keyId/revoke', guard, async (ctx) => {
    const revokedAtMs = await revokeKey(r.storage, ctx.params.keyId!, audit);
    if (revokedAtMs === null) throw new HttpError(404, 'not_found', 'no such key');
    await r.keys.forget(ctx.params.keyId!, revokedAtMs);
    ctx.body = { revoked: ctx.params.keyId };
  });
  r.router.post('/admin/sessions', guard, async (ctx) => {
    const body = parseJson(await readBody(ctx, 4096), 8) as { workspace?: unknown };
    if (typeof body?.workspace !== 'string')
      throw new HttpError(400, 'invalid_request', 'workspace (string) is required');
    ctx.body = await createSignInLink(r.storage, body.workspace, r.config.SESSION_LINK_SECONDS * 1000, audit);
  });
  r.router.get('/admin/sessions', guard, async (ctx) => {
    const ws = typeof ctx.query.workspace === 'string' ? ctx.query.workspace : undefined;
    ctx.body = { sessions: await listSessions(r.storage, ws, r.config.SESSION_IDLE_SECONDS * 1000) };
  });
  r.router.post('/admin/sessions/:sessionId/revoke', guard, async (ctx) => {
    if (!(await revokeSession(r.storage, ctx.params.sessionId!, audit)))
      throw new HttpError(404, 'not_found', 'no such session');
    ctx.body = { revoked: ctx.params.sessionId };
  });
  r.router.get('/admin/settings', guard, async (ctx) => {
    const s = await r.settings.forWorkspace(await wsParam(ctx));
    ctx.body = showSettings(s.doc, s.version);
  });
  r.router.patch('/admin/settings', guard, async (ctx) => {
    const id = await wsParam(ctx);
    const patch = parseSettingsPatch(parseJson(await readBody(ctx, 1 << 20), 16));
    ctx.body = await updateSettings(r.settings, id, patch, audit);
  });
  r.router.get('/admin/verify', guard, async (ctx) => {
    // What was acknowledged (a key or policy change's audit record among it) is checked from storage, not the spool.
    await r.pipeline.flush();
    ctx.body = await verifyWorkspace(
      r.storage,
      await wsParam(ctx),
      await verificationKeys(r.storage, r.enrichment.keysDir),
    );
  });
  r.router.post('/admin/webhook-secrets', guard, async (ctx) => {
    const body = parseJson(await readBody(ctx, 4096), 8) as { workspace?: unknown };
    if (typeof body?.workspace !== 'string')
      throw new HttpError(400, 'invalid_request', 'workspace (string) is required');
    const added = await addWebhookSecret(r.storage, r.webhookSecrets.box(), body.workspace, audit);
    r.webhookSecrets.forget(added.workspaceId);
    ctx.body = added;
  });
  r.router.get('/admin/webhook-secrets', guard, async (ctx) => {
    const workspace = typeof ctx.query.workspace === 'string' ? ctx.query.workspace : undefined;
    ctx.body = { secrets: await listWebhookSecrets(r.storage, workspace) };
  });
  r.router.post('/admin/webhook-secrets/:secretId/revoke', guard, async (ctx) => {
    const revokedAtMs = await revokeWebhookSecret(r.storage, ctx.params.secretId!, audit);
    if (revokedAtMs === null) throw new HttpError(404, 'not_found', 'no such webhook secret');
    r.webhookSecrets.forget(); // at once here; other collectors within their cache's few seconds
    ctx.body = { revoked: ctx.params.secretId, revokedAtMs };
  });
  // The CLI's `export training` while a server holds the data: the public route's answer, for a workspace by name.
  r.router.get('/admin/export/training', guard, async (ctx) => {
    const id = await wsParam(ctx);
    const { workspace: _w, ...query } = ctx.query;
    await answerExport(r, ctx, id, checkedExport(query as Record<string, string>));
  });
  r.router.get('/admin/workspaces', guard, async (ctx) => {
    ctx.body = { workspaces: await r.storage.verificationWorkspaces() };
  });
}
