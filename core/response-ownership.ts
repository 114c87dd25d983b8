// Which workspace the proxy handed each provider response id to, as its stored spans prove it. Workspaces may share the provider key tracegate
// holds, and the provider checks only that key: so the calls about a stored response, and previous_response_id,
// go out with it only for ids the proxy gave this workspace from this upstream.
import type { ProxyCallRef } from './ports/storage.ts';
import type { SpanRecord } from './record.ts';

/** Provider response ids are short tokens (`resp_…`); anything else never reaches the upstream path. */
export const RESPONSE_ID = /^[A-Za-z0-9_-]{1,200}$/;

/** A response id handed to a workspace, by the provider at `upstream` (host:port), for the key tracegate holds. */
export interface ResponseOwnership {
  workspaceId: string;
  responseId: string;
  upstream: string;
  traceId: string;
}

/** The host and port of a provider base URL (default port filled in): a proxy span's server.address and server.port. */
export function serverOf(baseUrl: string): { address: string; port: number } {
  const u = new URL(baseUrl);
  return { address: u.hostname, port: u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80 };
}

/** `host:port`, as the index keeps the upstream. */
const hostPort = (address: string, port: number) => `${address}:${port}`;

export function upstreamOf(baseUrl: string): string {
  const s = serverOf(baseUrl);
  return hostPort(s.address, s.port);
}

/** One string per (workspace, upstream, response id): the key of the recent-ids memory and of a batch's index rows. */
export const ownershipKey = (o: Pick<ResponseOwnership, 'workspaceId' | 'upstream' | 'responseId'>) =>
  `${o.workspaceId}\n${o.upstream}\n${o.responseId}`;

/** The attributes of a proxy span that prove ownership (governance leaves them as the proxy set them). */
export const OWNERSHIP_ATTRIBUTES = ['gen_ai.response.id', 'server.address', 'server.port'] as const;

/**
 * The ownership a proxy span proves: the provider answered this workspace with this id. Only spans the proxy made
 * (no other route can store source `proxy`), and not those answered for a caller's own provider key
 * (X-Provider-Api-Key): that id lives in the caller's provider account, not the held key's.
 */
export function ownershipOf(span: SpanRecord): ResponseOwnership | null {
  if (span.source !== 'proxy') return null;
  const a = span.attributes;
  const id = a['gen_ai.response.id'];
  const address = a['server.address'];
  const port = a['server.port'];
  if (a['proxy.caller_key'] === true || typeof id !== 'string' || !RESPONSE_ID.test(id)) return null;
  if (typeof address !== 'string' || address === '' || typeof port !== 'number') return null;
  return { workspaceId: span.workspaceId, responseId: id, upstream: hostPort(address, port), traceId: span.traceId };
}

/** An id a provider gave a call (`resp_…`, `req_…`): short and printable, or it is not indexed. */
const CALL_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * The ids a proxy span names its call by (TraceLinkStore.proxyCalls): the provider's response id and its request id,
 * whichever key the call went out with (linking is a read in the workspace, not a use of the held key).
 */
export function callRefsOf(span: SpanRecord): ProxyCallRef[] {
  if (span.source !== 'proxy') return [];
  const out: ProxyCallRef[] = [];
  const responseId = span.attributes['gen_ai.response.id'];
  if (typeof responseId === 'string' && CALL_ID.test(responseId)) out.push({ kind: 'response', id: responseId });
  if (CALL_ID.test(span.requestId)) out.push({ kind: 'request', id: span.requestId });
  return out;
}
