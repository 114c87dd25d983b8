import { decodeOtlpRequest, otlpLimits } from '../collector/otlp/decode.ts';
import { configSchema } from '../config/index.ts';
const limits = otlpLimits(configSchema.parse({}));
function varint(n: number): number[] { const o: number[] = []; while (n >= 0x80) { o.push((n & 0x7f) | 0x80); n >>>= 7; } o.push(n); return o; }
const ld = (f: number, b: Buffer) => Buffer.concat([Buffer.from([(f << 3) | 2, ...varint(b.length)]), b]);
const N = 10_000_000;
const arr = Buffer.alloc(N * 2); for (let i = 0; i < N; i++) { arr[2 * i] = 0x0a; arr[2 * i + 1] = 0; }
const any = ld(5, arr); // AnyValue.arrayValue
const kv = Buffer.concat([ld(1, Buffer.from('k')), ld(2, any)]);
const T = Buffer.from('0102030405060708090a0b0c0d0e0f10', 'hex'), S = Buffer.from('a1a2a3a4a5a6a7a8', 'hex');
const span = Buffer.concat([ld(1, T), ld(2, S), ld(9, kv)]);
const body = ld(1, ld(2, ld(2, span)));
console.log('body MB', (body.length / 1e6).toFixed(1));
const m0 = process.memoryUsage().heapUsed; const t = performance.now();
try { const r = decodeOtlpRequest(body, 'protobuf', limits); console.log('decoded', r.spanCount, r.rejectedSpans); } catch (e) { console.log('err', (e as Error).message); }
console.log('ms', (performance.now() - t).toFixed(0), 'heap delta MB', ((process.memoryUsage().heapUsed - m0) / 1e6).toFixed(0));
// many empty spans
const sp = Buffer.alloc(N * 2); for (let i = 0; i < N; i++) { sp[2 * i] = 0x12; sp[2 * i + 1] = 0; }
const body2 = ld(1, ld(2, sp));
const t2 = performance.now();
try { decodeOtlpRequest(body2, 'protobuf', limits); } catch (e) { console.log('err2', (e as Error).message); }
console.log('ms2', (performance.now() - t2).toFixed(0));
