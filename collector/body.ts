// Request bodies: content-type allowlist (415), gzip/deflate, size limit applied after
// decompression (413), so a gzip bomb stops at the limit instead of filling memory.
import type { Context } from 'koa';
import getRawBody from 'raw-body';
import inflate from 'inflation';
import { HttpError } from './errors.ts';
import { jsonPrescan } from './json-prescan.ts';

export type BodyKind = 'json' | 'protobuf';

export function bodyKind(ctx: Context, allowed: BodyKind[]): BodyKind {
  const header = ctx.get('content-type') || '';
  const type = header.split(';')[0]!.trim().toLowerCase();
  if (allowed.includes('json') && (type === 'application/json' || type.endsWith('+json'))) {
    // JSON is UTF-8 (RFC 8259 §8.1): a body declared in another charset would be misread, not decoded.
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(header)?.[1]?.toLowerCase();
    if (charset && charset !== 'utf-8' && charset !== 'utf8' && charset !== 'us-ascii') { // ASCII is UTF-8
      throw new HttpError(415, 'unsupported_charset', `JSON must be UTF-8 (Content-Type charset ${charset})`, { charset });
    }
    return 'json';
  }
  if (allowed.includes('protobuf') && (type === 'application/x-protobuf' || type === 'application/protobuf')) return 'protobuf';
  const want = allowed.map((k) => (k === 'json' ? 'application/json' : 'application/x-protobuf')).join(' or ');
  throw new HttpError(415, 'unsupported_media_type', `Content-Type must be ${want}`, { contentType: type || null });
}

export async function readBody(ctx: Context, limit: number): Promise<Buffer> {
  const encoding = (ctx.get('content-encoding') || 'identity').trim().toLowerCase();
  if (!['identity', 'gzip', 'deflate', 'x-gzip'].includes(encoding)) {
    throw new HttpError(415, 'unsupported_encoding', `Content-Encoding ${encoding} is not supported (gzip, deflate or none)`);
  }
  try {
    // inflation ignores Content-Length for compressed bodies; raw-body enforces `limit` on the inflated bytes.
    const length = encoding === 'identity' ? ctx.get('content-length') || undefined : undefined;
    // The normalized coding is passed explicitly: inflation would otherwise re-read the raw header and refuse
    // `x-gzip` or `GZIP` (codings are case-insensitive, RFC 9110 §8.4.1; x-gzip is gzip, §8.4.1.3).
    const stream = inflate(ctx.req, { encoding: encoding === 'x-gzip' ? 'gzip' : encoding });
    return await getRawBody(stream, { limit, length });
  } catch (err) {
    const e = err as { type?: string; status?: number; message?: string };
    if (e.type === 'entity.too.large') {
      throw new HttpError(413, 'payload_too_large', `request body exceeds ${limit} bytes (after decompression)`, { limitBytes: limit });
    }
    if (e.type === 'request.aborted') throw new HttpError(400, 'request_aborted', 'client aborted the request');
    throw new HttpError(400, 'invalid_body', `could not read request body: ${e.message ?? 'unknown error'}`);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Strict JSON: valid UTF-8, bracket depth at most `maxDepth` (deeper values overflow the stack when records
 * are cloned or posted to a worker), and no prototype-polluting keys anywhere.
 */
export function parseJson(buf: Buffer, maxDepth: number): unknown {
  if (jsonPrescan(buf, maxDepth) === 'deep') {
    throw new HttpError(400, 'too_deep', `request body nests arrays/objects deeper than ${maxDepth} levels`, { limit: maxDepth });
  }
  let text: string;
  try {
    text = utf8.decode(buf);
  } catch {
    throw new HttpError(400, 'invalid_encoding', 'request body is not valid UTF-8');
  }
  // The reviver costs ~2x, so only pay it when a dangerous key could be present (escapes included).
  const suspicious = text.includes('__proto__') || text.includes('\\u');
  try {
    if (!suspicious) return JSON.parse(text);
    return JSON.parse(text, (key, value) => {
      if (key === '__proto__') { // the one key an object spread or assignment could turn into a prototype
        throw new HttpError(400, 'forbidden_key', `key "${key}" is not allowed`, { key });
      }
      return value;
    });
  } catch (err) {
    if (err instanceof HttpError) throw err;
    throw new HttpError(400, 'invalid_json', `request body is not valid JSON: ${(err as Error).message}`);
  }
}
