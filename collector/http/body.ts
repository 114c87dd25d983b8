// Request bodies: content-type allowlist (415), gzip/deflate, size limit applied after
// decompression (413), so a gzip bomb stops at the limit instead of filling memory, and one budget of bytes
// buffered at once across requests (503 + Retry-After), so many of them together do not either.
import type { Context } from 'koa';
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import inflate from 'inflation';
import { HttpError } from './errors.ts';
import { jsonPrescan, jsonSyntaxError } from '../../platform/json-prescan.ts';
import { DEFAULT_MAX_INFLIGHT_BODY_BYTES, DEFAULT_MAX_JSON_VALUES } from '../../config/index.ts';

export type BodyKind = 'json' | 'protobuf';

export function bodyKind(ctx: Context, allowed: readonly BodyKind[]): BodyKind {
  const header = ctx.get('content-type') || '';
  const type = header.split(';')[0]!.trim().toLowerCase();
  if (allowed.includes('json') && (type === 'application/json' || type.endsWith('+json'))) {
    // JSON is UTF-8 (RFC 8259 §8.1): a body declared in another charset would be misread, not decoded.
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(header)?.[1]?.toLowerCase();
    if (charset && charset !== 'utf-8' && charset !== 'utf8' && charset !== 'us-ascii') {
      // ASCII is UTF-8
      throw new HttpError(415, 'unsupported_charset', `JSON must be UTF-8 (Content-Type charset ${charset})`, {
        charset,
      });
    }
    return 'json';
  }
  if (allowed.includes('protobuf') && (type === 'application/x-protobuf' || type === 'application/protobuf'))
    return 'protobuf';
  const want = allowed.map((k) => (k === 'json' ? 'application/json' : 'application/x-protobuf')).join(' or ');
  throw new HttpError(415, 'unsupported_media_type', `Content-Type must be ${want}`, { contentType: type || null });
}

/**
 * The decompressed body bytes held at once across requests (TRACEGATE_MAX_INFLIGHT_BODY_BYTES). Each request
 * takes bytes as its chunks arrive; a body that fails gives them back at once, one that is read keeps them until
 * its request is answered (decoded, mapped and enriched, a body costs about ten times its size again until then).
 * A chunk that does not fit fails its request with 503 + Retry-After, so a flood of large (or decompression-bomb)
 * bodies costs a bounded amount of memory, however many arrive together.
 */
export class BodyBudget {
  readonly maxBytes: number;
  /** A body that sends nothing for this long is given up (408), so a stalled upload does not hold its share. */
  readonly idleMs: number;
  inUse = 0;
  constructor(maxBytes: number, idleMs = 15_000) {
    this.maxBytes = maxBytes;
    this.idleMs = idleMs;
  }
  take(n: number): boolean {
    if (this.inUse + n > this.maxBytes) return false;
    this.inUse += n;
    return true;
  }
  release(n: number): void {
    this.inUse -= n;
  }
}

/** The budget of requests whose app registered none (bodyBudget below): the default of the setting. */
const fallbackBudget = new BodyBudget(DEFAULT_MAX_INFLIGHT_BODY_BYTES);

/** Middleware giving every request after it (the whole router, when used first) the app's one budget. */
export function bodyBudget(budget: BodyBudget) {
  return async (ctx: Context, next: () => Promise<unknown>): Promise<void> => {
    ctx.state.bodyBudget = budget;
    try {
      await next();
    } finally {
      releaseBody(ctx);
    }
  };
}

/**
 * Give a read body's bytes back before the answer: for a route that, once the body is parsed, only waits on the
 * network (the proxy, on a provider that may take minutes), and must not hold ingestion's budget meanwhile.
 */
export function releaseBody(ctx: Context): void {
  const held = ctx.state.heldBodyBytes as number | undefined;
  const budget = ctx.state.bodyBudget as BodyBudget | undefined;
  if (held && budget) {
    ctx.state.heldBodyBytes = 0;
    budget.release(held);
  }
}

function budgetExhausted(budget: BodyBudget): HttpError {
  return new HttpError(
    503,
    'server_busy',
    'too many request bodies are being received or processed at once; retry shortly',
    { inflightLimitBytes: budget.maxBytes },
    { 'Retry-After': '1' },
  );
}

export async function readBody(ctx: Context, limit: number): Promise<Buffer> {
  const encoding = (ctx.get('content-encoding') || 'identity').trim().toLowerCase();
  if (!['identity', 'gzip', 'deflate', 'x-gzip'].includes(encoding)) {
    throw new HttpError(
      415,
      'unsupported_encoding',
      `Content-Encoding ${encoding} is not supported (gzip, deflate or none)`,
    );
  }
  // A client gone while auth and lookups ran: an inflater piped from the dead request would wait forever.
  if (ctx.req.destroyed && !ctx.req.readableEnded)
    throw new HttpError(400, 'request_aborted', 'client aborted the request');
  const own = ctx.state.bodyBudget as BodyBudget | undefined;
  const budget = own ?? fallbackBudget;
  // inflation ignores Content-Length for compressed bodies; the limit applies to the inflated bytes.
  const declared = encoding === 'identity' ? ctx.get('content-length') : '';
  const length = /^[0-9]+$/.test(declared) ? Number(declared) : null;
  // Refused before reading a byte: the connection closes after the answer, once the rest is read and dropped within
  // the lingering bounds (linger.ts), rather than read whole by Node.
  const unread = (err: HttpError) => {
    if (!ctx.req.complete) err.headers['Connection'] = 'close';
    return err;
  };
  if (length !== null && length > limit) {
    throw unread(
      new HttpError(413, 'payload_too_large', `request body exceeds ${limit} bytes (after decompression)`, {
        limitBytes: limit,
      }),
    );
  }
  // A declared length that cannot fit now is refused before reading a byte.
  if (length !== null && budget.inUse + length > budget.maxBytes) throw unread(budgetExhausted(budget));
  // The normalized coding is passed explicitly: inflation would otherwise re-read the raw header and refuse
  // `x-gzip` or `GZIP` (codings are case-insensitive, RFC 9110 §8.4.1; x-gzip is gzip, §8.4.1.3).
  let stream: Readable;
  try {
    stream = inflate(ctx.req, { encoding: encoding === 'x-gzip' ? 'gzip' : encoding });
  } catch (err) {
    throw new HttpError(400, 'invalid_body', `could not read request body: ${(err as Error).message}`);
  }
  const body = await readStream(ctx.req, stream, limit, length, budget);
  // Held until the answer, by bodyBudget's middleware; without it (no app budget), given back now.
  if (own) ctx.state.heldBodyBytes = ((ctx.state.heldBodyBytes as number | undefined) ?? 0) + body.length;
  else budget.release(body.length);
  return body;
}

/**
 * Buffers `stream` (the request, or the inflater it is piped into), taking each chunk from `budget`. Settles
 * exactly once — end, limit, budget, stream error, or the request closing unfinished (a client gone while a
 * compressed body was inflating would otherwise leave the inflater waiting forever). A failed read gives back every
 * byte it took; a body read whole leaves its bytes taken, for the caller to give back.
 */
function readStream(
  req: IncomingMessage,
  stream: Readable,
  limit: number,
  length: number | null,
  budget: BodyBudget,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const idle = () =>
      settle(
        new HttpError(
          408,
          'request_timeout',
          `no request body bytes arrived for ${budget.idleMs / 1000} s; the request was given up`,
          { idleTimeoutMs: budget.idleMs },
          { Connection: 'close' },
        ),
      );
    const timer = setTimeout(idle, budget.idleMs);
    const settle = (err: HttpError | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
      req.off('close', onReqClose);
      if (err) {
        budget.release(received);
        chunks.length = 0;
        // The rest of the body is only drained (linger.ts): the connection cannot carry another request (a client
        // reusing it would have its next request reset), so the answer says it closes.
        if (!req.complete) err.headers['Connection'] = 'close';
        if (stream !== req) {
          req.unpipe(stream as unknown as NodeJS.WritableStream);
          stream.destroy();
        } // frees the inflater now, not at GC
        stream.unpipe();
        stream.pause();
        reject(err);
      } else {
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received));
      }
    };
    const onData = (chunk: Buffer) => {
      if (received + chunk.length > limit) {
        return settle(
          new HttpError(413, 'payload_too_large', `request body exceeds ${limit} bytes (after decompression)`, {
            limitBytes: limit,
          }),
        );
      }
      if (length !== null && received + chunk.length > length) return settle(mismatch());
      if (!budget.take(chunk.length)) return settle(budgetExhausted(budget));
      received += chunk.length;
      chunks.push(chunk);
      timer.refresh();
    };
    const mismatch = () =>
      new HttpError(400, 'invalid_body', 'could not read request body: request size did not match content length');
    const onEnd = () => settle(length !== null && received !== length ? mismatch() : null);
    const onError = (err: Error & { code?: string }) =>
      settle(
        err.code === 'ECONNRESET' || err.code === 'ECONNABORTED'
          ? aborted()
          : new HttpError(400, 'invalid_body', `could not read request body: ${err.message ?? 'unknown error'}`),
      );
    // A stream closing before 'end' reached us is an abort (a no-op once settled); so is the request closing
    // before all of it went into the inflater.
    const aborted = () => new HttpError(400, 'request_aborted', 'client aborted the request');
    const onClose = () => settle(aborted());
    const onReqClose = () => {
      if (!req.readableEnded) settle(aborted());
    };
    if (!stream.readable)
      return settle(new HttpError(400, 'invalid_body', 'could not read request body: stream is not readable'));
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
    if (stream !== req) req.on('close', onReqClose);
  });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Strict JSON: valid UTF-8, bracket depth at most `maxDepth` (deeper values overflow the stack when records
 * are cloned or posted to a worker), at most `maxValues` values (see jsonPrescan: parsing, validating and
 * mapping cost per value, all on the event loop), and no prototype-polluting keys anywhere.
 */
export function parseJson(buf: Buffer, maxDepth: number, maxValues = DEFAULT_MAX_JSON_VALUES): unknown {
  const pre = jsonPrescan(buf, maxDepth, Infinity, maxValues);
  if (pre === 'deep') {
    throw new HttpError(400, 'too_deep', `request body nests arrays/objects deeper than ${maxDepth} levels`, {
      limit: maxDepth,
    });
  }
  if (pre === 'many') {
    // 413 like the byte and batch-item limits: well-formed, only too big; the remedy is to send less or split it.
    throw new HttpError(
      413,
      'too_many_values',
      `request body has more than ${maxValues} JSON values (objects, arrays, members and elements); send less or split it`,
      { limit: maxValues },
    );
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
      if (key === '__proto__') {
        // the one key an object spread or assignment could turn into a prototype
        throw new HttpError(400, 'forbidden_key', `key "${key}" is not allowed`, { key });
      }
      return value;
    });
  } catch (err) {
    if (err instanceof HttpError) throw err;
    throw new HttpError(400, 'invalid_json', `request body is not valid JSON: ${jsonSyntaxError(err)}`);
  }
}
