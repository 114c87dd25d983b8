// OTLP/HTTP traces: POST /api/integrations/otlp/v1/traces, and /v1/traces so an exporter configured with only
// OTEL_EXPORTER_OTLP_ENDPOINT=http://host:4318 works unchanged. Logs likewise (/v1/logs): GenAI instrumentations send
// prompts and completions as log records; each one with a span context is stored as an event span under its span
// (protocols/otlp/logs.ts). Every answer uses the request's encoding; failures are google.rpc.Status bodies (spec),
// including auth, size and throttling errors.
import type { Context, Next } from 'koa';
import { z } from 'zod';
import type { RouteContext } from '../http/context.ts';
import { HttpError } from '../../core/errors.ts';
import { bodyKind, readBody } from '../http/body.ts';
import type { Caller } from '../workspaces/api-keys.ts';
import type { Logger } from '../../platform/logger.ts';
import {
  CONTENT_TYPES,
  OtlpDecodeError,
  decodeOtlpLogsRequest,
  decodeOtlpRequest,
  encodeExportResponse,
  encodeStatus,
  otlpLimits,
  rpcCodeForHttp,
  type FieldViolation,
  type OtlpEncoding,
} from '../../protocols/otlp/index.ts';
import { mapOtlp } from '../../mappers/otlp.ts';

const PATHS = ['/api/integrations/otlp/v1/traces', '/v1/traces'];
const LOG_PATHS = ['/api/integrations/otlp/v1/logs', '/v1/logs'];

/** ExportTraceServiceResponse in its JSON form (encodeExportResponse): `{}` when every span was taken. */
const exportResponse = z.object({
  partialSuccess: z
    .object({
      rejectedSpans: z.string().regex(/^\d+$/).describe('int64, as proto3 JSON writes it: a decimal string'),
      errorMessage: z.string(),
    })
    .optional()
    .describe('Present when spans were rejected'),
});

/** ExportLogsServiceResponse in its JSON form. */
const exportLogsResponse = z.object({
  partialSuccess: z
    .object({
      rejectedLogRecords: z.string().regex(/^\d+$/).describe('int64, as proto3 JSON writes it: a decimal string'),
      errorMessage: z.string(),
    })
    .optional()
    .describe('Present when log records were rejected (those without a span context, among others)'),
});

function encodingOf(ctx: Context): OtlpEncoding {
  const type = (ctx.get('content-type') || '').split(';')[0]!.trim().toLowerCase();
  return type === 'application/x-protobuf' || type === 'application/protobuf' ? 'protobuf' : 'json';
}

/** The spec: reply with the Content-Type received (set as a header: ctx.type would add a charset). */
function replyType(ctx: Context, enc: OtlpEncoding): string {
  const type = (ctx.get('content-type') || '').split(';')[0]!.trim().toLowerCase();
  return type === 'application/protobuf' ? type : CONTENT_TYPES[enc];
}

/** Field violations for Status.details (a google.rpc.BadRequest), when the error knows where the problem is. */
function violationsOf(err: HttpError): FieldViolation[] | undefined {
  if (err instanceof OtlpDecodeError)
    return err.field !== null ? [{ field: err.field, description: err.message }] : undefined;
  if (!Array.isArray(err.details)) return undefined;
  return (err.details as Array<{ field?: string; message?: string }>).map((d) => ({
    field: String(d.field ?? ''),
    description: String(d.message ?? ''),
  }));
}

/**
 * Renders every failure as google.rpc.Status in the request's encoding (the spec: 4xx and 5xx bodies alike):
 * an HttpError keeps its status, headers and message; anything else is logged and answered 500 INTERNAL
 * with a generic message, so no internals leak.
 */
async function otlpErrors(ctx: Context, next: Next): Promise<void> {
  try {
    await next();
  } catch (caught) {
    let err: HttpError;
    if (caught instanceof HttpError) err = caught;
    else {
      (ctx.state.log as Logger | undefined)?.error({ err: caught }, 'unhandled error');
      err = new HttpError(500, 'internal', 'internal error');
    }
    const enc = encodingOf(ctx);
    ctx.status = err.status;
    for (const [k, v] of Object.entries(err.headers)) ctx.set(k, v);
    ctx.set('Content-Type', replyType(ctx, enc));
    ctx.body = encodeStatus(rpcCodeForHttp(err.status), err.message, enc, violationsOf(err));
  }
}

export function otlpRoutes(r: RouteContext): void {
  const limits = otlpLimits(r.config);
  const doc = (paths: string[], summary: string, description: string, schema: z.ZodType, protobuf: string) => {
    for (const path of paths) {
      r.docs.push({
        method: 'post',
        path,
        tag: 'ingest',
        auth: 'apiKey',
        summary,
        request: { contentTypes: ['application/x-protobuf', 'application/json'] },
        responses: { 200: { description, schema, protobuf } },
        errors: 'rpc-status',
      });
    }
  };
  doc(
    PATHS,
    'OTLP/HTTP traces (ExportTraceServiceRequest) as application/x-protobuf or application/json, optionally gzip/deflate',
    "ExportTraceServiceResponse, in the request's encoding; partialSuccess reports rejected spans",
    exportResponse,
    'opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse',
  );
  doc(
    LOG_PATHS,
    'OTLP/HTTP logs (ExportLogsServiceRequest), as for traces: each log record with a span context (GenAI events: gen_ai.user.message, gen_ai.choice, gen_ai.client.inference.operation.details, …) is stored as an event span under that span; others are rejected in partialSuccess',
    "ExportLogsServiceResponse, in the request's encoding; partialSuccess reports rejected log records",
    exportLogsResponse,
    'opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse',
  );

  // `path`: the audit record names the path called (as for a rejected request), not the shared handler.
  const handler = (signal: 'traces' | 'logs', path: string) => async (ctx: Context) => {
    const enc = bodyKind(ctx, ['protobuf', 'json']);
    const body = await readBody(ctx, r.config.MAX_BODY_BYTES);
    const caller = ctx.state.caller as Caller;
    const req = signal === 'logs' ? decodeOtlpLogsRequest(body, enc, limits) : decodeOtlpRequest(body, enc, limits);
    const now = Date.now();
    const records = mapOtlp(req, caller.workspaceId, now, { maxStringBytes: r.config.MAX_STRING_BYTES });
    await r.pipeline.ingest(records, {
      workspaceId: caller.workspaceId,
      keyId: caller.keyId,
      route: `POST ${path}`,
      rejected: req.rejectedSpans,
    });
    r.metrics.ingested.inc({ source: 'otlp' }, records.length);
    ctx.status = 200;
    ctx.set('Content-Type', replyType(ctx, enc));
    ctx.body = encodeExportResponse(
      req.rejectedSpans ? { rejectedSpans: req.rejectedSpans, errorMessage: req.errorMessage } : null,
      enc,
      signal,
    );
  };
  for (const path of PATHS) r.router.post(path, otlpErrors, ...r.ingestGuard('otlp'), handler('traces', path));
  // Logs have their own budget: an application's log exporter must not use up its trace exporter's.
  for (const path of LOG_PATHS) r.router.post(path, otlpErrors, ...r.ingestGuard('otlp-logs'), handler('logs', path));
}
