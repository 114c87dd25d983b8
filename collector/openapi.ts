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

export function buildOpenApi(routes: RouteDoc[], version: string): object {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const op: Record<string, unknown> = { summary: r.summary, tags: [r.tag] };
    if (r.auth === 'apiKey') op.security = [{ bearerAuth: [] }];
    if (r.auth === 'session') op.security = [{ sessionCookie: [] }];
    if (r.auth === 'none') op.security = [];
    const params: unknown[] = [];
    for (const m of r.path.matchAll(/\{(\w+)\}/g)) params.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
    if (r.query) {
      for (const [name, s] of Object.entries(r.query.shape)) {
        params.push({ name, in: 'query', required: !(s as z.ZodType).safeParse(undefined).success, schema: toSchema(s as z.ZodType) });
      }
    }
    if (params.length) op.parameters = params;
    if (r.request) {
      const content: Record<string, unknown> = {};
      for (const ct of r.request.contentTypes) content[ct] = r.request.schema && ct.includes('json') ? { schema: toSchema(r.request.schema) } : {};
      op.requestBody = { required: true, content };
    }
    const responses: Record<string, unknown> = {};
    for (const [status, resp] of Object.entries(r.responses)) {
      responses[status] = {
        description: resp.description,
        ...(resp.schema ? { content: { [resp.contentType ?? 'application/json']: { schema: toSchema(resp.schema) } } } : {}),
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
      schemas: { Error: toSchema(errorSchema), Status: toSchema(rpcStatusSchema) },
    },
  };
}

function standardErrors(r: RouteDoc): Record<string, string> {
  const e: Record<string, string> = {};
  if (r.request) Object.assign(e, { 400: 'Invalid request', 413: 'Body too large (after decompression)', 415: 'Unsupported content type or encoding' });
  if (r.auth === 'apiKey' || r.auth === 'session') {
    e[401] = 'Missing or invalid credentials';
    e[429] = 'Rate limited (Retry-After), or too many failed authentications from this address';
  }
  if (r.method === 'post' && r.auth === 'apiKey') e[503] = 'Storage back-pressure (Retry-After)';
  return e;
}
