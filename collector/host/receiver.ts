// A receiver is a declaration: its paths, credential, rate-limit bucket, error shape, accepted bodies, OpenAPI
// entry, and three steps (parse, map, answer). serveReceiver compiles it once, at start, into the route's
// middleware; a request runs it with no lookup of any declaration.
import type { Context } from 'koa';
import type { TracegateError } from '../../core/errors.ts';
import type { Caller, IngestContext } from '../../core/ports/ingest.ts';
import type { SpanRecord } from '../../core/record.ts';
import type { AuthName } from '../auth/strategy.ts';
import { type BodyKind, bodyKind, readBody } from '../http/body.ts';
import type { ErrorFamily } from '../http/errors.ts';
import type { RouteDoc } from '../http/openapi.ts';
import type { RouteContext } from './context.ts';

/** What a receiver's map step produced from one request. */
export interface Mapped<Reply> {
  /** Span records to make durable. */
  spans: SpanRecord[];
  /** Items of the request refused (validation), for the audit record. */
  rejected: number;
  /** What answer() needs besides the spans. */
  reply: Reply;
  /** Set when nothing of the request can be taken (every item refused): thrown, nothing is ingested. */
  refuse?: TracegateError;
  /** The source's records other than spans (feedback votes, security alerts), spooled with the batch. */
  records?: IngestContext['records'];
}

/** A request as map() sees it. */
export interface Received {
  caller: Caller;
  /** Server receive time in ms. */
  now: number;
  /** The path called (receivers may serve several). */
  path: string;
  ctx: Context;
  /** A turn for pending I/O when the body is large (a no-op otherwise): call it between long steps. */
  breathe(): Promise<void>;
}

export interface ReceiverDeclaration<Payload, Reply> {
  /** Paths served with POST; the audit record names the one called. */
  paths: readonly string[];
  /** The rate-limit bucket: one budget per caller. */
  limiter: string;
  /** Default apiKey; a list: the first whose credential the request carries (GuardOptions.auth). */
  auth?: AuthName | readonly AuthName[];
  /** Default the JSON envelope. */
  errors?: Exclude<ErrorFamily, 'envelope'>;
  /** Hand a request with no records to the pipeline all the same, for its audit record (an empty OTLP export). */
  auditEmpty?: boolean;
  /** Content types accepted (415 otherwise). */
  accepts: readonly BodyKind[];
  /** The body limit, after decompression (413 beyond); default TRACEGATE_MAX_BODY_BYTES. */
  maxBodyBytes?: number;
  /**
   * A larger body's records go to the pipeline in parts of about this many body bytes, each durable before the next
   * is handed over, so that the processor and storage threads hold one part at a time; the answer waits for all of
   * them (a part failing fails the request: its retry lands on what was stored). Default: one part.
   */
  ingestPartBytes?: number;
  /** The OpenAPI entry of each path (method, path, auth and errors come from the declaration). */
  doc: Omit<RouteDoc, 'method' | 'path' | 'auth' | 'errors'>;
  /**
   * The body's bytes → the payload: decoded and checked under the request limits (throws a TracegateError). May
   * look at the raw bytes before anything parses them (a signature over the body is checked here).
   */
  parse(raw: Buffer, kind: BodyKind, ctx: Context): Payload | Promise<Payload>;
  /** Payload → records, through the source's mapper. */
  map(payload: Payload, req: Received): Mapped<Reply> | Promise<Mapped<Reply>>;
  /** The answer once the records are durable: sets ctx.status and ctx.body (after what must follow durability). */
  answer(mapped: Mapped<Reply>, ctx: Context): void | Promise<void>;
}

/** Bodies from this size up yield to the event loop between parsing, mapping and ingesting. */
export const LARGE_BODY = 256 * 1024;

/**
 * A turn for pending I/O. Twice setImmediate: from an I/O callback, the first one runs in the same loop
 * iteration's check phase, before the poll phase has read anything new; the second one comes after it has.
 */
export const breathe = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));
const noop = async () => {};

export function serveReceiver<P, R>(r: RouteContext, decl: ReceiverDeclaration<P, R>): void {
  const guard = { auth: decl.auth ?? 'apiKey', limiter: decl.limiter, errors: decl.errors, auditRefusals: true };
  for (const path of decl.paths) {
    r.docs.push({
      ...decl.doc,
      method: 'post',
      path,
      auth: docAuth(decl.auth),
      ...(decl.errors ? { errors: decl.errors } : {}),
    });
    r.on('post', path, guard, receive(r, decl, path));
  }
}

/** The credentials an OpenAPI entry names (a sign-in link is no credential a receiver takes). */
function docAuth(auth: ReceiverDeclaration<unknown, unknown>['auth']): RouteDoc['auth'] {
  const names = typeof auth === 'string' ? [auth] : (auth ?? ['apiKey']);
  return names.filter((n): n is 'apiKey' | 'session' => n === 'apiKey' || n === 'session');
}

function receive<P, R>(r: RouteContext, decl: ReceiverDeclaration<P, R>, path: string) {
  const route = `POST ${path}`;
  return async (ctx: Context): Promise<void> => {
    const kind = bodyKind(ctx, decl.accepts);
    const raw = await readBody(ctx, decl.maxBodyBytes ?? r.config.MAX_BODY_BYTES);
    // Parsing, mapping and ingesting a large body each take a while on the event loop: other requests (and
    // /healthz) get a turn between them. Small bodies, nearly all of them, skip the yield.
    const turn = raw.length >= LARGE_BODY ? breathe : noop;
    const payload = await decl.parse(raw, kind, ctx);
    await turn();
    const caller = ctx.state.caller as Caller;
    const mapped = await decl.map(payload, { caller, now: Date.now(), path, ctx, breathe: turn });
    if (mapped.refuse) throw mapped.refuse;
    await turn();
    const others = mapped.records ?? [];
    if (mapped.spans.length > 0 || others.length > 0 || decl.auditEmpty) {
      const parts = partsOf(mapped.spans, raw.length, others.length, decl.ingestPartBytes);
      for (const [i, spans] of parts.entries()) {
        await r.pipeline.ingest(spans, {
          workspaceId: caller.workspaceId,
          keyId: caller.keyId,
          route,
          ...(i === 0 && mapped.rejected ? { rejected: mapped.rejected } : {}),
          ...(i === 0 && others.length ? { records: others } : {}),
        });
      }
    }
    countIngested(r, mapped.spans);
    await decl.answer(mapped, ctx);
  };
}

/** The spans in parts of about `partBytes` of the body each (by the body's bytes per record), the first with the others. */
function partsOf(spans: SpanRecord[], bodyBytes: number, others: number, partBytes?: number): SpanRecord[][] {
  if (!partBytes || bodyBytes <= partBytes) return [spans];
  const perRecord = bodyBytes / Math.max(1, spans.length + others);
  const size = Math.max(1, Math.floor(partBytes / perRecord));
  const parts: SpanRecord[][] = [];
  for (let at = 0; at < spans.length; at += size) parts.push(spans.slice(at, at + size));
  return parts.length ? parts : [spans];
}

function countIngested(r: RouteContext, records: readonly SpanRecord[]): void {
  if (records.length === 1) return void r.metrics.ingested.inc({ source: records[0]!.source });
  const bySource = new Map<string, number>();
  for (const rec of records) bySource.set(rec.source, (bySource.get(rec.source) ?? 0) + 1);
  for (const [source, n] of bySource) r.metrics.ingested.inc({ source }, n);
}
