// Local HTTP endpoints for the SDK's delivery tests: a receiver that records every request and answers as the test
// says (429 storms, outages, a request held open), and a forwarder in front of a real tracegate that can lose the
// answer after tracegate has stored the batch (the case a retry must not turn into a duplicate).
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { get } from '../../support/server.ts';

export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  raw: string;
  atMs: number;
}

export type Answer = (req: Received, index: number, res: ServerResponse) => void | Promise<void>;

export interface Receiver {
  url: string;
  port: number;
  requests: Received[];
  /** Resolves once `n` requests have arrived. */
  waitFor(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export const reply = (
  res: ServerResponse,
  status: number,
  body: unknown = {},
  headers: Record<string, string> = {},
) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

/** The answer tracegate's native route gives a batch it stored whole. */
export const accepted = (req: Received) => {
  const items = Array.isArray(req.body) ? req.body : (req.body?.feedback ?? req.body?.tool_calls ?? [req.body]);
  return { accepted: items.length, rejected: 0, results: items.map((_: unknown, index: number) => ({ index })) };
};

export async function startReceiver(answer: Answer, port = 0): Promise<Receiver> {
  const requests: Received[] = [];
  const waiters: Array<() => void> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      const rec: Received = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body,
        raw,
        atMs: Date.now(),
      };
      requests.push(rec);
      for (const w of waiters.splice(0)) w();
      void Promise.resolve(answer(rec, requests.length - 1, res)).catch(() => res.destroy());
    });
  });
  await listen(server, port);
  const actual = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${actual}`,
    port: actual,
    requests,
    async waitFor(n, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (requests.length < n) {
        if (Date.now() > deadline) throw new Error(`only ${requests.length} of ${n} requests arrived`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 50);
        });
      }
    },
    close: () => closeServer(server),
  };
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/**
 * Forwards every request to `target` and relays the answer, except that the answers to the requests whose index
 * `lose` names are thrown away: the connection is destroyed after the target has answered (and so stored).
 */
export async function startLossyForwarder(target: string, lose: (index: number) => boolean): Promise<Receiver> {
  const t = new URL(target);
  return startReceiver(
    (req, index, res) =>
      new Promise<void>((resolve) => {
        const headers = { ...req.headers, host: t.host, 'content-length': String(Buffer.byteLength(req.raw)) };
        const up = httpRequest(
          { host: t.hostname, port: t.port, path: req.path, method: req.method, headers },
          (answer) => {
            const chunks: Buffer[] = [];
            answer.on('data', (c: Buffer) => chunks.push(c));
            answer.on('end', () => {
              if (lose(index)) res.destroy();
              else {
                res.writeHead(answer.statusCode ?? 502, answer.headers);
                res.end(Buffer.concat(chunks));
              }
              resolve();
            });
          },
        );
        up.on('error', () => {
          res.destroy();
          resolve();
        });
        up.end(req.raw);
      }),
  );
}

/** Every trace of a workspace from the list route (paged), as the list shows them. */
export async function listTraces(baseUrl: string, key: string, query = ''): Promise<any[]> {
  const out: any[] = [];
  let cursor = '';
  for (;;) {
    const res = await get(
      `${baseUrl}/api/traces?limit=1000${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      {
        authorization: `Bearer ${key}`,
      },
    );
    if (res.status !== 200) throw new Error(`list answered ${res.status}: ${res.text}`);
    out.push(...res.json.items);
    if (!res.json.nextCursor) return out;
    cursor = res.json.nextCursor;
  }
}

/** One trace's detail. */
export async function readTrace(baseUrl: string, key: string, traceId: string): Promise<any> {
  const res = await get(`${baseUrl}/api/traces/${encodeURIComponent(traceId)}`, { authorization: `Bearer ${key}` });
  if (res.status !== 200) throw new Error(`trace ${traceId} answered ${res.status}: ${res.text}`);
  return res.json.trace;
}

/** A fetch that logs each request's path, the status it got (or the error) and when, then does the real fetch. */
export function countingFetch() {
  const calls: Array<{ path: string; startMs: number; status?: number; error?: string; items?: number }> = [];
  const fn: typeof fetch = async (input, init) => {
    const url = new URL(String(input));
    const body = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined;
    const items = Array.isArray(body) ? body.length : (body?.feedback ?? body?.tool_calls)?.length;
    const call: (typeof calls)[number] = { path: url.pathname, startMs: Date.now(), items };
    calls.push(call);
    try {
      const res = await fetch(input, init);
      call.status = res.status;
      return res;
    } catch (err) {
      call.error = String((err as Error).cause ?? err);
      throw err;
    }
  };
  return { fetch: fn, calls };
}
