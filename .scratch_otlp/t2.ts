import protobuf from 'protobufjs';
import { OTLP_DESCRIPTOR } from '../collector/otlp/schema.ts';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
const size = Number(process.argv[2] ?? 2000);
const exp = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exp)] });
const tracer = provider.getTracer('t', '1.0');
const big = 'x'.repeat(size);
for (let i = 0; i < 512; i++) {
  const s = tracer.startSpan('chat gpt-4o', { attributes: {
    'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.response.model': 'gpt-4o-2024-08-06',
    'gen_ai.usage.input_tokens': 100 + i, 'gen_ai.usage.output_tokens': 50, 'gen_ai.response.finish_reasons': ['stop'], 'gen_ai.response.id': 'chatcmpl-' + i,
    'gen_ai.input.messages': JSON.stringify([{ role: 'system', parts: [{ type: 'text', content: 'You are helpful' }] }, { role: 'user', parts: [{ type: 'text', content: big }] }]),
    'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'answer ' + i }], finish_reason: 'stop' }]),
    'server.address': 'api.openai.com', 'server.port': 443, 'gen_ai.request.temperature': 0.2,
  } });
  s.end();
}
const buf = Buffer.from(ProtobufTraceSerializer.serializeRequest(exp.getFinishedSpans())!);
console.log('bytes', buf.length);
function bench(name: string, fn: () => void) {
  for (let i = 0; i < 20; i++) fn();
  const N = 1000; const t = performance.now();
  for (let i = 0; i < N; i++) fn();
  const dt = (performance.now() - t) / N;
  console.log(name, dt.toFixed(3), 'ms/req', Math.round(512 / dt * 1000), 'spans/s');
}
const d3 = JSON.parse(JSON.stringify(OTLP_DESCRIPTOR));
const T3 = protobuf.Root.fromJSON(d3).lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
const d2 = JSON.parse(JSON.stringify(OTLP_DESCRIPTOR).replaceAll('"edition":"proto3",', ''));
const T2 = protobuf.Root.fromJSON(d2).lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');


const { isUtf8 } = await import('node:buffer');

const d4 = JSON.parse(JSON.stringify(OTLP_DESCRIPTOR).replaceAll('"edition":"proto3"', '"edition":"2023"'));
delete d4.nested.opentelemetry.nested.proto.nested.common.nested.v1.nested.AnyValue.oneofs;
const R4 = protobuf.Root.fromJSON(d4);
const T4 = R4.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
bench('2023 explicit', () => T4.decode(buf));
const m: any = T4.decode(buf);
const kv = m.resourceSpans[0].scopeSpans[0].spans[0].attributes;
console.log(kv[0], Object.keys(kv[0].value), kv[4].value, 'bool default', kv[0].value.boolValue, Object.getPrototypeOf(kv[0].value));
const sp = m.resourceSpans[0].scopeSpans[0].spans[0];
console.log(Object.keys(sp), sp.traceState, sp.droppedAttributesCount);
const av = R4.lookupType('opentelemetry.proto.common.v1.AnyValue');
const e = av.encode({ boolValue: false }).finish(); console.log('enc false', e, av.decode(e));
const e2 = av.encode({ stringValue: '' }).finish(); console.log('enc empty', e2, av.decode(e2));
console.log((av.fields.stringValue as any)._features);
