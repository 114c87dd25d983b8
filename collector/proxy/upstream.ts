// The upstream side of the proxy: keep-alive pools per origin, the header allowlists, transport errors.
import { hash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { Pool } from 'undici';
import type { Config } from '../../config/index.ts';
import { RESPONSE_ID } from './ownership.ts';

export type ProxyTimeouts = Pick<
  Config,
  | 'PROXY_CONNECT_TIMEOUT_MS'
  | 'PROXY_HEADERS_TIMEOUT_MS'
  | 'PROXY_BODY_TIMEOUT_MS'
  | 'PROXY_MAX_CONNECTIONS'
  | 'PROXY_KEEPALIVE_MS'
>;

export interface Target {
  origin: string;
  path: string;
}

/** `${baseUrl}/responses`; nothing from the caller takes part in building it. */
export function responsesTarget(baseUrl: string): Target {
  const u = new URL(baseUrl);
  return { origin: u.origin, path: `${u.pathname.replace(/\/+$/, '')}/responses${u.search}` };
}

export { RESPONSE_ID };

/**
 * `${baseUrl}/responses/{id}{sub}?{query}` for the calls about a stored response. `id` must match
 * RESPONSE_ID and `sub` is one of ours; the query is re-encoded, so it cannot leave the query part.
 */
export function responseItemTarget(
  baseUrl: string,
  id: string,
  sub: '' | '/cancel' | '/input_items',
  query: URLSearchParams,
): Target {
  if (!RESPONSE_ID.test(id)) throw new RangeError('bad response id');
  const u = new URL(baseUrl);
  const params = new URLSearchParams(u.search);
  for (const [k, v] of query) params.append(k, v);
  const qs = params.toString();
  return { origin: u.origin, path: `${u.pathname.replace(/\/+$/, '')}/responses/${id}${sub}${qs ? `?${qs}` : ''}` };
}

export class Upstreams {
  private readonly pools = new Map<string, Pool>();
  private readonly settings: ProxyTimeouts;
  constructor(settings: ProxyTimeouts) {
    this.settings = settings;
  }

  pool(origin: string): Pool {
    let p = this.pools.get(origin);
    if (!p) {
      const s = this.settings;
      p = new Pool(origin, {
        connections: s.PROXY_MAX_CONNECTIONS,
        pipelining: 1,
        connectTimeout: s.PROXY_CONNECT_TIMEOUT_MS,
        keepAliveTimeout: s.PROXY_KEEPALIVE_MS,
      });
      this.pools.set(origin, p);
    }
    return p;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close().catch(() => {})));
    this.pools.clear();
  }
}

// Forwarded request headers: an allowlist. Never the caller's Authorization (that is the tracegate key),
// nor Host, cookies, X-Forwarded-*, or X-Provider-Api-Key itself.
const FORWARD = ['accept', 'user-agent', 'openai-beta', 'idempotency-key'];
// Which organization and project a call is billed to: the caller's choice only with the caller's own key;
// with the workspace's configured key, a caller must not pick another org or project of its owner.
const CALLER_KEY_ONLY = ['openai-organization', 'openai-project'];

/**
 * `workspaceId`: with a key tracegate holds (shared by workspaces, or given to two of them), an Idempotency-Key goes
 * out as a hash of the workspace and the caller's key: a provider replaying answers by key then never answers one
 * workspace with another's, while a caller's retries still share one key.
 */
export function upstreamHeaders(
  incoming: IncomingHttpHeaders,
  apiKey: string | undefined,
  callerKey: boolean,
  workspaceId: string,
): Record<string, string> {
  const h: Record<string, string> = {
    'content-type': 'application/json',
    // Identity bytes: the stream is forwarded and parsed as is.
    'accept-encoding': 'identity',
  };
  for (const name of callerKey ? [...FORWARD, ...CALLER_KEY_ONLY] : FORWARD) {
    const v = incoming[name];
    if (typeof v === 'string' && v) h[name] = v;
  }
  const key = h['idempotency-key'];
  if (key !== undefined && !callerKey)
    h['idempotency-key'] = `tg-${hash('sha256', `${workspaceId}\u0000${key}`, 'hex')}`;
  if (apiKey) h.authorization = `Bearer ${apiKey}`;
  return h;
}

/** Response headers worth passing back: the provider's ids, timings, rate-limit state and retry hints. */
const PASS_BACK =
  /^(x-request-id|openai-processing-ms|openai-version|x-ratelimit-[a-z-]+|retry-after|retry-after-ms|x-should-retry)$/;

export function passBackHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined && PASS_BACK.test(k)) out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

export interface TransportFailure {
  status: 502 | 504;
  code: string;
  message: string;
}

/** A failure to get an answer from the provider, as the status we answer with (no host or address in the message). */
export function transportFailure(err: unknown): TransportFailure {
  const code = (err as { code?: string }).code ?? '';
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return { status: 504, code: 'upstream_connect_timeout', message: 'timed out connecting to the provider' };
    case 'UND_ERR_HEADERS_TIMEOUT':
      return { status: 504, code: 'upstream_timeout', message: 'the provider did not answer in time' };
    case 'UND_ERR_BODY_TIMEOUT':
      return { status: 504, code: 'upstream_timeout', message: 'the provider stopped sending data' };
    default:
      return {
        status: 502,
        code: 'upstream_unavailable',
        message: `could not reach the provider (${code || 'network error'})`,
      };
  }
}
