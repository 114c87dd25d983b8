// OpenAPI 3.1 document assembled from the same zod schemas the routes validate with.
import { z } from 'zod';

export interface RouteDoc {
  method: 'get' | 'post' | 'put' | 'delete';
  path: string;           // OpenAPI style: /api/traces/{traceId}
  summary: string;
  tag: string;
  auth?: 'apiKey' | 'session' | 'none';
  request?: { contentTypes: string[]; schema?: z.ZodType };
  query?: z.ZodObject;
  responses: Record<string, { description: string; schema?: z.ZodType; contentType?: string }>;
  /** OTLP routes answer errors as a google.rpc.Status in the request's encoding, not the JSON error envelope. */
  errors?: 'rpc-status';
}

const errorSchema = z.object({
  error: z.object({ code: z.string(), message: z.string(), details: z.unknown() }),
});

/** google.rpc.Status, as OTLP/HTTP servers answer errors (JSON form; protobuf carries the same fields). */
const rpcStatusSchema = z.object({ code: z.number().int(), message: z.string(), details: z.array(z.unknown()).optional() });

const toSchema = (s: z.ZodType) => z.toJSONSchema(s, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' });

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
      out[k] = k === '$ref' && typeof x === 'string' && x.startsWith('#/$defs/') ? `#/components/schemas/${names.get(x.slice(8)) ?? x.slice(8)}` : rewrite(x, names);
    }
    return out;
  };
  return (s: z.ZodType): Json => {
    const { $defs, ...schema } = toSchema(s) as Json & { $defs?: Record<string, unknown> };
    if (!$defs) return schema;
    const names = new Map<string, string>();
    for (const name of Object.keys($defs)) names.set(name, name.startsWith('__schema') ? `Schema${++anonymous}` : name);
    for (const [name, def] of Object.entries($defs)) {
      const target = names.get(name)!;
      const hoisted = rewrite(def, names);
      if (target in components && JSON.stringify(components[target]) !== JSON.stringify(hoisted)) throw new Error(`OpenAPI: two different schemas named ${target}`);
      components[target] = hoisted;
    }
    return rewrite(schema, names) as Json;
  };
}

export function buildOpenApi(routes: RouteDoc[], version: string): object {
  const paths: Record<string, Record<string, unknown>> = {};
  const schemas: Record<string, unknown> = { Error: toSchema(errorSchema), Status: toSchema(rpcStatusSchema) };
  const embed = embedder(schemas);
  for (const r of routes) {
    const op: Record<string, unknown> = { summary: r.summary, tags: [r.tag] };
    if (r.auth === 'apiKey') op.security = [{ bearerAuth: [] }];
    if (r.auth === 'session') op.security = [{ sessionCookie: [] }];
    if (r.auth === 'none') op.security = [];
    const params: unknown[] = [];
    for (const m of r.path.matchAll(/\{(\w+)\}/g)) params.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
    if (r.query) {
      for (const [name, s] of Object.entries(r.query.shape)) {
        params.push({ name, in: 'query', required: !(s as z.ZodType).safeParse(undefined).success, schema: embed(s as z.ZodType) });
      }
    }
    if (params.length) op.parameters = params;
    if (r.request) {
      const content: Record<string, unknown> = {};
      for (const ct of r.request.contentTypes) content[ct] = r.request.schema && ct.includes('json') ? { schema: embed(r.request.schema) } : {};
      op.requestBody = { required: true, content };
    }
    const responses: Record<string, unknown> = {};
    for (const [status, resp] of Object.entries(r.responses)) {
      responses[status] = {
        description: resp.description,
        ...(resp.schema ? { content: { [resp.contentType ?? 'application/json']: { schema: embed(resp.schema) } } } : {}),
      };
    }
    const errorContent = r.errors === 'rpc-status'
      ? { 'application/json': { schema: { $ref: '#/components/schemas/Status' } }, 'application/x-protobuf': { schema: { type: 'string', format: 'binary', description: 'google.rpc.Status' } } }
      : { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } };
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
        sessionCookie: { type: 'apiKey', in: 'cookie', name: 'tg_session' },
      },
      schemas,
    },
  };
}

function standardErrors(r: RouteDoc): Record<string, string> {
  const e: Record<string, string> = {};
  if (r.request) Object.assign(e, { 400: 'Invalid request', 413: 'Body too large (after decompression)', 415: 'Unsupported content type or encoding' });
  else if (r.query || r.path.includes('{')) e[400] = 'Invalid query or path parameter (details name each one)';
  if (r.auth === 'apiKey' || r.auth === 'session') {
    e[401] = 'Missing or invalid credentials';
    e[429] = 'Rate limited (Retry-After), or too many failed authentications from this address';
  }
  if (r.method === 'post' && r.auth === 'apiKey') e[503] = 'Storage back-pressure, or too many request bodies being received at once (server_busy); Retry-After';
  // The OTLP error middleware turns any unexpected failure into a Status of its own (INTERNAL, generic message).
  if (r.errors === 'rpc-status') e[500] = 'Unexpected server failure: an INTERNAL Status with a generic message';
  return e;
}
