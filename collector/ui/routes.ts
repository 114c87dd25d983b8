// The web UI at /ui/: the shell page for each page route (the browser code routes from there), the files of ui/ and
// the allow-listed vendor modules (collector/ui/files.ts), each answer with the security headers. No credential is
// needed for these: they hold no data; the page's own requests to /api/… carry the session cookie.
import { readFile, stat } from 'node:fs/promises';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { Context } from 'koa';
import type { RouteContext } from '../host/context.ts';
import { HttpError } from '../http/errors.ts';
import { sessionToken } from '../auth/session-cookie.ts';
import { importMap, readShell, type ServedFile, shellPage, uiFiles, vendorFiles } from './files.ts';

/** The page routes the browser code knows; anything else under /ui/ that is no file is a 404. */
const PAGES = [/^$/, /^signin$/, /^traces$/, /^traces\/[^/]{1,768}$/, /^dashboard$/, /^workbench$/];

/** Content-Security-Policy: scripts from this origin plus the one inline import map (by hash); nothing inline else. */
export function contentSecurityPolicy(importMapHash: string): string {
  return [
    "default-src 'none'",
    `script-src 'self' ${importMapHash}`,
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

export function uiRoutes(r: RouteContext): void {
  const map = importMap();
  const csp = contentSecurityPolicy(map.hash);
  const files = uiFiles();
  const vendor = vendorFiles();
  const template = readShell();

  const secure = (ctx: Context) => {
    ctx.set('Content-Security-Policy', csp);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Referrer-Policy', 'same-origin');
    ctx.set('Cross-Origin-Opener-Policy', 'same-origin');
  };

  r.router.get(/^\/ui$/, (ctx) => {
    secure(ctx);
    ctx.redirect('/ui/');
  });
  r.router.get('/favicon.ico', async (ctx) => {
    secure(ctx);
    await sendFile(ctx, files.get('favicon.svg')!);
  });
  r.router.get(/^\/ui\/.*$/, async (ctx) => {
    secure(ctx);
    const rest = ctx.path.slice('/ui/'.length);
    const file = rest.startsWith('vendor/') ? vendor.get(rest.slice('vendor/'.length)) : files.get(rest);
    if (file && rest !== 'index.html') return sendFile(ctx, file);
    if (!PAGES.some((p) => p.test(rest))) throw new HttpError(404, 'not_found', `no page or file at ${ctx.path}`);
    ctx.set('Cache-Control', 'no-store');
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = shellPage(template, map.json, sessionToken(ctx.get('cookie')) !== null);
  });
}

const gzipped = promisify(gzip);
/** Compressed text files by path, for the modification time they were compressed at (a few hundred kB in all). */
const compressed = new Map<string, { mtimeMs: number; body: Buffer }>();

/** A file of the allow-list, revalidated by its modification time; text gzipped for a client that takes it. */
async function sendFile(ctx: Context, file: ServedFile): Promise<void> {
  const info = await stat(file.path);
  ctx.set('Cache-Control', 'no-cache');
  ctx.lastModified = info.mtime;
  ctx.type = file.type;
  ctx.status = 200;
  const text = !file.type.startsWith('image/png');
  if (text) ctx.vary('Accept-Encoding');
  if (ctx.fresh) {
    ctx.status = 304;
    return;
  }
  if (!text || ctx.acceptsEncodings('gzip', 'identity') !== 'gzip') {
    ctx.body = await readFile(file.path);
    return;
  }
  let hit = compressed.get(file.path);
  if (hit?.mtimeMs !== info.mtimeMs) {
    hit = { mtimeMs: info.mtimeMs, body: await gzipped(await readFile(file.path)) };
    compressed.set(file.path, hit);
  }
  ctx.set('Content-Encoding', 'gzip');
  ctx.body = hit.body;
}
