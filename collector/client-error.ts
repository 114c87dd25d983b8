// Requests Node's HTTP parser refuses before any route sees them (oversized headers, malformed request lines,
// header timeouts) get the same JSON error body as everything else instead of Node's bare status line.
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';

const ANSWERS: Record<string, [number, string, string, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large', 'headers_too_large', 'the request headers are larger than the server accepts (16 KiB in total by default)'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large', 'payload_too_large', 'the chunk extensions are larger than the server accepts'],
  // Node's headersTimeout and requestTimeout both arrive as this code.
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'request_timeout', 'the request was not received in time'],
};

export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A connection the client already closed, or one whose answer has begun, cannot take a response.
    if (err.code === 'ECONNRESET' || !socket.writable || (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent) {
      socket.destroy();
      return;
    }
    const [status, reason, code, message] = ANSWERS[err.code ?? ''] ?? [400, 'Bad Request', 'malformed_request', 'the request is not valid HTTP/1.1'];
    const body = JSON.stringify({ error: { code, message, details: err.code ? { parser: err.code } : null } });
    // Then closed for good, as Node's own handler does: a handler still reading this request (a request timeout
    // mid-body) sees it aborted instead of storing a body whose client was told it failed.
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`, () => socket.destroy());
  });
}
