// OpenAPI 3.1 document assembled from the same zod schemas the routes validate with.
import { z } from 'zod';

/** The credentials a route takes: the workspace API key (bearer) or the session cookie. */
export type DocAuth = 'apiKey' | 'session';
const SCHEME: Readonly<Record<DocAuth, string>> = { apiKey: 'bearerAuth', session: 'sessionCookie' };
const authsOf = (r: RouteDoc): readonly DocAuth[] =>
  r.auth === undefined || r.auth === 'none' ? [] : typeof r.auth === 'string' ? [r.auth] : r.auth;

export interface RouteDoc {
  method: 'get' | 'post' | 'put' | 'delete';
  path: string; // OpenAPI style: /api/traces/{traceId}
  summary: string;
  tag: string;
  /** A list: any one of them (the first the request carries decides). */
  auth?: DocAuth | readonly DocAuth[] | 'none';
  request?: { contentTypes: string[]; schema?: z.ZodType };
  query?: z.ZodObject;
  /** `protobuf`: also answered as application/x-protobuf, this message (OTLP routes answer in the request's encoding). */
  responses: Record<string, { description: string; schema?: z.ZodType; contentType?: string; protobuf?: string }>;
  /**
   * The shape of the errors the route answers: OTLP routes a google.rpc.Status in the request's encoding, proxy
   * routes the provider's error object; others the JSON error envelope (errorSchema).
   */
  errors?: 'rpc-status' | 'provider';
}

/** The JSON error envelope (collector/app.ts renderError). */
export const errorSchema = z.object({
  error: z.object({ code: z.string(), message: z.string(), details: z.unknown() }),
});

/** The provider's error shape, as the proxy routes answer every error of their own, so SDKs read message, type, param and code. */
export const providerErrorSchema = z.object({
  error: z.object({
    message: z.string(),
    type: z.string(),
    param: z.string().nullable(),
    code: z.string().nullable(),
    tracegate: z.unknown().optional(),
  }),
});

/** google.rpc.Status, as OTLP/HTTP servers answer errors (JSON form; protobuf carries the same fields). */
const rpcStatusSchema = z.object({
  code: z.number().int(),
  message: z.string(),
  details: z.array(z.unknown()).optional(),
});

/** The component each error family's standard errors refer to. */
const ERROR_NAME = { 'rpc-status': 'Status', provider: 'ProviderError' } as const;

/** Requests are documented as the route accepts them (before defaults), responses as it answers them. */
type Io = 'input' | 'output';
const toSchema = (s: z.ZodType, io: Io = 'input') =>
  z.toJSONSchema(s, { target: 'draft-2020-12', io, unrepresentable: 'any' });

type Json = Record<string, unknown>;

/**
 * A schema to embed in the document. Recursive parts come out of zod as `$defs` with `#/$defs/…` references, which
 * resolve against the document root, not the embedded schema: they move to components.schemas (named by their
 * `.meta({ id })`, or numbered) and the references follow.
 */
function embedder(components: Record<string, unknown>) {
  let anonymous = 0;
  const rewrite = (v: unknown, names: Map<string, string>): unknown => {
    if (Array.isArray(v)) return v.map((x) => rewrite(x, names));
    if (!v || typeof v !== 'object') return v;
    const out: Json = {};
    for (const [k, x] of Object.entries(v)) {
      out[k] =
        k === '$ref' && typeof x === 'string' && x.startsWith('#/$defs/')
          ? `#/components/schemas/${names.get(x.slice(8)) ?? x.slice(8)}`
          : rewrite(x, names);
    }
    return out;
  };
  return (s: z.ZodType, io: Io = 'input'): Json => {
    const { $defs, ...schema } = toSchema(s, io) as Json & { $defs?: Record<string, unknown> };
    if (!$defs) return schema;
    const names = new Map<string, string>();
    for (const name of Object.keys($defs)) names.set(name, name.startsWith('__schema') ? `Schema${++anonymous}` : name);
    for (const [name, def] of Object.entries($defs)) {
      const target = names.get(name)!;
      const hoisted = rewrite(def, names);
      if (target in components && JSON.stringify(components[target]) !== JSON.stringify(hoisted))
        throw new Error(`OpenAPI: two different schemas named ${target}`);
      components[target] = hoisted;
    }
    return rewrite(schema, names) as Json;
  };
}

export function buildOpenApi(routes: RouteDoc[], version: string): object {
  const paths: Record<string, Record<string, unknown>> = {};
  const schemas: Record<string, unknown> = {
    Error: toSchema(errorSchema, 'output'),
    ProviderError: toSchema(providerErrorSchema, 'output'),
    Status: toSchema(rpcStatusSchema, 'output'),
  };
  const embed = embedder(schemas);
  for (const r of routes) {
    const op: Record<string, unknown> = { summary: r.summary, tags: [r.tag] };
    if (r.auth === 'none') op.security = [];
    else if (r.auth !== undefined) op.security = authsOf(r).map((a) => ({ [SCHEME[a]]: [] }));
    const params: unknown[] = [];
    for (const m of r.path.matchAll(/\{(\w+)\}/g))
      params.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
    if (r.query) {
      for (const [name, s] of Object.entries(r.query.shape)) {
        params.push({
          name,
          in: 'query',
          required: !(s as z.ZodType).safeParse(undefined).success,
          schema: embed(s as z.ZodType),
        });
      }
    }
    if (params.length) op.parameters = params;
    if (r.request) {
      const content: Record<string, unknown> = {};
      for (const ct of r.request.contentTypes)
        content[ct] = r.request.schema && ct.includes('json') ? { schema: embed(r.request.schema) } : {};
      op.requestBody = { required: true, content };
    }
    const responses: Record<string, unknown> = {};
    const binary = (message: string) => ({
      'application/x-protobuf': { schema: { type: 'string', format: 'binary', description: message } },
    });
    for (const [status, resp] of Object.entries(r.responses)) {
      const content = {
        ...(resp.schema ? { [resp.contentType ?? 'application/json']: { schema: embed(resp.schema, 'output') } } : {}),
        ...(resp.protobuf ? binary(resp.protobuf) : {}),
      };
      responses[status] = { description: resp.description, ...(Object.keys(content).length ? { content } : {}) };
    }
    const errorContent = {
      'application/json': { schema: { $ref: `#/components/schemas/${r.errors ? ERROR_NAME[r.errors] : 'Error'}` } },
      ...(r.errors === 'rpc-status' ? binary('google.rpc.Status') : {}),
    };
    for (const [status, description] of Object.entries(standardErrors(r))) {
      responses[status] ??= { description, content: errorContent };
    }
    op.responses = responses;
    (paths[r.path] ??= {})[r.method] = op;
  }
  return {
    openapi: '3.1.0',
    info: { title: 'tracegate', version, description: 'OpenTelemetry-native collector for AI execution traces' },
    paths,
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'Workspace API key (tg_…)' },
        sessionCookie: {
          type: 'apiKey',
          in: 'cookie',
          name: 'tg_session',
          description:
            "Session cookie from POST /api/auth/session (HttpOnly, SameSite=Strict); a request that changes state must come from the server's own origin",
        },
      },
      schemas,
    },
  };
}

function standardErrors(r: RouteDoc): Record<string, string> {
  const e: Record<string, string> = {};
  if (r.request)
    Object.assign(e, {
      400: 'Invalid request',
      408: 'The body stalled (nothing sent for TRACEGATE_BODY_IDLE_TIMEOUT_MS)',
      413: 'Body too large (after decompression)',
      415: 'Unsupported content type or encoding',
    });
  else if (r.query || r.path.includes('{')) e[400] = 'Invalid query or path parameter (details name each one)';
  const auths = authsOf(r);
  if (auths.includes('session') && r.method !== 'get') {
    e[403] = "Cross-site: a session request that changes state must come from the server's own origin";
    e[415] = 'A session request that changes state carries JSON or no body';
  }
  if (auths.length > 0) {
    e[401] = 'Missing or invalid credentials';
    e[429] = 'Rate limited (Retry-After), or too many failed authentications from this address';
    // A key this collector has not seen before (none cached, none last known) cannot be checked while storage is down.
    e[503] = r.request
      ? 'Storage back-pressure, too many request bodies being received or processed at once (server_busy), or the API key cannot be verified while storage is unreachable; Retry-After'
      : 'The credential cannot be verified while storage is unreachable; Retry-After';
  }
  // The OTLP error middleware turns any unexpected failure into a Status of its own (INTERNAL, generic message).
  if (r.errors === 'rpc-status') e[500] = 'Unexpected server failure: an INTERNAL Status with a generic message';
  return e;
}
