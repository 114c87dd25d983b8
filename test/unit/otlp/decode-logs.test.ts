// The logs decoder: real log records from @opentelemetry/sdk-logs, serialized by @opentelemetry/otlp-transformer
// as protobuf and as JSON, decode to the same event spans (logs.ts); the protobuf pre-scan enforces the same
// limits on log records as on spans; a record without a span context or a time is rejected alone.
import { expect } from 'chai';
import { SpanKind, context, trace } from '@opentelemetry/api';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import {
  InMemoryLogRecordExporter,
  LoggerProvider,
  SimpleLogRecordProcessor,
  type ReadableLogRecord,
} from '@opentelemetry/sdk-logs';
import { SeverityNumber } from '@opentelemetry/api-logs';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { JsonLogsSerializer, ProtobufLogsSerializer } from '@opentelemetry/otlp-transformer';
import { decodeOtlpLogsRequest, otlpLimits, OtlpDecodeError, type OtlpLimits } from '../../../protocols/otlp/decode.ts';
import { ExportLogsServiceRequest } from '../../../protocols/otlp/schema.ts';
import { mapOtlp } from '../../../mappers/otlp.ts';
import { configSchema } from '../../../config/index.ts';

const limits: OtlpLimits = otlpLimits(configSchema.parse({}));

function makeLogs(n: number, withSpan = true): { records: ReadableLogRecord[]; traceId: string; spanId: string } {
  const exporter = new InMemoryLogRecordExporter();
  const provider = new LoggerProvider({
    resource: resourceFromAttributes({ 'service.name': 'logs-decode' }),
    processors: [new SimpleLogRecordProcessor({ exporter })],
  });
  const logger = provider.getLogger('gen-ai-scope', '1.0.0');
  const span = new BasicTracerProvider().getTracer('t').startSpan('chat', { kind: SpanKind.CLIENT });
  const ctx = withSpan ? trace.setSpan(context.active(), span) : context.active();
  for (let i = 0; i < n; i++) {
    logger.emit({
      eventName: i % 2 ? 'gen_ai.choice' : 'gen_ai.user.message',
      severityNumber: SeverityNumber.INFO,
      severityText: 'INFO',
      body:
        i % 2
          ? { index: 0, finish_reason: 'stop', message: { role: 'assistant', content: `answer ${i}` } }
          : { content: `question ${i}` },
      attributes: { 'gen_ai.provider.name': 'openai', n: i },
      context: ctx,
      timestamp: 1_700_000_000_000 + i,
    });
  }
  span.end();
  return {
    records: exporter.getFinishedLogRecords(),
    traceId: span.spanContext().traceId,
    spanId: span.spanContext().spanId,
  };
}

describe('OTLP logs decoder', () => {
  it('protobuf and JSON from the real serializers decode to the same event spans', () => {
    const { records, traceId, spanId } = makeLogs(4);
    const pb = decodeOtlpLogsRequest(
      Buffer.from(ProtobufLogsSerializer.serializeRequest(records)!),
      'protobuf',
      limits,
    );
    const js = decodeOtlpLogsRequest(Buffer.from(JsonLogsSerializer.serializeRequest(records)!), 'json', limits);
    expect(pb).to.deep.equal(js);
    expect([pb.spanCount, pb.rejectedSpans]).to.deep.equal([4, 0]);
    const spans = pb.resourceSpans[0]!.scopeSpans[0]!.spans;
    expect(spans.map((s) => [s.traceId, s.parentSpanId, s.name, s.startTimeNs])).to.deep.equal(
      [0, 1, 2, 3].map((i) => [
        traceId,
        spanId,
        i % 2 ? 'gen_ai.choice' : 'gen_ai.user.message',
        String((1_700_000_000_000n + BigInt(i)) * 1_000_000n),
      ]),
    );
    expect(new Set(spans.map((s) => s.spanId)).size).to.equal(4);
    expect(spans[1]!.attributes).to.deep.include({
      'otel.log.severity_number': 9,
      'otel.log.severity_text': 'INFO',
      'otel.event.name': 'gen_ai.choice',
      n: 1,
    });
    const recs = mapOtlp(pb, 'ws', 1, { maxStringBytes: 1 << 20 });
    expect(recs.map((r) => r.attributes['otel.span_kind'])).to.deep.equal([undefined, undefined, undefined, undefined]);
    expect(recs.map((r) => [r.kind, r.prompt, r.response, r.finishReason, r.totalTokens, r.trainable])).to.deep.equal([
      ['other', 'user: question 0', '', '', 0, false],
      ['other', '', 'answer 1', 'stop', 0, false],
      ['other', 'user: question 2', '', '', 0, false],
      ['other', '', 'answer 3', 'stop', 0, false],
    ]);
    // Decoding the same request again gives the same ids: a retry overwrites, never duplicates.
    expect(
      decodeOtlpLogsRequest(
        Buffer.from(ProtobufLogsSerializer.serializeRequest(records)!),
        'protobuf',
        limits,
      ).resourceSpans[0]!.scopeSpans[0]!.spans.map((s) => s.spanId),
    ).to.deep.equal(spans.map((s) => s.spanId));
  });

  it('two records alike in every field are two (a message repeated at the same instant), kept in request order', () => {
    const { records } = makeLogs(1);
    const twice = [records[0]!, records[0]!];
    const req = decodeOtlpLogsRequest(Buffer.from(ProtobufLogsSerializer.serializeRequest(twice)!), 'protobuf', limits);
    const spans = req.resourceSpans[0]!.scopeSpans[0]!.spans;
    expect(spans.map((s) => s.attributes['tracegate.log_index'])).to.deep.equal([0, 1]);
    expect(new Set(spans.map((s) => s.spanId)).size).to.equal(2);
  });

  it('a record outside any span is rejected alone; the count limit and the depth limit hold for log records', () => {
    const { records } = makeLogs(2, false);
    const { records: good } = makeLogs(1);
    const req = decodeOtlpLogsRequest(
      Buffer.from(ProtobufLogsSerializer.serializeRequest([...records, ...good])!),
      'protobuf',
      limits,
    );
    expect([req.spanCount, req.rejectedSpans]).to.deep.equal([1, 2]);
    expect(req.errorMessage).to.match(/^2 log record\(s\) rejected: log record #0: no span context/);

    const small = { ...limits, maxSpansPerRequest: 3 };
    const many = Buffer.from(ProtobufLogsSerializer.serializeRequest(makeLogs(4).records)!);
    expect(() => decodeOtlpLogsRequest(many, 'protobuf', small)).to.throw(OtlpDecodeError, /more than 3 log records/);

    let body: Record<string, unknown> = { stringValue: 'x' };
    for (let i = 0; i <= limits.maxDepth; i++) body = { arrayValue: { values: [body] } };
    const deep = Buffer.from(
      ExportLogsServiceRequest.encode(
        ExportLogsServiceRequest.fromObject({
          resourceLogs: [
            {
              scopeLogs: [
                { logRecords: [{ traceId: Buffer.alloc(16, 1), spanId: Buffer.alloc(8, 2), timeUnixNano: 5, body }] },
              ],
            },
          ],
        }),
      ).finish(),
    );
    expect(() => decodeOtlpLogsRequest(deep, 'protobuf', limits)).to.throw(OtlpDecodeError, /nesting exceeds/);
  });

  it('a record timed after what storage can hold is rejected naming the log record field it was timed by', () => {
    const late = (time: Record<string, string>) =>
      decodeOtlpLogsRequest(
        Buffer.from(
          JSON.stringify({
            resourceLogs: [
              { scopeLogs: [{ logRecords: [{ traceId: '01'.repeat(16), spanId: '02'.repeat(8), ...time }] }] },
            ],
          }),
        ),
        'json',
        limits,
      ).errorMessage;
    expect(late({ timeUnixNano: '9000000000000000000' })).to.match(
      /log record #0 \(spanId 0202020202020202\): timeUnixNano is after 2106/,
    );
    expect(late({ observedTimeUnixNano: '9000000000000000000' })).to.match(
      /log record #0 \(spanId 0202020202020202\): observedTimeUnixNano is after 2106/,
    );
  });
});
