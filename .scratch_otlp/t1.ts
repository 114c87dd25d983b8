import { ExportTraceServiceRequest, otlpRoot } from '../collector/otlp/schema.ts';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer, JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
const f = (otlpRoot.lookupType('opentelemetry.proto.common.v1.AnyValue').fields.stringValue as any);
f.resolve();
console.log('utf8 feature', f._features.utf8_validation);
const exp = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exp)] });
const tracer = provider.getTracer('t', '1.0');
const big = 'x'.repeat(2000);
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
const spans = exp.getFinishedSpans();
const pb = ProtobufTraceSerializer.serializeRequest(spans)!;
const js = JsonTraceSerializer.serializeRequest(spans)!;
console.log('pb bytes', pb.length, 'json bytes', js.length);
const buf = Buffer.from(pb);
let m: any = ExportTraceServiceRequest.decode(buf);
console.log(Object.keys(m.resourceSpans[0].scopeSpans[0].spans[0]), m.resourceSpans[0].scopeSpans[0].spans[0].attributes[0]);
const kv = m.resourceSpans[0].scopeSpans[0].spans[0].attributes[0];
console.log('oneof', kv.value.value, Object.keys(kv.value), 'proto intValue', kv.value.intValue, typeof m.resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano);
const N = 200;
let t = performance.now();
for (let i = 0; i < N; i++) m = ExportTraceServiceRequest.decode(buf);
const dt = (performance.now() - t) / N;
console.log('pb decode ms/req', dt.toFixed(3), 'spans/s', Math.round(512 / dt * 1000));
const jsBuf = Buffer.from(js);
t = performance.now();
for (let i = 0; i < N; i++) JSON.parse(jsBuf.toString('utf8'));
const dj = (performance.now() - t) / N;
console.log('json parse ms/req', dj.toFixed(3), 'spans/s', Math.round(512 / dj * 1000));
// invalid utf8
const bad = Buffer.from(ExportTraceServiceRequest.encode({ resourceSpans: [{ scopeSpans: [{ spans: [{ name: 'abcdefghijklmnop' }] }] }] }).finish());
const idx = bad.indexOf('abcdefghijk'); bad[idx + 2] = 0xff;
try { console.log(ExportTraceServiceRequest.decode(bad)); } catch (e) { console.log('bad utf8 ->', (e as Error).name, (e as Error).message); }
const bad2 = Buffer.from(ExportTraceServiceRequest.encode({ resourceSpans: [{ scopeSpans: [{ spans: [{ name: 'ab' }] }] }] }).finish());
bad2[bad2.indexOf('ab') + 1] = 0xc3;
try { console.log(JSON.stringify((ExportTraceServiceRequest.decode(bad2) as any).resourceSpans[0].scopeSpans[0].spans[0].name)); } catch (e) { console.log('bad utf8 short ->', (e as Error).message); }
// JSON deep
const deep = '['.repeat(2_000_000) + ']'.repeat(2_000_000);
t = performance.now();
try { JSON.parse(deep); console.log('deep json parsed', performance.now() - t); } catch (e) { console.log('deep json', (e as Error).message); }
