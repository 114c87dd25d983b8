// Loopback-only admin routes, so the CLI can manage keys while the server holds the embedded
// database open (DuckDB allows one writing process). Guarded by a random token in DATA_DIR (mode 0600).
import { timingSafeEqual } from 'node:crypto';
import type { Context, Next } from 'koa';
import type { RouteContext } from '../app.ts';
import { bearer } from '../app.ts';
import { HttpError } from '../errors.ts';
import { createKey, listKeys } from '../admin.ts';
import { parseJson, readBody } from '../body.ts';

export function adminRoutes(r: RouteContext, adminToken: string): void {
  const guard = async (ctx: Context, next: Next) => {
    const remote = ctx.req.socket.remoteAddress ?? '';
    const loopback = remote === '127.0.0.1' || remote === '::1' || remote === '::ffff:127.0.0.1';
    const given = Buffer.from(bearer(ctx) ?? '');
    const want = Buffer.from(adminToken);
    if (!loopback || given.length !== want.length || !timingSafeEqual(given, want)) throw new HttpError(403, 'forbidden', 'admin routes are loopback-only and need the admin token');
    await next();
  };
  r.router.post('/admin/keys', guard, async (ctx) => {
    const body = parseJson(await readBody(ctx, 4096)) as { workspace?: unknown };
    if (typeof body?.workspace !== 'string') throw new HttpError(400, 'invalid_request', 'workspace (string) is required');
    try {
      ctx.body = await createKey(r.storage, body.workspace);
    } catch (e) {
      throw new HttpError(400, 'invalid_request', (e as Error).message);
    }
  });
  r.router.get('/admin/keys', guard, async (ctx) => {
    ctx.body = { keys: await listKeys(r.storage, typeof ctx.query.workspace === 'string' ? ctx.query.workspace : undefined) };
  });
  r.router.post('/admin/keys/:keyId/revoke', guard, async (ctx) => {
    const ok = await r.storage.revokeApiKey(ctx.params.keyId!, Date.now());
    if (!ok) throw new HttpError(404, 'not_found', 'no such key');
    r.keys.forget(ctx.params.keyId!);
    ctx.body = { revoked: ctx.params.keyId };
  });
}
