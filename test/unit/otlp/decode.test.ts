// Decoder unit tests: real spans serialized by @opentelemetry/otlp-transformer (protobuf and
// JSON) must decode to the same normalized structure; hostile inputs must fail fast with
// OtlpDecodeError (→ 400) or reject only the offending span.
import { statusOf } from '../../../collector/http/errors.ts';
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { scanRecordFields } from '../../../processors/governance/scan.ts';
import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import {
  decodeOtlpRequest,
  otlpLimits,
  OtlpDecodeError,
  truncateUtf8,
  u64ToDecimal,
  type NormalizedRequest,
  type OtlpLimits,
} from '../../../protocols/otlp/decode.ts';
import { jsonPrescan } from '../../../platform/json-prescan.ts';
import { encodeExportResponse, encodeStatus, rpcCodeForHttp } from '../../../protocols/otlp/encode.ts';
import { BAD_REQUEST_TYPE_URL, RpcBadRequest, RpcStatus } from '../../../protocols/otlp/schema.ts';
import { mapOtlp } from '../../../mappers/otlp.ts';
import { configSchema } from '../../../config/index.ts';

const limits: OtlpLimits = otlpLimits(configSchema.parse({}));

// ---------------------------------------------------------------------------
// Real spans from the SDK

function makeSpans(n = 3, attrs: Record<string, unknown> = {}): ReadableSpan[] {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': 'decode-test',
      'deployment.environment.name': 'test',
      'service.instance.count': 3,
    }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer('decode-test-scope', '1.2.3');
  const root = tracer.startSpan('root', { kind: SpanKind.SERVER, attributes: { 'http.route': '/chat' } });
  const ctx = trace.setSpan(context.active(), root);
  for (let i = 0; i < n; i++) {
    const s = tracer.startSpan(
      `chat gpt-4o #${i}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.request.model': 'gpt-4o',
          'gen_ai.usage.input_tokens': 100 + i,
          'gen_ai.request.temperature': 0.25,
          'gen_ai.request.stream': false,
          'gen_ai.response.finish_reasons': ['stop', 'length'],
          'some.ints': [1, 2, 3],
          'some.bools': [true, false],
          unicode: 'héllo wörld ✓ 🚀',
          ...attrs,
        },
        links: [{ context: root.spanContext(), attributes: { 'link.reason': 'parent-ish' } }],
      },
      ctx,
    );
    s.addEvent('gen_ai.user.message', { content: `question ${i}`, n: i });
    if (i === 1) s.setStatus({ code: SpanStatusCode.ERROR, message: 'boom' });
    if (i === 2) s.setStatus({ code: SpanStatusCode.OK });
    s.end();
  }
  root.end();
  return exporter.getFinishedSpans();
}

const pbOf = (spans: ReadableSpan[]) => Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
const jsonOf = (spans: ReadableSpan[]) => Buffer.from(JsonTraceSerializer.serializeRequest(spans)!);

function expectDecodeError(fn: () => unknown, pattern: RegExp): OtlpDecodeError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(OtlpDecodeError);
    const e = err as OtlpDecodeError;
    expect(statusOf(e)).to.equal(400);
    expect(e.message).to.match(pattern);
    return e;
  }
  expect.fail('expected an OtlpDecodeError');
}

function allSpans(req: NormalizedRequest) {
  return req.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans));
}

// ---------------------------------------------------------------------------
// Minimal protobuf writer for hand-made (and hostile) payloads

function varint(n: number | bigint): number[] {
  let v = BigInt(n);
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return out;
}
const tag = (field: number, wire: number) => varint((field << 3) | wire);
const ld = (field: number, body: Buffer | string) => {
  const b = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return Buffer.concat([Buffer.from(tag(field, 2)), Buffer.from(varint(b.length)), b]);
};
const vi = (field: number, n: number | bigint) => Buffer.from([...tag(field, 0), ...varint(n)]);
const f64 = (field: number, n: bigint) => {
  const b = Buffer.alloc(9);
  b[0] = (field << 3) | 1;
  b.writeBigUInt64LE(n, 1);
  return b;
};
const cat = (...parts: Buffer[]) => Buffer.concat(parts);

const TRACE = Buffer.from('0102030405060708090a0b0c0d0e0f10', 'hex');
const SPAN = Buffer.from('a1a2a3a4a5a6a7a8', 'hex');
const anyStr = (s: string | Buffer) => ld(1, s);
const kvPb = (key: string | Buffer, value: Buffer) => cat(ld(1, key), ld(2, value));
function spanPb(
  opts: {
    traceId?: Buffer;
    spanId?: Buffer;
    name?: string | Buffer;
    attrs?: Buffer[];
    start?: bigint;
    end?: bigint;
    extra?: Buffer[];
  } = {},
) {
  return cat(
    ld(1, opts.traceId ?? TRACE),
    ld(2, opts.spanId ?? SPAN),
    ld(5, opts.name ?? 'span'),
    f64(7, opts.start ?? 1760000000000000000n),
    f64(8, opts.end ?? 1760000000100000000n),
    ...(opts.attrs ?? []).map((a) => ld(9, a)),
    ...(opts.extra ?? []),
  );
}
const requestPb = (spans: Buffer[], resourceAttrs: Buffer[] = []) =>
  ld(
    1,
    cat(
      ld(1, cat(...resourceAttrs.map((a) => ld(1, a)))),
      ld(2, cat(ld(1, ld(1, 'scope')), ...spans.map((s) => ld(2, s)))),
    ),
  );

/** AnyValue nested `depth` kvlist levels deep, built without recursion or quadratic copying. */
function nestedKvlistPb(depth: number): Buffer {
  const leaf = anyStr('leaf');
  // Per level (outside → in): AnyValue{6: KeyValueList{1: KeyValue{1:"k", 2: AnyValue…}}}
  const sizes: number[] = new Array(depth + 1);
  sizes[depth] = leaf.length;
  const hdr = (inner: number) => {
    const kv = 3 + 1 + varint(inner).length + inner; // key "k" (3 bytes) + tag + len + value
    const kvl = 1 + varint(kv).length + kv;
    return { kv, kvl, any: 1 + varint(kvl).length + kvl };
  };
  for (let d = depth - 1; d >= 0; d--) sizes[d] = hdr(sizes[d + 1]!).any;
  const out = Buffer.alloc(sizes[0]!);
  let pos = 0;
  const put = (bytes: number[]) => {
    for (const x of bytes) out[pos++] = x;
  };
  for (let d = 0; d < depth; d++) {
    const { kv, kvl } = hdr(sizes[d + 1]!);
    put([0x32, ...varint(kvl), 0x0a, ...varint(kv), 0x0a, 0x01, 0x6b, 0x12, ...varint(sizes[d + 1]!)]);
  }
  leaf.copy(out, pos);
  return out;
}

// JSON helpers
const T0 = '1760000000000000000';
const T1 = '1760000000100000000';
function jsonReq(spans: unknown[], resource: unknown = { attributes: [] }) {
  return Buffer.from(JSON.stringify({ resourceSpans: [{ resource, scopeSpans: [{ scope: { name: 's' }, spans }] }] }));
}
function jsonSpan(extra: Record<string, unknown> = {}) {
  return {
    traceId: '0102030405060708090a0b0c0d0e0f10',
    spanId: 'a1a2a3a4a5a6a7a8',
    name: 'x',
    kind: 1,
    startTimeUnixNano: T0,
    endTimeUnixNano: T1,
    attributes: [],
    ...extra,
  };
}

// ---------------------------------------------------------------------------

describe('OTLP decode: SDK-serialized requests', () => {
  const spans = makeSpans();
  const fromPb = decodeOtlpRequest(pbOf(spans), 'protobuf', limits);
  const fromJson = decodeOtlpRequest(jsonOf(spans), 'json', limits);

  it('protobuf and JSON decode to the same normalized structure', () => {
    expect(fromPb.spanCount).to.equal(spans.length);
    expect(fromPb.rejectedSpans).to.equal(0);
    expect(fromJson).to.deep.equal(fromPb);
  });

  it('normalizes ids, times, kinds, status, links, events and attribute types', () => {
    const byName = new Map(allSpans(fromPb).map((s) => [s.name, s]));
    const sdk = spans.find((s) => s.name === 'chat gpt-4o #1')!;
    const s = byName.get('chat gpt-4o #1')!;
    expect(s.traceId)
      .to.equal(sdk.spanContext().traceId)
      .and.to.match(/^[0-9a-f]{32}$/);
    expect(s.spanId).to.equal(sdk.spanContext().spanId);
    expect(s.parentSpanId).to.equal(sdk.parentSpanContext!.spanId);
    expect(byName.get('root')!.parentSpanId).to.equal('');
    const hrToNs = (t: [number, number]) => (BigInt(t[0]) * 1_000_000_000n + BigInt(t[1])).toString();
    expect(s.startTimeNs).to.equal(hrToNs(sdk.startTime));
    expect(s.endTimeNs).to.equal(hrToNs(sdk.endTime));
    expect(s.kind).to.equal(3);
    expect(byName.get('root')!.kind).to.equal(2);
    expect([s.statusCode, s.statusMessage]).to.deep.equal([2, 'boom']);
    expect(byName.get('chat gpt-4o #2')!.statusCode).to.equal(1);
    expect(s.attributes).to.deep.equal({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.usage.input_tokens': 101,
      'gen_ai.request.temperature': 0.25,
      'gen_ai.request.stream': false,
      'gen_ai.response.finish_reasons': ['stop', 'length'],
      'some.ints': [1, 2, 3],
      'some.bools': [true, false],
      unicode: 'héllo wörld ✓ 🚀',
    });
    expect(s.events).to.have.length(1);
    expect(s.events[0]!.name).to.equal('gen_ai.user.message');
    expect(s.events[0]!.attributes).to.deep.equal({ content: 'question 1', n: 1 });
    expect(s.links).to.deep.equal([
      {
        traceId: s.traceId,
        spanId: s.parentSpanId,
        traceState: '',
        flags: s.links[0]!.flags,
        attributes: { 'link.reason': 'parent-ish' },
        droppedAttributesCount: 0,
      },
    ]);
    const rs = fromPb.resourceSpans[0]!;
    expect(rs.resource.attributes['service.name']).to.equal('decode-test');
    expect(rs.resource.attributes['service.instance.count']).to.equal(3);
    expect(rs.scopeSpans[0]!.scope.name).to.equal('decode-test-scope');
    expect(rs.scopeSpans[0]!.scope.version).to.equal('1.2.3');
  });

  it('maps every decoded span to a record', () => {
    const recs = mapOtlp(fromPb, 'ws', 1, limits);
    expect(recs).to.have.length(spans.length);
    expect(recs.filter((r) => r.kind === 'llm')).to.have.length(3);
    const root = recs.find((r) => r.name === 'root')!;
    expect(root.kind).to.equal('other');
    expect(root.attributes['otel.span_kind']).to.equal('server');
    expect(root.environment).to.equal('test');
  });

  it('decodes an empty body and an empty request', () => {
    for (const [body, enc] of [
      [Buffer.alloc(0), 'protobuf'],
      [Buffer.alloc(0), 'json'],
      [Buffer.from('{}'), 'json'],
      [Buffer.from('{"resourceSpans":[]}'), 'json'],
    ] as const) {
      const r = decodeOtlpRequest(body, enc, limits);
      expect([r.spanCount, r.rejectedSpans, r.errorMessage, r.resourceSpans.length]).to.deep.equal([0, 0, '', 0]);
    }
  });
});

describe('OTLP decode: JSON encoding rules', () => {
  const base = JSON.parse(jsonOf(makeSpans(2)).toString('utf8'));
  const reference = decodeOtlpRequest(jsonOf(makeSpans(0)), 'json', limits); // warm-up shape only

  it('accepts upper-case hex and base64 (standard, URL-safe, unpadded) ids', () => {
    void reference;
    const hexToB64 = (h: string, url = false, pad = true) => {
      let s = Buffer.from(h, 'hex').toString(url ? 'base64url' : 'base64');
      if (!pad) s = s.replace(/=+$/, '');
      else if (url) s = s.padEnd(Math.ceil(s.length / 4) * 4, '=');
      return s;
    };
    const want = decodeOtlpRequest(Buffer.from(JSON.stringify(base)), 'json', limits);
    const variants = [
      (h: string) => h.toUpperCase(),
      (h: string) => hexToB64(h),
      (h: string) => hexToB64(h, true),
      (h: string) => hexToB64(h, false, false),
    ];
    for (const conv of variants) {
      const copy = JSON.parse(JSON.stringify(base));
      for (const rs of copy.resourceSpans)
        for (const ss of rs.scopeSpans)
          for (const sp of ss.spans) {
            sp.traceId = conv(sp.traceId);
            sp.spanId = conv(sp.spanId);
            if (sp.parentSpanId) sp.parentSpanId = conv(sp.parentSpanId);
            for (const l of sp.links ?? []) {
              l.traceId = conv(l.traceId);
              l.spanId = conv(l.spanId);
            }
          }
      expect(decodeOtlpRequest(Buffer.from(JSON.stringify(copy)), 'json', limits)).to.deep.equal(want);
    }
  });

  it('accepts 64-bit integers as strings or numbers, keeps values beyond 2^53 exact as strings', () => {
    const body = jsonReq([
      jsonSpan({
        startTimeUnixNano: 1760000000000000000,
        endTimeUnixNano: '1760000000100000000',
        attributes: [
          { key: 'a', value: { intValue: '42' } },
          { key: 'b', value: { intValue: 42 } },
          { key: 'c', value: { intValue: '-7' } },
          { key: 'big', value: { intValue: '9007199254740993' } },
          { key: 'min', value: { intValue: '-9223372036854775808' } },
          { key: 'd', value: { doubleValue: 1.5 } },
          { key: 'nan', value: { doubleValue: 'NaN' } },
          { key: 'inf', value: { doubleValue: 'Infinity' } },
          { key: 'bytes', value: { bytesValue: 'AQID' } },
          { key: 'empty', value: {} },
          { key: 'f', value: { boolValue: false } },
        ],
      }),
    ]);
    const s = allSpans(decodeOtlpRequest(body, 'json', limits))[0]!;
    expect(s.startTimeNs).to.equal('1760000000000000000');
    expect(s.attributes).to.deep.equal({
      a: 42,
      b: 42,
      c: -7,
      big: '9007199254740993',
      min: '-9223372036854775808',
      d: 1.5,
      nan: 'NaN',
      inf: 'Infinity',
      bytes: 'AQID',
      empty: null,
      f: false,
    });
  });

  it('keeps 64-bit integers sent as JSON numbers beyond 2^53 exact (JSON.parse alone would round them)', () => {
    const text = jsonReq([
      jsonSpan({
        startTimeUnixNano: '@START',
        endTimeUnixNano: '1763817000000000999',
        attributes: [
          { key: 'big', value: { intValue: '@BIG' } },
          { key: 'neg', value: { intValue: '@NEG' } },
          { key: 'd', value: { doubleValue: 1e300 } },
        ],
        events: [{ timeUnixNano: '@EVT', name: 'e' }],
      }),
    ])
      .toString()
      .replace('"@START"', '1763817000000000123')
      .replace('"@BIG"', '9007199254740993')
      .replace('"@NEG"', '-9007199254740995')
      .replace('"@EVT"', '1763817000000000457');
    const s = allSpans(decodeOtlpRequest(Buffer.from(text), 'json', limits))[0]!;
    expect([s.startTimeNs, s.events[0]!.timeNs]).to.deep.equal(['1763817000000000123', '1763817000000000457']);
    expect(s.attributes).to.deep.equal({ big: '9007199254740993', neg: '-9007199254740995', d: 1e300 });
    // beyond int64 as a number: rejected like the same digits sent as a string, not rounded into range
    const over = jsonReq([jsonSpan({ attributes: [{ key: 'x', value: { intValue: '@X' } }] })])
      .toString()
      .replace('"@X"', '12345678901234567890');
    const r = decodeOtlpRequest(Buffer.from(over), 'json', limits);
    expect(r.rejectedSpans).to.equal(1);
    expect(r.errorMessage).to.match(/out of int64 range/);
  });

  it('accepts integer enums (and the enum names, defensively)', () => {
    const body = jsonReq([
      jsonSpan({ kind: 'SPAN_KIND_CONSUMER', status: { code: 'STATUS_CODE_ERROR', message: 'x' } }),
      jsonSpan({ spanId: 'b1b2b3b4b5b6b7b8', kind: 4, status: { code: 1 } }),
    ]);
    const [a, b] = allSpans(decodeOtlpRequest(body, 'json', limits));
    expect([a!.kind, a!.statusCode, b!.kind, b!.statusCode]).to.deep.equal([5, 2, 4, 1]);
  });

  it('ignores unknown fields at every level', () => {
    const withUnknown = JSON.parse(JSON.stringify(base));
    withUnknown.futureTopLevel = { x: 1 };
    for (const rs of withUnknown.resourceSpans) {
      rs.unknownRs = [1, 2];
      rs.resource.unknownRes = 'y';
      for (const ss of rs.scopeSpans) {
        ss.scope.unknownScope = true;
        for (const sp of ss.spans) {
          sp.somethingNew = { deep: { er: 1 } };
          sp.trace_id = 'ignored snake_case';
          for (const a of sp.attributes) {
            a.unknownKv = 1;
            a.value.unknownAny = 2;
          }
          for (const e of sp.events ?? []) e.unknownEvent = 3;
        }
      }
    }
    expect(decodeOtlpRequest(Buffer.from(JSON.stringify(withUnknown)), 'json', limits)).to.deep.equal(
      decodeOtlpRequest(Buffer.from(JSON.stringify(base)), 'json', limits),
    );
  });
});

describe('OTLP decode: protobuf wire details', () => {
  it('ignores unknown fields (varint, fixed, length-delimited, groups) at every level', () => {
    const unknown = cat(
      vi(99, 12345),
      f64(98, 7n),
      ld(97, 'future'),
      Buffer.from([...tag(96, 3), ...vi(1, 1), ...tag(96, 4)]),
    );
    const plain = requestPb([spanPb({ attrs: [kvPb('k', anyStr('v'))] })]);
    const noisy = cat(
      ld(
        1,
        cat(
          ld(1, cat(unknown)),
          ld(
            2,
            cat(
              ld(1, cat(ld(1, 'scope'), unknown)),
              ld(2, spanPb({ attrs: [cat(kvPb('k', cat(anyStr('v'), unknown)), unknown)], extra: [unknown] })),
              unknown,
            ),
          ),
          unknown,
        ),
      ),
      unknown,
    );
    expect(decodeOtlpRequest(noisy, 'protobuf', limits)).to.deep.equal(decodeOtlpRequest(plain, 'protobuf', limits));
  });

  it('keeps int64 attributes exact and fixed64 times beyond 2^53', () => {
    const body = requestPb([
      spanPb({
        start: 4294967294999999995n,
        end: 4294967295000000000n, // beyond 2^53, up to the latest storable time
        attrs: [
          kvPb('small', vi(3, 123)),
          kvPb('neg', vi(3, (1n << 64n) - 5n)),
          kvPb('big', vi(3, 9007199254740993n)),
          kvPb('bytes', ld(7, Buffer.from([1, 2, 3]))),
          kvPb('f', vi(2, 0)),
        ],
      }),
    ]);
    const s = allSpans(decodeOtlpRequest(body, 'protobuf', limits))[0]!;
    expect([s.startTimeNs, s.endTimeNs]).to.deep.equal(['4294967294999999995', '4294967295000000000']);
    expect(s.attributes).to.deep.equal({ small: 123, neg: -5, big: '9007199254740993', bytes: 'AQID', f: false });
  });

  it('u64ToDecimal matches BigInt', () => {
    const samples = [
      0n,
      1n,
      2n ** 32n - 1n,
      2n ** 32n,
      2n ** 53n - 1n,
      2n ** 53n,
      2n ** 53n + 1n,
      1760000000123456789n,
      2n ** 64n - 1n,
    ];
    for (let i = 0; i < 2000; i++)
      samples.push(
        BigInt.asUintN(
          64,
          (BigInt(Math.floor(Math.random() * 2 ** 32)) << 32n) | BigInt(Math.floor(Math.random() * 2 ** 32)),
        ),
      );
    for (const v of samples)
      expect(u64ToDecimal(Number(v & 0xffffffffn), Number(v >> 32n)), v.toString()).to.equal(v.toString());
  });

  it('rejects undecodable bodies and wrong wire types with 400', () => {
    expectDecodeError(
      () => decodeOtlpRequest(Buffer.from([0x0a, 0xff, 0xff, 0x01]), 'protobuf', limits),
      /undecodable protobuf/,
    );
    expectDecodeError(
      () => decodeOtlpRequest(Buffer.from('not protobuf at all, just text'), 'protobuf', limits),
      /protobuf/,
    );
    expectDecodeError(() => decodeOtlpRequest(Buffer.from('{"resourceSpans": [ '), 'json', limits), /undecodable JSON/);
    // The position, not V8's quote of the body around it.
    expectDecodeError(
      () => decodeOtlpRequest(Buffer.from('{"resourceSpans": [ {"key": sk-live-9f8e7d6c5b4a} ]}'), 'json', limits),
      /^undecodable JSON body: syntax error(?![\s\S]*sk-live)/,
    );
    expectDecodeError(() => decodeOtlpRequest(Buffer.from('[1,2]'), 'json', limits), /not a JSON object/);
    expectDecodeError(
      () => decodeOtlpRequest(Buffer.from('{"resourceSpans": {"a": 1}}'), 'json', limits),
      /not an array/,
    );
  });
});

describe('OTLP decode: hostile input', () => {
  it('rejects AnyValue nesting beyond maxDepth (JSON), accepts it at the limit', () => {
    const nest = (depth: number): unknown =>
      depth === 0
        ? { stringValue: 'x' }
        : depth % 2
          ? { arrayValue: { values: [nest(depth - 1)] } }
          : { kvlistValue: { values: [{ key: 'k', value: nest(depth - 1) }] } };
    const ok = decodeOtlpRequest(
      jsonReq([jsonSpan({ attributes: [{ key: 'deep', value: nest(limits.maxDepth) }] })]),
      'json',
      limits,
    );
    expect(ok.spanCount).to.equal(1);
    expectDecodeError(
      () =>
        decodeOtlpRequest(
          jsonReq([jsonSpan({ attributes: [{ key: 'deep', value: nest(limits.maxDepth + 1) }] })]),
          'json',
          limits,
        ),
      /nesting exceeds the limit/,
    );
  });

  it('rejects a 10 MB "[[[[…" JSON body before parsing it, fast', () => {
    const body = Buffer.alloc(10 * 1024 * 1024, '[');
    const t = performance.now();
    expectDecodeError(() => decodeOtlpRequest(body, 'json', limits), /nesting/);
    const ms = performance.now() - t;
    console.log(`      10 MB nested JSON: rejected in ${ms.toFixed(1)} ms`);
    expect(ms).to.be.below(200);
    // and a 10 MB JSON body that is mostly one long string is scanned quickly too
    const flat = Buffer.from(JSON.stringify({ resourceSpans: [], pad: 'x'.repeat(10 * 1024 * 1024) }));
    const t2 = performance.now();
    expect(jsonPrescan(flat, 56)).to.equal('ok');
    expect(performance.now() - t2).to.be.below(200);
    expect(jsonPrescan(Buffer.from('{"a":"[[[[[[[[[[[[[[[[[[[[\\"[[[[","b":[[1]]}'), 3)).to.equal('ok');
    expect(jsonPrescan(Buffer.from('{"b":[[[1]]]}'), 3)).to.equal('deep');
  });

  it('rejects a ~1 MB protobuf of nested kvlists fast (< 200 ms) without blowing the stack', () => {
    const depth = 65_000;
    const value = nestedKvlistPb(depth);
    const body = requestPb([spanPb({ attrs: [kvPb('deep', value)] })]);
    expect(body.length).to.be.within(900_000, 1_500_000);
    const t = performance.now();
    expectDecodeError(() => decodeOtlpRequest(body, 'protobuf', limits), /nesting/);
    const ms = performance.now() - t;
    console.log(`      ${body.length} byte protobuf, ${depth} kvlist levels: rejected in ${ms.toFixed(1)} ms`);
    expect(ms).to.be.below(200);
    // Just over our own limit (well under protobufjs's recursion cap) is also a 400:
    expectDecodeError(
      () =>
        decodeOtlpRequest(
          requestPb([spanPb({ attrs: [kvPb('deep', nestedKvlistPb(limits.maxDepth + 1))] })]),
          'protobuf',
          limits,
        ),
      /nesting exceeds the limit/,
    );
    expect(
      allSpans(
        decodeOtlpRequest(
          requestPb([spanPb({ attrs: [kvPb('deep', nestedKvlistPb(limits.maxDepth))] })]),
          'protobuf',
          limits,
        ),
      ),
    ).to.have.length(1);
  });

  it('rejects invalid UTF-8 in protobuf strings (short, long, key, span name)', () => {
    const bad = Buffer.from([0x61, 0xc3, 0x28, 0x62]); // 0xC3 followed by a non-continuation byte
    const longBad = Buffer.concat([Buffer.alloc(500, 0x61), Buffer.from([0xed, 0xa0, 0x80])]); // encoded surrogate
    const cases = [
      requestPb([spanPb({ attrs: [kvPb('k', anyStr(bad))] })]),
      requestPb([spanPb({ attrs: [kvPb('k', anyStr(longBad))] })]),
      requestPb([spanPb({ attrs: [kvPb(bad, anyStr('v'))] })]),
      requestPb([spanPb({ name: Buffer.from([0xff, 0xfe]) })]),
      requestPb([spanPb()], [kvPb('service.name', anyStr(Buffer.from([0x80])))]),
    ];
    for (const body of cases) expectDecodeError(() => decodeOtlpRequest(body, 'protobuf', limits), /UTF-8/);
    // valid multi-byte text passes
    const genuine = 'replacement char \uFFFD is valid UTF-8 '.repeat(3);
    const ok = allSpans(
      decodeOtlpRequest(
        requestPb([
          spanPb({ attrs: [kvPb('k', anyStr('żółć 🚀')), kvPb('r', anyStr('\uFFFD')), kvPb('long', anyStr(genuine))] }),
        ]),
        'protobuf',
        limits,
      ),
    )[0]!;
    expect(ok.attributes).to.deep.equal({ k: 'żółć 🚀', r: '\uFFFD', long: genuine });
  });

  it('rejects invalid UTF-8 in a JSON body', () => {
    const body = Buffer.concat([Buffer.from('{"resourceSpans":[],"x":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    expectDecodeError(() => decodeOtlpRequest(body, 'json', limits), /UTF-8/);
  });

  it('rejects __proto__ keys and never pollutes prototypes; constructor and prototype are ordinary keys', () => {
    const attr = (key: string, value: unknown = { stringValue: 'x' }) =>
      jsonReq([jsonSpan({ attributes: [{ key, value }] })]);
    const bodies = [
      attr('__proto__', { kvlistValue: { values: [{ key: 'polluted', value: { stringValue: 'yes' } }] } }),
      attr('ok', {
        kvlistValue: {
          values: [
            {
              key: '__proto__',
              value: { kvlistValue: { values: [{ key: 'polluted', value: { stringValue: 'yes' } }] } },
            },
          ],
        },
      }),
      Buffer.from(
        `{"resourceSpans":[{"scopeSpans":[{"spans":[${JSON.stringify(jsonSpan()).slice(0, -1)},"__proto__":{"polluted":"yes"}}]}]}]}`,
      ),
      Buffer.from('{"__proto__":{"polluted":"yes"},"resourceSpans":[]}'),
    ];
    for (const body of bodies) expectDecodeError(() => decodeOtlpRequest(body, 'json', limits), /not allowed/);
    expectDecodeError(
      () => decodeOtlpRequest(requestPb([spanPb({ attrs: [kvPb('__proto__', anyStr('x'))] })]), 'protobuf', limits),
      /not allowed/,
    );
    for (const key of ['constructor', 'prototype']) {
      const j = decodeOtlpRequest(attr(key), 'json', limits).resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
      expect(Object.getOwnPropertyDescriptor(j.attributes, key)?.value).to.equal('x');
      const p = decodeOtlpRequest(
        requestPb([spanPb({ attrs: [kvPb('a', ld(6, ld(1, kvPb(key, anyStr('x')))))] })]),
        'protobuf',
        limits,
      );
      expect(p.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.attributes.a).to.deep.equal({ [key]: 'x' });
    }
    expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
    expect(Object.prototype).to.not.have.property('polluted');
  });

  it('rejects 20 MB bodies of tiny messages before materializing them (protobuf and JSON)', () => {
    const n = 10_000_000;
    const arr = Buffer.alloc(n * 2);
    for (let i = 0; i < n; i++) {
      arr[2 * i] = 0x0a;
      arr[2 * i + 1] = 0;
    } // ArrayValue.values = {} × n
    const wide = requestPb([spanPb({ attrs: [kvPb('k', ld(5, arr))] })]);
    let t = performance.now();
    expectDecodeError(() => decodeOtlpRequest(wide, 'protobuf', limits), /in total; split the batch/);
    const ms1 = performance.now() - t;
    const spans = Buffer.alloc(n * 2);
    for (let i = 0; i < n; i++) {
      spans[2 * i] = 0x12;
      spans[2 * i + 1] = 0;
    } // ScopeSpans.spans = {} × n
    t = performance.now();
    expectDecodeError(() => decodeOtlpRequest(ld(1, ld(2, spans)), 'protobuf', limits), /more than 10000 spans/);
    const ms2 = performance.now() - t;
    const json = Buffer.from(
      `{"resourceSpans":[{"scopeSpans":[{"spans":[${JSON.stringify(jsonSpan()).slice(0, -3)}[${'{},'.repeat(6_000_000)}{}]}]}]}]}`,
    );
    t = performance.now();
    expectDecodeError(() => decodeOtlpRequest(json, 'json', limits), /JSON objects; split the batch/);
    const ms3 = performance.now() - t;
    console.log(
      `      20 MB of empty messages: protobuf values ${ms1.toFixed(0)} ms, protobuf spans ${ms2.toFixed(0)} ms, JSON ${ms3.toFixed(0)} ms`,
    );
    for (const ms of [ms1, ms2, ms3]) expect(ms).to.be.below(500);
  });

  it('rejects more spans than maxSpansPerRequest (400), in both encodings', () => {
    const small = { ...limits, maxSpansPerRequest: 3 };
    const spans = makeSpans(3); // 4 spans with the root
    expectDecodeError(() => decodeOtlpRequest(pbOf(spans), 'protobuf', small), /spans; the limit is 3/);
    expectDecodeError(() => decodeOtlpRequest(jsonOf(spans), 'json', small), /spans; the limit is 3/);
  });

  it('keeps a span with too many attributes, events or links: the first ones, the rest counted as dropped', () => {
    const small = { ...limits, maxAttributes: 3, maxEvents: 2 };
    const attrs = (n: number) => Array.from({ length: n }, (_, i) => ({ key: `k${i}`, value: { intValue: i } }));
    const ev = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `e${i}`, timeUnixNano: T0 }));
    const link = (id: string) => ({ traceId: '0102030405060708090a0b0c0d0e0f10', spanId: id, attributes: attrs(4) });
    const body = jsonReq(
      [
        jsonSpan({ spanId: '0000000000000001', attributes: attrs(3), events: ev(2) }),
        jsonSpan({ spanId: '0000000000000002', attributes: attrs(5), droppedAttributesCount: 1 }),
        jsonSpan({ spanId: '0000000000000003', events: [...ev(2), { name: 'e', attributes: attrs(4) }] }),
        jsonSpan({
          spanId: '0000000000000004',
          events: [{ name: 'e', attributes: attrs(4) }],
          links: [link('a1a2a3a4a5a6a7a8'), link('a1a2a3a4a5a6a7a9'), link('a1a2a3a4a5a6a7aa')],
        }),
      ],
      { attributes: attrs(4) },
    );
    const r = decodeOtlpRequest(body, 'json', small);
    expect([r.spanCount, r.rejectedSpans]).to.deep.equal([4, 0]);
    const rs = r.resourceSpans[0]!;
    expect([Object.keys(rs.resource.attributes), rs.resource.droppedAttributesCount]).to.deep.equal([
      ['k0', 'k1', 'k2'],
      1,
    ]);
    const [a, b, c, d] = rs.scopeSpans[0]!.spans;
    expect([a!.droppedAttributesCount, a!.droppedEventsCount]).to.deep.equal([0, 0]);
    expect([Object.keys(b!.attributes), b!.droppedAttributesCount]).to.deep.equal([['k0', 'k1', 'k2'], 3]);
    expect([c!.events.map((e) => e.name), c!.droppedEventsCount]).to.deep.equal([['e0', 'e1'], 1]);
    expect([
      d!.events[0]!.droppedAttributesCount,
      d!.links.length,
      d!.droppedLinksCount,
      d!.links[0]!.droppedAttributesCount,
    ]).to.deep.equal([1, 2, 1, 1]);
    // same via protobuf
    const pb = requestPb([
      spanPb({
        attrs: [kvPb('a', anyStr('1')), kvPb('b', anyStr('1')), kvPb('c', anyStr('1')), kvPb('d', anyStr('1'))],
      }),
      spanPb({ spanId: Buffer.from('b1b2b3b4b5b6b7b8', 'hex') }),
    ]);
    const p = decodeOtlpRequest(pb, 'protobuf', small);
    expect([p.spanCount, p.rejectedSpans]).to.deep.equal([2, 0]);
    const first = p.resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
    expect([Object.keys(first.attributes), first.droppedAttributesCount]).to.deep.equal([['a', 'b', 'c'], 1]);
  });

  it('gives flattened message content (OpenInference, OpenLLMetry) the content limit, not the attribute limit', () => {
    const small = { ...limits, maxAttributeValueBytes: 20, maxStringBytes: 40 };
    const text = 'x'.repeat(35);
    const keys = [
      'llm.input_messages.0.message.content',
      'llm.output_messages.12.message.contents.1.message_content.text',
      'gen_ai.prompt.3.content',
      'gen_ai.completion.0.content',
    ];
    const body = jsonReq([
      jsonSpan({
        attributes: [...keys, 'llm.input_messages.0.message.role'].map((key) => ({
          key,
          value: { stringValue: text },
        })),
      }),
    ]);
    const sp = decodeOtlpRequest(body, 'json', small).resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
    for (const k of keys) expect(sp.attributes[k], k).to.equal(text);
    expect(sp.attributes['llm.input_messages.0.message.role']).to.equal('x'.repeat(20));
  });

  it('truncates overlong strings at a UTF-8 boundary and marks them, never drops them', () => {
    const small = { ...limits, maxAttributeValueBytes: 20, maxStringBytes: 40 };
    const body = jsonReq([
      jsonSpan({
        name: 'n'.repeat(30),
        attributes: [
          { key: 'short', value: { stringValue: 'fine' } },
          { key: 'long', value: { stringValue: 'aé'.repeat(20) } },
          {
            key: 'nested',
            value: { arrayValue: { values: [{ stringValue: 'ok' }, { stringValue: '🚀'.repeat(10) }] } },
          },
          { key: 'gen_ai.input.messages', value: { stringValue: 'm'.repeat(60) } },
        ],
        events: [{ name: 'e', timeUnixNano: T0, attributes: [{ key: 'ev', value: { stringValue: 'x'.repeat(25) } }] }],
      }),
    ]);
    const s = allSpans(decodeOtlpRequest(body, 'json', small))[0]!;
    expect(s.attributes.short).to.equal('fine');
    expect(s.attributes.long).to.equal('aéaéaéaéaéaé' + 'a'); // 19 bytes: the next 'é' would straddle byte 20
    expect(Buffer.byteLength(s.attributes.long as string)).to.be.at.most(20);
    expect(s.attributes.nested).to.deep.equal(['ok', '🚀'.repeat(5)]);
    expect(s.attributes['gen_ai.input.messages']).to.equal('m'.repeat(40)); // content keys get maxStringBytes
    expect(s.name).to.equal('n'.repeat(20));
    expect(s.attributes['tracegate.truncated']).to.deep.equal([
      'long',
      'nested',
      'gen_ai.input.messages',
      'otel.span.name',
    ]);
    expect(s.events[0]!.attributes).to.deep.equal({ ev: 'x'.repeat(20), 'tracegate.truncated': ['ev'] });
    // protobuf path behaves the same
    const pb = requestPb([spanPb({ attrs: [kvPb('long', anyStr('aé'.repeat(20)))] })]);
    const p = allSpans(decodeOtlpRequest(pb, 'protobuf', small))[0]!;
    expect(p.attributes).to.deep.equal({ long: 'aéaéaéaéaéaéa', 'tracegate.truncated': ['long'] });
    expect(truncateUtf8('abc', 10)).to.equal('abc');
    expect(truncateUtf8('🚀🚀', 5)).to.equal('🚀');
  });

  it('never cuts inside a PII or secret value: what a cut leaves would no longer be found and redacted', () => {
    const key = 'sk-proj-Qz7Kn3nEc4qvn5cQBNb7uDWCSEnDwaRQZQciS7HaB3xK';
    for (const [value, sensitive] of [
      ['contact uvtjke5pd@corpleak.example.com today', 'uvtjke5pd@corpleak.example.com'],
      ['card 4111 1111 1111 1111 on file', '4111 1111 1111 1111'],
      [`key ${key} rotated`, key],
    ] as const) {
      const at = value.indexOf(sensitive);
      const cut = truncateUtf8(value, at + sensitive.length - 4);
      expect(cut, value).to.equal(value.slice(0, at));
    }
    // JSON written with \u escapes: a word with escapes the cut runs through is left out whole, and what is kept
    // is scanned unescaped although the document no longer parses
    const escaped = JSON.stringify([{ content: `mail tcz@例子.公司 and ${'x'.repeat(50)}` }]).replace(
      /[^\x00-\x7f]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
    const at = escaped.indexOf('tcz@');
    expect(truncateUtf8(escaped, at + 12)).to.equal(escaped.slice(0, at));
    const kept = truncateUtf8(escaped, escaped.indexOf(' and ') + 3);
    expect(kept).to.include('tcz@\\u4f8b');
    expect(
      scanRecordFields({ prompt: '', response: '', attributes: { 'gen_ai.input.messages': kept } }).map((f) => f.rule),
    ).to.include('pii.email');
    // text that holds nothing is cut at the limit, as before
    expect(truncateUtf8('x'.repeat(100), 60)).to.equal('x'.repeat(60));
    const small = { ...limits, maxAttributeValueBytes: 30 };
    const body = jsonReq([jsonSpan({ attributes: [{ key: 'note', value: { stringValue: `pad pad ${key}` } }] })]);
    expect(allSpans(decodeOtlpRequest(body, 'json', small))[0]!.attributes.note).to.equal('pad pad ');
  });

  it('counts spans with invalid ids or times as rejected and keeps the others', () => {
    const body = jsonReq([
      jsonSpan({ spanId: '0000000000000001' }),
      jsonSpan({ traceId: '0102' }),
      jsonSpan({ traceId: '00000000000000000000000000000000' }),
      jsonSpan({ spanId: '' }),
      jsonSpan({ spanId: 'zzzzzzzzzzzzzzzz' }),
      jsonSpan({ parentSpanId: '0102' }),
      jsonSpan({ startTimeUnixNano: T1, endTimeUnixNano: T0 }),
      jsonSpan({ startTimeUnixNano: '0' }),
      jsonSpan({ spanId: '0000000000000002', parentSpanId: '0000000000000000' }),
    ]);
    const r = decodeOtlpRequest(body, 'json', limits);
    expect(r.spanCount).to.equal(2);
    expect(r.rejectedSpans).to.equal(7);
    expect(r.errorMessage)
      .to.match(/^7 span\(s\) rejected: span #1.*invalid traceId/)
      .and.to.include('(and 2 more)');
    expect(allSpans(r).map((s) => [s.spanId, s.parentSpanId])).to.deep.equal([
      ['0000000000000001', ''],
      ['0000000000000002', ''],
    ]);
    const pb = requestPb([
      spanPb({ traceId: Buffer.from([1, 2, 3]) }),
      spanPb({ spanId: Buffer.alloc(8) }),
      spanPb({ start: 5n, end: 4n }),
      spanPb(),
    ]);
    const p = decodeOtlpRequest(pb, 'protobuf', limits);
    expect([p.spanCount, p.rejectedSpans]).to.deep.equal([1, 3]);
    expect(p.errorMessage)
      .to.include('invalid traceId (3 bytes, expected 16)')
      .and.to.include('spanId')
      .and.to.include('before startTimeUnixNano');
  });

  it('rejects a span ending after 2106-02-07T06:28:15Z (storage buckets by 32-bit seconds), accepts one ending then', () => {
    const last = '4294967295000000000';
    const after = '4294967295000000001';
    const r = decodeOtlpRequest(
      jsonReq([jsonSpan({ spanId: '0000000000000001', endTimeUnixNano: last }), jsonSpan({ endTimeUnixNano: after })]),
      'json',
      limits,
    );
    expect([r.spanCount, r.rejectedSpans]).to.deep.equal([1, 1]);
    expect(r.errorMessage).to.include('after 2106-02-07T06:28:15Z');
    const p = decodeOtlpRequest(
      requestPb([spanPb({ end: BigInt(last) }), spanPb({ end: 18446744073709551615n })]),
      'protobuf',
      limits,
    );
    expect([p.spanCount, p.rejectedSpans]).to.deep.equal([1, 1]);
  });
});

describe('OTLP decode: error locations, key limits, server namespace', () => {
  const SP = 'resourceSpans[0].scopeSpans[0]';

  it('names where a 400 comes from (JSON): span, event, link, resource, scope and status, stopping at the attribute', () => {
    const bad = { kvlistValue: { values: [{ key: '__proto__', value: { stringValue: 'x' } }] } };
    const ok = (n: number) => jsonSpan({ spanId: `a1a2a3a4a5a6a7b${n}` });
    const cases: Array<[Buffer, string]> = [
      [
        jsonReq([
          ok(0),
          ok(1),
          ok(2),
          jsonSpan({
            attributes: [
              { key: 'a', value: { stringValue: 'y' } },
              { key: 'x', value: bad },
            ],
          }),
        ]),
        `${SP}.spans[3].attributes["x"]`,
      ],
      [
        jsonReq([jsonSpan({ attributes: [{ key: '__proto__', value: { stringValue: 'y' } }] })]),
        `${SP}.spans[0].attributes["__proto__"]`,
      ],
      [
        jsonReq([jsonSpan({ events: [{ name: 'e' }, { name: 'e', attributes: [{ key: 'ev', value: bad }] }] })]),
        `${SP}.spans[0].events[1].attributes["ev"]`,
      ],
      [
        jsonReq([
          jsonSpan({
            links: [
              {
                traceId: '0102030405060708090a0b0c0d0e0f10',
                spanId: 'a1a2a3a4a5a6a7a8',
                attributes: [{ key: 'l', value: bad }],
              },
            ],
          }),
        ]),
        `${SP}.spans[0].links[0].attributes["l"]`,
      ],
      [
        jsonReq([jsonSpan()], {
          attributes: [
            { key: 'service.name', value: { stringValue: 's' } },
            { key: 'r', value: bad },
          ],
        }),
        'resourceSpans[0].resource.attributes["r"]',
      ],
      [
        Buffer.from(
          `{"resourceSpans":[{"scopeSpans":[{"spans":[${JSON.stringify(jsonSpan()).slice(0, -1)},"status":{"__proto__":1}}]}]}]}`,
        ),
        `${SP}.spans[0].status`,
      ],
      [
        jsonReq([
          jsonSpan({
            attributes: [{ key: 'deep', value: { arrayValue: { values: [{ arrayValue: { values: [] } }] } } }],
          }),
        ]),
        `${SP}.spans[0].attributes["deep"]`,
      ],
    ];
    const shallow = { ...limits, maxDepth: 1 };
    for (const [body, field] of cases) {
      const e = expectDecodeError(() => decodeOtlpRequest(body, 'json', shallow), /not allowed|nesting/);
      expect(e.field, body.toString().slice(0, 200)).to.equal(field);
    }
    // A resource attribute that would only reject a span fails the request, located too.
    const res = expectDecodeError(
      () =>
        decodeOtlpRequest(
          jsonReq([jsonSpan()], { attributes: [{ key: 'n', value: { intValue: 'x' } }] }),
          'json',
          limits,
        ),
      /resource: .*intValue/,
    );
    expect(res.field).to.equal('resourceSpans[0].resource.attributes["n"]');
    // Request-wide problems have no location.
    expect(
      expectDecodeError(
        () => decodeOtlpRequest(jsonOf(makeSpans(3)), 'json', { ...limits, maxSpansPerRequest: 3 }),
        /limit is 3/,
      ).field,
    ).to.equal(null);
    expect(
      expectDecodeError(() => decodeOtlpRequest(Buffer.from('{"resourceSpans":['), 'json', limits), /undecodable/)
        .field,
    ).to.equal(null);
  });

  it('names where a 400 comes from (protobuf): pre-scan (depth, truncation) and decode (__proto__) errors', () => {
    const okSpan = (n: number) => spanPb({ spanId: Buffer.from(`a1a2a3a4a5a6a7b${n}`, 'hex') });
    const deep = kvPb('deep', ld(5, ld(1, ld(5, ld(1, anyStr('leaf')))))); // 2 array levels
    const shallow = { ...limits, maxDepth: 1 };
    const third = requestPb([okSpan(0), okSpan(1), okSpan(2), spanPb({ attrs: [kvPb('a', anyStr('b')), deep] })]);
    expect(expectDecodeError(() => decodeOtlpRequest(third, 'protobuf', shallow), /nesting/).field).to.equal(
      `${SP}.spans[3].attributes["deep"]`,
    );
    const inEvent = requestPb([spanPb({ extra: [ld(11, cat(ld(2, 'e'))), ld(11, cat(ld(2, 'e'), ld(3, deep)))] })]);
    expect(expectDecodeError(() => decodeOtlpRequest(inEvent, 'protobuf', shallow), /nesting/).field).to.equal(
      `${SP}.spans[0].events[1].attributes["deep"]`,
    );
    const inResource = requestPb([spanPb()], [kvPb('service.name', anyStr('s')), deep]);
    expect(expectDecodeError(() => decodeOtlpRequest(inResource, 'protobuf', shallow), /nesting/).field).to.equal(
      'resourceSpans[0].resource.attributes["deep"]',
    );
    const proto = requestPb([okSpan(0), spanPb({ attrs: [kvPb('ok', ld(6, ld(1, kvPb('__proto__', anyStr('x')))))] })]);
    expect(expectDecodeError(() => decodeOtlpRequest(proto, 'protobuf', limits), /not allowed/).field).to.equal(
      `${SP}.spans[1].attributes["ok"]`,
    );
    const protoKey = requestPb([spanPb({ attrs: [kvPb('__proto__', anyStr('x'))] })]);
    expect(expectDecodeError(() => decodeOtlpRequest(protoKey, 'protobuf', limits), /not allowed/).field).to.equal(
      `${SP}.spans[0].attributes["__proto__"]`,
    );
    // a length running past its span's end
    const cut = requestPb([okSpan(0), spanPb({ extra: [Buffer.from([0x4a, 0x7f, 0x0a])] })]);
    const e = expectDecodeError(() => decodeOtlpRequest(cut, 'protobuf', limits), /length out of range/);
    expect(e.field).to.equal(`${SP}.spans[1]`);
    const wide = expectDecodeError(
      () => decodeOtlpRequest(pbOf(makeSpans(3)), 'protobuf', { ...limits, maxSpansPerRequest: 3 }),
      /limit is 3/,
    );
    expect(wide.field).to.equal(null);
  });

  it('rejects __proto__ object keys inside arrayValue / kvlistValue wrappers and kvlist entries (JSON)', () => {
    const attr = (value: unknown) => jsonReq([jsonSpan({ attributes: [{ key: 'k', value }] })]);
    const hostile = [
      '{"arrayValue":{"__proto__":{"polluted":1},"values":[]}}',
      '{"kvlistValue":{"__proto__":{"polluted":1},"values":[]}}',
      '{"kvlistValue":{"values":[{"key":"a","__proto__":{"polluted":1},"value":{"stringValue":"x"}}]}}',
      '{"arrayValue":{"values":[{"kvlistValue":{"__proto__":1,"values":[]}}]}}',
    ];
    for (const h of hostile) {
      const body = Buffer.from(
        attr({ stringValue: 'PLACEHOLDER' }).toString().replace('{"stringValue":"PLACEHOLDER"}', h),
      );
      expect(body.toString()).to.include('__proto__');
      const e = expectDecodeError(() => decodeOtlpRequest(body, 'json', limits), /__proto__.*not allowed/);
      expect(e.field).to.equal(`${SP}.spans[0].attributes["k"]`);
    }
    expect(Object.prototype).to.not.have.property('polluted');
  });

  it('cuts over-long attribute and kvlist keys to maxKeyBytes (1024 by default) and marks them', () => {
    const huge = 'k'.repeat(2_000_000);
    const nestedHuge = 'n'.repeat(2_000_000);
    const j = jsonReq(
      [
        jsonSpan({
          attributes: [
            { key: huge, value: { stringValue: 'v' } },
            {
              key: 'map',
              value: {
                kvlistValue: {
                  values: [
                    { key: nestedHuge, value: { intValue: 1 } },
                    { key: 'short', value: { intValue: 2 } },
                  ],
                },
              },
            },
            { key: 'plain', value: { stringValue: 'ok' } },
          ],
        }),
      ],
      { attributes: [{ key: huge, value: { stringValue: 'r' } }] },
    );
    const p = requestPb(
      [
        spanPb({
          attrs: [
            kvPb(huge, anyStr('v')),
            kvPb('map', ld(6, cat(ld(1, kvPb(nestedHuge, vi(3, 1))), ld(1, kvPb('short', vi(3, 2)))))),
            kvPb('plain', anyStr('ok')),
          ],
        }),
      ],
      [kvPb(huge, anyStr('r'))],
    );
    // cut to 1024 bytes: 1015 of the key, `~`, 8 hex digits of the whole key's SHA-256
    const h8 = (k: string) => createHash('sha256').update(k).digest('hex').slice(0, 8);
    const cut = `${'k'.repeat(1015)}~${h8(huge)}`;
    for (const [body, enc] of [
      [j, 'json'],
      [p, 'protobuf'],
    ] as const) {
      const r = decodeOtlpRequest(body, enc, limits);
      const sp = allSpans(r)[0]!;
      expect(sp.attributes, enc).to.deep.equal({
        [cut]: 'v',
        map: { [`${'n'.repeat(1015)}~${h8(nestedHuge)}`]: 1, short: 2 },
        plain: 'ok',
        'tracegate.truncated': [cut, 'map'],
      });
      expect(r.resourceSpans[0]!.resource.attributes).to.deep.equal({ [cut]: 'r', 'tracegate.truncated': [cut] });
    }
    // multi-byte keys are cut at a character boundary; a configured maxKeyBytes applies
    const small = decodeOtlpRequest(
      jsonReq([jsonSpan({ attributes: [{ key: 'é'.repeat(20), value: { boolValue: true } }] })]),
      'json',
      { ...limits, maxKeyBytes: 18 },
    );
    const smallCut = `éééé~${h8('é'.repeat(20))}`;
    expect(allSpans(small)[0]!.attributes).to.deep.equal({ [smallCut]: true, 'tracegate.truncated': [smallCut] });
    // two long keys sharing their first 1024 bytes stay two keys
    const a = `${'k'.repeat(1100)}a`,
      b = `${'k'.repeat(1100)}b`;
    const both = allSpans(
      decodeOtlpRequest(
        jsonReq([
          jsonSpan({
            attributes: [
              { key: a, value: { intValue: 1 } },
              { key: b, value: { intValue: 2 } },
            ],
          }),
        ]),
        'json',
        limits,
      ),
    )[0]!;
    expect(Object.values(both.attributes).filter((v) => typeof v === 'number')).to.deep.equal([1, 2]);
  });

  it("keeps a client's tracegate.* attributes as client.tracegate.* (span, event, link, scope, resource): they cannot forge server markers", () => {
    const forged = [
      { key: 'tracegate.truncated', value: { arrayValue: { values: [{ stringValue: 'prompt' }] } } },
      { key: 'tracegate.cost_source', value: { stringValue: 'client' } },
      { key: 'tracegate', value: { stringValue: 'no dot: own key' } },
      { key: 'app.tracegate.x', value: { stringValue: 'not a prefix' } },
    ];
    const body = Buffer.from(
      JSON.stringify({
        resourceSpans: [
          {
            resource: { attributes: [{ key: 'tracegate.workspace', value: { stringValue: 'other' } }] },
            scopeSpans: [
              {
                scope: { name: 's', attributes: [{ key: 'tracegate.scope', value: { stringValue: 'x' } }] },
                spans: [
                  jsonSpan({
                    attributes: [
                      ...forged,
                      { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
                      { key: 'gen_ai.usage.input_tokens', value: { intValue: 10 } },
                      { key: 'long', value: { stringValue: 'x'.repeat(40) } },
                    ],
                    events: [
                      {
                        name: 'e',
                        timeUnixNano: T0,
                        attributes: [{ key: 'tracegate.e', value: { stringValue: 'x' } }],
                      },
                    ],
                    links: [
                      {
                        traceId: '0102030405060708090a0b0c0d0e0f10',
                        spanId: 'a1a2a3a4a5a6a7a9',
                        attributes: [{ key: 'tracegate.l', value: { stringValue: 'x' } }],
                      },
                    ],
                  }),
                ],
              },
            ],
          },
        ],
      }),
    );
    const small = { ...limits, maxAttributeValueBytes: 20 };
    const req = decodeOtlpRequest(body, 'json', small);
    const sp = allSpans(req)[0]!;
    expect(sp.attributes).to.deep.include({
      'client.tracegate.truncated': ['prompt'],
      'client.tracegate.cost_source': 'client',
      tracegate: 'no dot: own key',
      'app.tracegate.x': 'not a prefix',
      'tracegate.truncated': ['long'], // the server's own marker
    });
    expect(sp.attributes).to.not.have.property('tracegate.cost_source');
    expect(sp.events[0]!.attributes).to.deep.equal({ 'client.tracegate.e': 'x' });
    expect(sp.links[0]!.attributes).to.deep.equal({ 'client.tracegate.l': 'x' });
    expect(req.resourceSpans[0]!.resource.attributes).to.deep.equal({ 'client.tracegate.workspace': 'other' });
    expect(req.resourceSpans[0]!.scopeSpans[0]!.scope.attributes).to.deep.equal({ 'client.tracegate.scope': 'x' });
    // protobuf the same
    const pb = decodeOtlpRequest(
      requestPb(
        [spanPb({ attrs: [kvPb('tracegate.cost_source', anyStr('client'))] })],
        [kvPb('tracegate.r', anyStr('x'))],
      ),
      'protobuf',
      limits,
    );
    expect(allSpans(pb)[0]!.attributes).to.deep.equal({ 'client.tracegate.cost_source': 'client' });
    expect(pb.resourceSpans[0]!.resource.attributes).to.deep.equal({ 'client.tracegate.r': 'x' });
    // the mapper's markers are the server's: cost is priced, not taken as "client"
    const rec = mapOtlp(req, 'ws', 1, small)[0]!;
    expect(rec.attributes['tracegate.cost_source']).to.be.oneOf(['price_table', 'unpriced']);
    expect(rec.attributes['client.tracegate.cost_source']).to.equal('client');
    expect(rec.attributes['tracegate.truncated']).to.deep.equal(['long']);
  });
});

describe('OTLP response encoders', () => {
  it('encodes full success as an empty message / {}', () => {
    expect(encodeExportResponse(null, 'protobuf')).to.have.length(0);
    expect(encodeExportResponse({ rejectedSpans: 0, errorMessage: '' }, 'json')).to.equal('{}');
  });

  it('encodes partial success readable by the OTel JS exporter', () => {
    const pb = encodeExportResponse({ rejectedSpans: 3, errorMessage: '3 span(s) rejected' }, 'protobuf');
    const back = ProtobufTraceSerializer.deserializeResponse(pb);
    expect(String(back.partialSuccess?.rejectedSpans)).to.equal('3');
    expect(back.partialSuccess?.errorMessage).to.equal('3 span(s) rejected');
    const json = encodeExportResponse({ rejectedSpans: 3, errorMessage: 'x' }, 'json');
    expect(JSON.parse(json)).to.deep.equal({ partialSuccess: { rejectedSpans: '3', errorMessage: 'x' } });
    const jback = JsonTraceSerializer.deserializeResponse(new TextEncoder().encode(json));
    expect(jback.partialSuccess?.errorMessage).to.equal('x');
  });

  it('encodes google.rpc.Status with an optional BadRequest detail', () => {
    const pb = encodeStatus(rpcCodeForHttp(400), 'bad thing', 'protobuf', [
      { field: 'resourceSpans', description: 'too deep' },
    ]);
    const st = RpcStatus.decode(pb) as unknown as {
      code: number;
      message: string;
      details: Array<{ typeUrl: string; value: Uint8Array }>;
    };
    expect([st.code, st.message]).to.deep.equal([3, 'bad thing']);
    expect(st.details[0]!.typeUrl).to.equal(BAD_REQUEST_TYPE_URL);
    const br = RpcBadRequest.decode(st.details[0]!.value) as unknown as {
      fieldViolations: Array<{ field: string; description: string }>;
    };
    expect(br.fieldViolations[0]).to.deep.include({ field: 'resourceSpans', description: 'too deep' });
    expect(JSON.parse(encodeStatus(14, 'unavailable', 'json'))).to.deep.equal({ code: 14, message: 'unavailable' });
    expect(RpcStatus.decode(encodeStatus(3, 'm', 'protobuf')).toJSON()).to.deep.equal({ code: 3, message: 'm' });
  });
});

describe('OTLP decode + map throughput (512 GenAI chat spans)', () => {
  it('reports spans/s for decode and decode+map', function () {
    this.timeout(120_000);
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const tracer = provider.getTracer('bench');
    for (let i = 0; i < 512; i++) {
      tracer
        .startSpan('chat gpt-4o-mini', {
          kind: SpanKind.CLIENT,
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.provider.name': 'openai',
            'gen_ai.request.model': 'gpt-4o-mini',
            'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
            'gen_ai.response.id': `chatcmpl-${i}`,
            'gen_ai.response.finish_reasons': ['stop'],
            'gen_ai.usage.input_tokens': 120 + i,
            'gen_ai.usage.output_tokens': 40,
            'gen_ai.input.messages': JSON.stringify([
              { role: 'system', parts: [{ type: 'text', content: 'You are a helpful assistant.' }] },
              { role: 'user', parts: [{ type: 'text', content: `Question ${i}: ` + 'lorem ipsum '.repeat(30) }] },
            ]),
            'gen_ai.output.messages': JSON.stringify([
              {
                role: 'assistant',
                parts: [{ type: 'text', content: `Answer ${i}: ` + 'dolor sit amet '.repeat(15) }],
                finish_reason: 'stop',
              },
            ]),
            'server.address': 'api.openai.com',
            'server.port': 443,
          },
        })
        .end();
    }
    const body = pbOf(exporter.getFinishedSpans());
    const rounds = (fn: () => void) => {
      for (let i = 0; i < 20; i++) fn();
      let best = Infinity;
      for (let r = 0; r < 5; r++) {
        const t = performance.now();
        for (let i = 0; i < 20; i++) fn();
        best = Math.min(best, (performance.now() - t) / 20);
      }
      return best;
    };
    const dec = rounds(() => decodeOtlpRequest(body, 'protobuf', limits));
    const both = rounds(() => mapOtlp(decodeOtlpRequest(body, 'protobuf', limits), 'ws', 1, limits));
    const rate = (ms: number) => Math.round((512 / ms) * 1000);
    console.log(
      `      body ${body.length} bytes; decode ${dec.toFixed(2)} ms/req = ${rate(dec)} spans/s; decode+map ${both.toFixed(2)} ms/req = ${rate(both)} spans/s`,
    );
    expect(rate(both)).to.be.above(10_000); // loose floor; shared CI machines are noisy
  });
});
