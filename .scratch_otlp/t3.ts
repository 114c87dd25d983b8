import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer, JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import { decodeOtlpRequest, otlpLimits } from '../collector/otlp/decode.ts';
import { ExportTraceServiceRequest } from '../collector/otlp/schema.ts';
import { loadConfig } from '../config/index.ts';
const limits = otlpLimits(loadConfig({}));
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
const spans = exp.getFinishedSpans();
const buf = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
const jbuf = Buffer.from(JsonTraceSerializer.serializeRequest(spans)!);
console.log('bytes', buf.length, jbuf.length);
function bench(name: string, fn: () => void) {
  for (let i = 0; i < 30; i++) fn();
  let best = Infinity, bestCpu = Infinity;
  for (let r = 0; r < 7; r++) {
    const N = 40; const t = performance.now(); const c0 = (process as any).threadCpuUsage();
    for (let i = 0; i < N; i++) fn();
    const c1 = (process as any).threadCpuUsage();
    best = Math.min(best, (performance.now() - t) / N);
    bestCpu = Math.min(bestCpu, ((c1.user - c0.user) + (c1.system - c0.system)) / 1000 / N);
  }
  console.log(name, 'wall', best.toFixed(3), 'ms/req', Math.round(512 / best * 1000), 'spans/s; thread cpu', bestCpu.toFixed(3), 'ms/req', Math.round(512 / bestCpu * 1000), 'spans/s');
}
//bench('protobufjs only', () => ExportTraceServiceRequest.decode(buf));
//bench('decode pb', () => decodeOtlpRequest(buf, 'protobuf', limits));
//bench('decode json', () => decodeOtlpRequest(jbuf, 'json', limits));
const a = decodeOtlpRequest(buf, 'protobuf', limits), b = decodeOtlpRequest(jbuf, 'json', limits);
console.log(JSON.stringify(a) === JSON.stringify(b), JSON.stringify(a.resourceSpans[0].scopeSpans[0].spans[0]).slice(0, 600));
const { mapOtlp } = await import('../mappers/otlp.ts');
bench('decode+map pb', () => mapOtlp(decodeOtlpRequest(buf, 'protobuf', limits), 'ws', Date.now(), limits));
const recs = mapOtlp(decodeOtlpRequest(buf, 'protobuf', limits), 'ws', 1, limits);
console.log(JSON.stringify({ ...recs[0], attributes: undefined, prompt: recs[0]!.prompt.slice(0, 80) }, null, 1));
