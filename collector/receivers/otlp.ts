// OTLP/HTTP traces: POST /api/integrations/otlp/v1/traces, and /v1/traces so an exporter configured with only
// OTEL_EXPORTER_OTLP_ENDPOINT=http://host:4318 works unchanged. Logs likewise (/v1/logs): GenAI instrumentations send
// prompts and completions as log records; each one with a span context is stored as an event span under its span
// (protocols/otlp/logs.ts). Every answer uses the request's encoding; failures are google.rpc.Status bodies (spec),
// including auth, size and throttling errors.
import type { Context } from 'koa';
import { z } from 'zod';
import { mapOtlp } from '../../mappers/otlp.ts';
import {
  decodeOtlpLogsRequest,
  decodeOtlpRequest,
  encodeExportResponse,
  type NormalizedRequest,
  type OtlpEncoding,
  otlpLimits,
} from '../../protocols/otlp/index.ts';
import type { RouteContext } from '../host/context.ts';
import type { Mapped, ReceiverDeclaration } from '../host/receiver.ts';
import { otlpReplyType } from '../http/errors.ts';

type Signal = 'traces' | 'logs';
type Payload = { req: NormalizedRequest; enc: OtlpEncoding };
type Reply = { enc: OtlpEncoding; rejected: number; errorMessage: string };

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

const DOCS: Record<Signal, ReceiverDeclaration<Payload, Reply>['doc']> = {
  traces: {
    tag: 'ingest',
    summary:
      'OTLP/HTTP traces (ExportTraceServiceRequest) as application/x-protobuf or application/json, optionally gzip/deflate',
    request: { contentTypes: ['application/x-protobuf', 'application/json'] },
    responses: {
      200: {
        description: "ExportTraceServiceResponse, in the request's encoding; partialSuccess reports rejected spans",
        schema: exportResponse,
        protobuf: 'opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse',
      },
    },
  },
  logs: {
    tag: 'ingest',
    summary:
      'OTLP/HTTP logs (ExportLogsServiceRequest), as for traces: each log record with a span context (GenAI events: gen_ai.user.message, gen_ai.choice, gen_ai.client.inference.operation.details, …) is stored as an event span under that span; others are rejected in partialSuccess',
    request: { contentTypes: ['application/x-protobuf', 'application/json'] },
    responses: {
      200: {
        description:
          "ExportLogsServiceResponse, in the request's encoding; partialSuccess reports rejected log records",
        schema: exportLogsResponse,
        protobuf: 'opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse',
      },
    },
  },
};

function otlpReceiver(r: RouteContext, signal: Signal): ReceiverDeclaration<Payload, Reply> {
  const limits = otlpLimits(r.config);
  const decode = signal === 'logs' ? decodeOtlpLogsRequest : decodeOtlpRequest;
  return {
    paths:
      signal === 'logs'
        ? ['/api/integrations/otlp/v1/logs', '/v1/logs']
        : ['/api/integrations/otlp/v1/traces', '/v1/traces'],
    // Logs have their own budget: an application's log exporter must not use up its trace exporter's.
    limiter: signal === 'logs' ? 'otlp-logs' : 'otlp',
    errors: 'rpc-status',
    accepts: ['protobuf', 'json'],
    auditEmpty: true,
    doc: DOCS[signal],
    parse: (raw, enc) => ({ req: decode(raw, enc as OtlpEncoding, limits), enc: enc as OtlpEncoding }),
    map: ({ req, enc }, { caller, now }) => ({
      spans: mapOtlp(req, caller.workspaceId, now, { maxStringBytes: r.config.MAX_STRING_BYTES }),
      rejected: req.rejectedSpans,
      reply: { enc, rejected: req.rejectedSpans, errorMessage: req.errorMessage },
    }),
    answer({ reply }: Mapped<Reply>, ctx: Context) {
      const partial = reply.rejected ? { rejectedSpans: reply.rejected, errorMessage: reply.errorMessage } : null;
      ctx.status = 200;
      ctx.set('Content-Type', otlpReplyType(ctx, reply.enc));
      ctx.body = encodeExportResponse(partial, reply.enc, signal);
    },
  };
}

export const otlpTracesReceiver = (r: RouteContext) => otlpReceiver(r, 'traces');
export const otlpLogsReceiver = (r: RouteContext) => otlpReceiver(r, 'logs');
