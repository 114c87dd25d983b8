// Lingering close (nginx's term). An answer given while the request body is still arriving (refused before a byte of
// it was read: 413 on the declared length, 401, 415, 429, 503, 404/405; or part-way: a chunked or gzip body past the
// limit) is followed by reading and discarding the rest of that body, up to TRACEGATE_LINGER_MAX_BYTES and for at
// most TRACEGATE_LINGER_TIMEOUT_MS, and only then is the connection closed; the answer says Connection: close.
// Closing at once, as Node does after such an answer, leaves the client's bytes unread, and the kernel answers them
// with a reset: a client still writing its body (fetch() writes until it is done or has read a whole answer) fails
// with EPIPE or ECONNRESET and never reads the answer already sent. The bytes discarded are counted, not kept: they
// cost no memory and none of the in-flight body budget (body.ts).
import { type IncomingMessage, ServerResponse } from 'node:http';

export interface LingerBounds {
  /** Body bytes read and discarded after the answer, at most: past them the connection is closed. */
  maxBytes: number;
  /** How long after the answer the connection stays open for them, at most. */
  maxMs: number;
}

/**
 * The ServerResponse class of a server whose connections linger (http.createServer's `ServerResponse` option):
 * when its headers go out while the request body is still arriving, they say Connection: close and the connection
 * lingers. Every answer passes here, whatever wrote it (the app, an error handler, a route streaming its answer).
 */
export function lingeringResponse(bounds: LingerBounds): typeof ServerResponse {
  return class LingeringResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
    override writeHead(statusCode: number, ...rest: unknown[]): this {
      if (!this.headersSent) linger(this.req, this, bounds);
      return Reflect.apply(super.writeHead, this, [statusCode, ...rest]) as this;
    }
  };
}

/**
 * A body declared this long at most, answered before it was read, is left to Node as before: it reads (and drops)
 * the rest and keeps the connection. One socket read's worth: an early answer (401, 404, 415) is often written before
 * the parser has reached the body that came in the same packet as the headers, and a small body is not worth a
 * connection; reading it is bounded by its length.
 */
const KEEP_ALIVE_BODY_BYTES = 64 * 1024;

function linger(req: IncomingMessage, res: ServerResponse, bounds: LingerBounds): void {
  if (req.complete || req.destroyed) return;
  // A body its route still reads (an answer streamed while the body arrives) is the route's, not ours to drop.
  if (req.readableFlowing || req.listenerCount('data') > 0) return;
  const chunked = req.headers['transfer-encoding'] !== undefined;
  const length = Number(req.headers['content-length'] ?? 0);
  if (!chunked && !(length > 0)) return;
  // An answer closing the connection anyway (the route said so, or the client) lingers whatever the body's size.
  const closes = !res.shouldKeepAlive || /\bclose\b/i.test(String(res.getHeader('connection') ?? ''));
  if (!closes && !chunked && length <= KEEP_ALIVE_BODY_BYTES) return;
  res.setHeader('Connection', 'close');
  const socket = req.socket;
  const start = socket.bytesRead;
  let closing = false;
  // Closed once the answer is written ('finish': its last byte handed to the kernel), never before: whatever the
  // client sends from then on is the rest of a body whose answer it has been sent.
  const close = () => {
    if (closing) return;
    closing = true;
    clearTimeout(timer);
    req.off('data', discard);
    req.pause();
    if (res.writableFinished) socket.destroy();
    else res.once('finish', () => socket.destroy()).once('close', () => socket.destroy());
  };
  // Bytes as read from the socket (chunk framing included), since the answer.
  const discard = () => {
    if (socket.bytesRead - start > bounds.maxBytes) close();
  };
  const timer = setTimeout(close, bounds.maxMs).unref();
  socket.once('close', () => clearTimeout(timer));
  req.on('data', discard);
  req.once('end', close); // all of it arrived: closed now, as Node closes after any answer saying Connection: close
  req.resume(); // a body refused part-way was paused where its read stopped
  // Node dumps a body nobody read once the answer is written, dropping its 'data' listeners with it.
  res.once('finish', () => {
    if (!closing && !req.listeners('data').includes(discard)) req.on('data', discard);
  });
  // Node closes a connection whose answer says Connection: close as soon as the answer is written (destroySoon: end,
  // then destroy). Here only its writing side ends then (the FIN after the answer, as nginx's shutdown(SHUT_WR));
  // close() above destroys it.
  socket.destroySoon = () => {
    if (socket.writable) socket.end();
  };
}
