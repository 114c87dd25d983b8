import { decodeOtlpRequest, otlpLimits } from '../collector/otlp/decode.ts';
import { configSchema } from '../config/index.ts';
const limits = otlpLimits(configSchema.parse({}));
const n = 6_500_000;
const body = Buffer.from('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[' + '{},'.repeat(n) + '{}]}]}]}]}');
console.log('MB', body.length / 1e6);
let t = performance.now();
try { const r = decodeOtlpRequest(body, 'json', limits); console.log(r.spanCount, r.rejectedSpans); } catch (e) { console.log('err', (e as Error).message); }
console.log('ms', performance.now() - t);
