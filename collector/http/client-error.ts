// Requests Node's HTTP layer refuses before any route sees them (oversized headers, malformed request lines,
// header timeouts, an Expect it cannot meet, CONNECT) get the same JSON error body as everything else instead of
// Node's bare status line (or none).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

const ANSWERS: Record<string, [number, string, string, string]> = {
  HPE_HEADER_OVERFLOW: [
    431,
    'Request Header Fields Too Large',
    'headers_too_large',
    'the request headers are larger than the server accepts (16 KiB in total by default)',
  ],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [
    413,
    'Payload Too Large',
    'payload_too_large',
    'the chunk extensions are larger than the server accepts',
  ],
  // Node's headersTimeout and requestTimeout both arrive as this code.
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'request_timeout', 'the request was not received in time'],
};

/** A JSON error as a whole HTTP/1.1 answer, the connection closed after it. */
function rawAnswer(
  status: number,
  reason: string,
  code: string,
  message: string,
  details: unknown,
  extra = '',
): string {
  const body = JSON.stringify({ error: { code, message, details } });
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`;
}

export function answerClientErrors(server: Server): void {
  // An Expect other than 100-continue (Node would answer a bare 417 and keep the connection).
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const body = JSON.stringify({
      error: {
        code: 'expectation_failed',
        message: 'only "Expect: 100-continue" is supported',
        details: { expect: String(req.headers.expect ?? '').slice(0, 100) },
      },
    });
    res
      .writeHead(417, {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body),
        Connection: 'close',
      })
      .end(body);
  });
  // CONNECT: not a proxy (Node would drop the connection without an answer).
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    socket.end(
      rawAnswer(
        405,
        'Method Not Allowed',
        'method_not_allowed',
        'CONNECT is not served here',
        null,
        'Allow: GET, POST, PATCH, DELETE, OPTIONS\r\n',
      ),
      () => socket.destroy(),
    );
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A connection the client already closed, or one whose answer has begun, cannot take a response.
    if (
      err.code === 'ECONNRESET' ||
      !socket.writable ||
      (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent
    ) {
      socket.destroy();
      return;
    }
    const [status, reason, code, message] = ANSWERS[err.code ?? ''] ?? [
      400,
      'Bad Request',
      'malformed_request',
      'the request is not valid HTTP/1.1',
    ];
    // Then closed for good, as Node's own handler does: a handler still reading this request (a request timeout
    // mid-body) sees it aborted instead of storing a body whose client was told it failed.
    socket.end(rawAnswer(status, reason, code, message, err.code ? { parser: err.code } : null), () =>
      socket.destroy(),
    );
  });
}
