import { SpanKind } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { decodeOtlpRequest, otlpLimits } from '../collector/otlp/decode.ts';
import { mapOtlp } from '../mappers/otlp.ts';
import { configSchema } from '../config/index.ts';
const limits = otlpLimits(configSchema.parse({}));
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('bench');
for (let i = 0; i < 512; i++) {
  tracer.startSpan('chat gpt-4o-mini', { kind: SpanKind.CLIENT, attributes: {
    'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4o-mini', 'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
    'gen_ai.response.id': `chatcmpl-${i}`, 'gen_ai.response.finish_reasons': ['stop'], 'gen_ai.usage.input_tokens': 120 + i, 'gen_ai.usage.output_tokens': 40,
    'gen_ai.input.messages': JSON.stringify([{ role: 'system', parts: [{ type: 'text', content: 'You are a helpful assistant.' }] }, { role: 'user', parts: [{ type: 'text', content: `Question ${i}: ` + 'lorem ipsum '.repeat(30) }] }]),
    'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: `Answer ${i}: ` + 'dolor sit amet '.repeat(15) }], finish_reason: 'stop' }]),
    'server.address': 'api.openai.com', 'server.port': 443,
  } }).end();
}
const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(exporter.getFinishedSpans())!);
const mode = process.argv[2] ?? 'both';
const norm = decodeOtlpRequest(body, 'protobuf', limits);
const fn = mode === 'decode' ? () => decodeOtlpRequest(body, 'protobuf', limits) : mode === 'map' ? () => mapOtlp(norm, 'ws', 1, limits) : () => mapOtlp(decodeOtlpRequest(body, 'protobuf', limits), 'ws', 1, limits);
for (let i = 0; i < 50; i++) fn();
const ts: number[] = [];
for (let r = 0; r < 400; r++) { const t = performance.now(); fn(); ts.push(performance.now() - t); }
ts.sort((a, b) => a - b);
const min = ts[0]!, med = ts[200]!;
console.log(mode, 'min', min.toFixed(2), 'ms =', Math.round(512000 / min), 'spans/s; median', med.toFixed(2), 'ms =', Math.round(512000 / med), 'spans/s');
