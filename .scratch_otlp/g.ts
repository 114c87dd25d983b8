import { otlpRoot } from '../collector/otlp/schema.ts';
const t = otlpRoot.lookupType('opentelemetry.proto.common.v1.AnyValue');
t.setup();
console.log(String((t as any).decode));
const k = otlpRoot.lookupType('opentelemetry.proto.common.v1.KeyValue'); k.setup(); console.log(String((k as any).decode));
console.log(String((t as any).ctor));
