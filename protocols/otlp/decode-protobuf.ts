// OTLP protobuf → NormalizedRequest: the structural pre-scan first (prescan.ts), then protobufjs with our
// own schema (schema.ts) and a stricter, faster string reader.
import { isUtf8 } from 'node:buffer';
import protobuf from 'protobufjs';
import type { Attributes, AttrValue } from '../../core/record.ts';
import {
  ExportLogsServiceRequest,
  ExportTraceServiceRequest,
  type PbAnyValue,
  type PbKeyValue,
  type PbLogRecord,
  type PbLong,
  type PbScope,
  type PbSpan,
} from './schema.ts';
import { LOG_BODY, logSpan } from './logs.ts';
import { prescanProtobuf } from './prescan.ts';
import {
  attrKey,
  attrSegment,
  cap,
  checkSpanTimes,
  Ctx,
  finishAttrs,
  finiteOrString,
  has,
  idHint,
  limitPlain,
  limitStr,
  located,
  nestedKey,
  type NormalizedEvent,
  type NormalizedLink,
  type NormalizedRequest,
  type NormalizedResourceSpans,
  type NormalizedScope,
  type NormalizedScopeSpans,
  type NormalizedSpan,
  OtlpDecodeError,
  type OtlpLimits,
  over,
  SpanReject,
  SpanTally,
  toHex,
  tooDeep,
  u64ToDecimal,
  ZERO_SPAN,
  ZERO_TRACE,
} from './normalized.ts';

// protobufjs's generic stringVerify builds short strings char by char and runs a fatal
// TextDecoder on long ones. This reader is equally strict but faster:
//   - every string is sliced with the native `utf8Slice` (which turns invalid sequences
//     into U+FFFD); only if the result contains U+FFFD are the bytes checked with the
//     native `isUtf8`, so genuine U+FFFD characters still pass and invalid UTF-8 throws;
//   - short ASCII strings (attribute keys, model names, enum-like values repeat in every
//     span) go through a small intern cache keyed by a cheap signature (length and three
//     sampled bytes) and verified byte by byte, so repeated keys cost no allocation and
//     are already internalized when they become property names.
const INTERN_MAX_LEN = 48;
const INTERN_MAX_ENTRIES = 8192;
const intern = new Map<number, string>();

const BufferReaderBase = protobuf.BufferReader as unknown as new (buf: Buffer) => object;
class OtlpReader extends BufferReaderBase {
  stringVerify(): string {
    const self = this as unknown as { buf: Buffer; pos: number; len: number; uint32(): number };
    const len = self.uint32();
    const start = self.pos;
    const end = start + len;
    if (len < 0 || end > self.len) throw new RangeError('index out of range');
    self.pos = end;
    const buf = self.buf;
    if (len === 0) return '';
    let sig = -1;
    if (len <= INTERN_MAX_LEN) {
      sig =
        len |
        (buf[start]! << 6) |
        (buf[end - 1]! << 13) |
        ((buf[start + (len >> 1)]! ^ buf[start + (len >> 2)]!) << 20);
      const hit = intern.get(sig);
      if (hit !== undefined && hit.length === len) {
        let i = 0;
        while (i < len && hit.charCodeAt(i) === buf[start + i]) i++;
        if (i === len) return hit;
      }
    }
    const str = buf.utf8Slice(start, end);
    if (str.indexOf('\uFFFD') !== -1 && !isUtf8(buf.subarray(start, end))) {
      throw new TypeError('The encoded data was not valid for encoding utf-8');
    }
    if (sig !== -1 && str.length === len) {
      // one UTF-16 unit per byte: pure ASCII
      if (intern.size >= INTERN_MAX_ENTRIES) intern.clear();
      intern.set(sig, str);
    }
    return str;
  }

  /** fixed64 (timestamps) → exact decimal string, with no long.js allocation. */
  fixed64(): string {
    const self = this as unknown as { buf: Buffer; pos: number; len: number };
    const p = self.pos;
    if (p + 8 > self.len) throw new RangeError('index out of range');
    const b = self.buf;
    const lo = (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;
    const hi = (b[p + 4]! | (b[p + 5]! << 8) | (b[p + 6]! << 16) | (b[p + 7]! << 24)) >>> 0;
    self.pos = p + 8;
    return u64ToDecimal(lo, hi);
  }

  /** int64 (AnyValue.intValue) → number when |v| ≤ 2^53 − 1, else the exact decimal string. */
  int64(): number | string {
    const self = this as unknown as { buf: Buffer; pos: number; len: number };
    const b = self.buf;
    const len = self.len;
    let pos = self.pos;
    let lo = 0;
    let hi = 0;
    let c = 0;
    let done = false;
    for (let i = 0; i < 4; i++) {
      if (pos >= len) throw new RangeError('index out of range');
      c = b[pos++]!;
      lo |= (c & 127) << (i * 7);
      if (c < 128) {
        done = true;
        break;
      }
    }
    if (!done) {
      if (pos >= len) throw new RangeError('index out of range');
      c = b[pos++]!;
      lo |= (c & 127) << 28;
      hi = (c & 127) >> 4;
      if (c >= 128) {
        for (let i = 0; i < 5; i++) {
          if (pos >= len) throw new RangeError('index out of range');
          c = b[pos++]!;
          hi |= (c & 127) << (i * 7 + 3);
          if (c < 128) {
            done = true;
            break;
          }
        }
        if (!done) throw new Error('invalid varint encoding');
      }
    }
    self.pos = pos;
    hi |= 0;
    if (hi >= -0x200000 && hi < 0x200000) return hi * 4294967296 + (lo >>> 0);
    return BigInt.asIntN(64, (BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0)).toString();
  }
}
declare module 'node:buffer' {
  interface Buffer {
    latin1Slice(start: number, end: number): string;
    utf8Slice(start: number, end: number): string;
    hexSlice(start: number, end: number): string;
  }
}

/** What differs between the traces and the logs request: the wrapper field names and the leaf message. */
interface PbSignal {
  name: 'traces' | 'logs';
  type: protobuf.Type;
  resource: 'resourceSpans' | 'resourceLogs';
  scope: 'scopeSpans' | 'scopeLogs';
  items: 'spans' | 'logRecords';
  noun: string;
  leaf(item: never, ctx: Ctx): NormalizedSpan;
  hint(item: never): string;
}
const TRACES: PbSignal = {
  name: 'traces',
  type: ExportTraceServiceRequest,
  resource: 'resourceSpans',
  scope: 'scopeSpans',
  items: 'spans',
  noun: 'span',
  leaf: (sp: PbSpan, ctx: Ctx) => pbSpan(sp, ctx),
  hint: (sp: PbSpan) => idHint(sp.spanId),
};
const LOGS: PbSignal = {
  name: 'logs',
  type: ExportLogsServiceRequest,
  resource: 'resourceLogs',
  scope: 'scopeLogs',
  items: 'logRecords',
  noun: 'log record',
  leaf: (lr: PbLogRecord, ctx: Ctx) => pbLogRecord(lr, ctx),
  hint: (lr: PbLogRecord) => idHint(lr.spanId),
};

export function decodeProtobuf(buf: Buffer, limits: OtlpLimits): NormalizedRequest {
  return decodeSignal(buf, limits, TRACES);
}

/** ExportLogsServiceRequest → the same normalized form, one event span per log record (see logs.ts). */
export function decodeLogsProtobuf(buf: Buffer, limits: OtlpLimits): NormalizedRequest {
  return decodeSignal(buf, limits, LOGS);
}

type PbEnvelope = {
  resource?: { attributes: PbKeyValue[]; droppedAttributesCount: number } | null;
  schemaUrl: string;
} & Record<string, unknown>;
type PbScopeEnvelope = { scope?: PbScope | null; schemaUrl: string } & Record<string, unknown>;

function decodeSignal(buf: Buffer, limits: OtlpLimits, sig: PbSignal): NormalizedRequest {
  prescanProtobuf(buf, limits, sig.name);
  let msg: Record<string, PbEnvelope[]>;
  try {
    msg = sig.type.decode(new OtlpReader(buf) as unknown as protobuf.Reader) as unknown as Record<string, PbEnvelope[]>;
  } catch (err) {
    const m = err instanceof Error ? err.message : String(err);
    if (/utf-?8/i.test(m)) throw new OtlpDecodeError('invalid UTF-8 in a protobuf string field');
    if (/max depth|call stack/i.test(m)) throw new OtlpDecodeError('protobuf message nesting is too deep');
    throw new OtlpDecodeError(`undecodable protobuf body: ${m}`);
  }
  const rsList = msg[sig.resource]!;
  const scopesOf = (rs: PbEnvelope) => rs[sig.scope] as PbScopeEnvelope[];
  const itemsOf = (ss: PbScopeEnvelope) => ss[sig.items] as never[];
  let total = 0;
  for (const rs of rsList) for (const ss of scopesOf(rs)) total += itemsOf(ss).length;
  const tally = new SpanTally(total, limits, sig.noun);
  const ctx = new Ctx(limits);
  const out: NormalizedResourceSpans[] = new Array(rsList.length);
  for (let r = 0; r < rsList.length; r++) {
    const rs = rsList[r]!;
    try {
      const res = rs.resource;
      let resAttrs = {} as Attributes;
      if (res) {
        try {
          resAttrs = pbAttrList(res.attributes, ctx);
        } catch (err) {
          throw located(err, 'resource');
        }
      }
      const scopes = scopesOf(rs);
      const nss: NormalizedScopeSpans[] = new Array(scopes.length);
      for (let s = 0; s < scopes.length; s++) {
        const ss = scopes[s]!;
        try {
          const sc = ss.scope;
          let scope: NormalizedScope = {
            name: '',
            version: '',
            attributes: {} as Attributes,
            droppedAttributesCount: 0,
          };
          if (sc) {
            try {
              scope = {
                name: limitPlain(sc.name, limits, 'otel.scope.name', ctx),
                version: limitPlain(sc.version, limits, 'otel.scope.version', ctx),
                attributes: pbAttrList(sc.attributes, ctx),
                droppedAttributesCount: (sc.droppedAttributesCount >>> 0) + over(sc.attributes, limits.maxAttributes),
              };
            } catch (err) {
              throw located(err, 'scope');
            }
          }
          const items = itemsOf(ss);
          const spans: NormalizedSpan[] = [];
          for (let k = 0; k < items.length; k++) {
            const item = items[k]!;
            try {
              spans.push(sig.leaf(item, ctx));
              tally.keep();
            } catch (err) {
              if (!(err instanceof SpanReject)) throw located(err, `${sig.items}[${k}]`);
              tally.reject(ctx, sig.hint(item), err.reason);
            }
          }
          nss[s] = { scope, schemaUrl: ss.schemaUrl, spans };
        } catch (err) {
          throw located(err, `${sig.scope}[${s}]`);
        }
      }
      out[r] = {
        resource: {
          attributes: resAttrs,
          droppedAttributesCount: res
            ? (res.droppedAttributesCount >>> 0) + over(res.attributes, limits.maxAttributes)
            : 0,
        },
        schemaUrl: rs.schemaUrl,
        scopeSpans: nss,
      };
    } catch (err) {
      throw located(err, `${sig.resource}[${r}]`);
    }
  }
  return { resourceSpans: out, spanCount: tally.kept, rejectedSpans: tally.rejected, errorMessage: tally.errorMessage };
}

function pbLogRecord(lr: PbLogRecord, ctx: Ctx): NormalizedSpan {
  const limits = ctx.limits;
  const traceId = pbId(lr.traceId, 16, 'traceId', true);
  const spanId = pbId(lr.spanId, 8, 'spanId', true);
  const attributes = pbAttrs(cap(lr.attributes, limits.maxAttributes), ctx);
  let body: AttrValue | undefined;
  if (lr.body) {
    try {
      body = pbValue(lr.body, 0, ctx, LOG_BODY);
    } catch (err) {
      throw located(err, 'body');
    }
  }
  return logSpan(
    {
      traceId,
      spanId,
      timeNs: pbTime(lr.timeUnixNano),
      observedTimeNs: pbTime(lr.observedTimeUnixNano),
      severityNumber: lr.severityNumber | 0,
      severityText: limitPlain(lr.severityText, limits, 'otel.log.severity_text', ctx),
      eventName: limitPlain(lr.eventName, limits, 'otel.event.name', ctx),
      flags: lr.flags >>> 0,
      body,
      attributes,
      droppedAttributesCount: (lr.droppedAttributesCount >>> 0) + over(lr.attributes, limits.maxAttributes),
    },
    ctx,
  );
}

function pbId(b: Uint8Array | undefined, size: 8 | 16, what: string, optional: boolean): string {
  if (!b || b.length === 0) {
    if (optional) return '';
    throw new SpanReject(`missing ${what}`);
  }
  if (b.length !== size) throw new SpanReject(`invalid ${what} (${b.length} bytes, expected ${size})`);
  const hex = toHex(b);
  if (hex === (size === 16 ? ZERO_TRACE : ZERO_SPAN)) {
    if (optional) return '';
    throw new SpanReject(`invalid ${what} (all zero)`);
  }
  return hex;
}

function pbTime(v: PbLong | number | string | undefined): string {
  if (v === undefined || v === null) return '0';
  if (typeof v === 'string') return v; // OtlpReader.fixed64
  if (typeof v === 'number') return v >= 0 && Number.isInteger(v) ? BigInt(v).toString() : '0';
  return u64ToDecimal(v.low, v.high);
}

function pbSpan(sp: PbSpan, ctx: Ctx): NormalizedSpan {
  const limits = ctx.limits;
  const traceId = pbId(sp.traceId, 16, 'traceId', false);
  const spanId = pbId(sp.spanId, 8, 'spanId', false);
  const parentSpanId = pbId(sp.parentSpanId, 8, 'parentSpanId', true);
  const startTimeNs = pbTime(sp.startTimeUnixNano);
  const endTimeNs = pbTime(sp.endTimeUnixNano);
  checkSpanTimes(startTimeNs, endTimeNs);
  const max = limits.maxAttributes;
  const spEvents = cap(sp.events, limits.maxEvents);
  const spLinks = cap(sp.links, limits.maxEvents);

  const events: NormalizedEvent[] = new Array(spEvents.length);
  for (let i = 0; i < spEvents.length; i++) {
    const e = spEvents[i]!;
    let attributes: Attributes;
    try {
      attributes = pbAttrs(cap(e.attributes, max), ctx);
    } catch (err) {
      throw located(err, `events[${i}]`);
    }
    const name = limitPlain(e.name, limits, 'otel.event.name', ctx);
    events[i] = {
      name,
      timeNs: pbTime(e.timeUnixNano),
      attributes: finishAttrs(attributes, ctx),
      droppedAttributesCount: (e.droppedAttributesCount >>> 0) + over(e.attributes, max),
    };
  }
  const links: NormalizedLink[] = [];
  for (let i = 0; i < spLinks.length; i++) {
    const l = spLinks[i]!;
    const lt = pbIdLoose(l.traceId, 16);
    const ls = pbIdLoose(l.spanId, 8);
    let attributes: Attributes;
    try {
      attributes = pbAttrs(cap(l.attributes, max), ctx);
    } catch (err) {
      throw located(err, `links[${i}]`);
    }
    const traceState = limitPlain(l.traceState, limits, 'otel.trace_state', ctx);
    const attrs = finishAttrs(attributes, ctx);
    if (lt === '' || ls === '') continue; // a link without valid ids points nowhere: dropped
    links.push({
      traceId: lt,
      spanId: ls,
      traceState,
      flags: l.flags >>> 0,
      attributes: attrs,
      droppedAttributesCount: (l.droppedAttributesCount >>> 0) + over(l.attributes, max),
    });
  }
  const attributes = pbAttrs(cap(sp.attributes, max), ctx);
  const name = limitPlain(sp.name, limits, 'otel.span.name', ctx);
  const traceState = limitPlain(sp.traceState, limits, 'otel.trace_state', ctx);
  const st = sp.status;
  const statusMessage = st ? limitPlain(st.message, limits, 'otel.status_message', ctx) : '';
  const code = st ? st.code : 0;
  return {
    traceId,
    spanId,
    parentSpanId,
    traceState,
    flags: sp.flags >>> 0,
    name,
    kind: sp.kind | 0,
    startTimeNs,
    endTimeNs,
    attributes: finishAttrs(attributes, ctx),
    droppedAttributesCount: (sp.droppedAttributesCount >>> 0) + over(sp.attributes, max),
    events,
    droppedEventsCount: (sp.droppedEventsCount >>> 0) + over(sp.events, limits.maxEvents),
    links,
    droppedLinksCount: (sp.droppedLinksCount >>> 0) + over(sp.links, limits.maxEvents),
    statusCode: code === 1 || code === 2 ? code : 0,
    statusMessage,
  };
}

function pbIdLoose(b: Uint8Array | undefined, size: 8 | 16): string {
  if (!b || b.length !== size) return '';
  const hex = toHex(b);
  return hex === (size === 16 ? ZERO_TRACE : ZERO_SPAN) ? '' : hex;
}

/** Resource / scope attributes (the first maxAttributes; the caller adds the rest to the dropped count). */
function pbAttrList(kvs: PbKeyValue[], ctx: Ctx): Attributes {
  return finishAttrs(pbAttrs(cap(kvs, ctx.limits.maxAttributes), ctx), ctx);
}

function pbAttrs(kvs: PbKeyValue[], ctx: Ctx): Attributes {
  const out: Attributes = {}; // plain object: safe, see "Prototype safety" above
  let i = 0;
  try {
    for (; i < kvs.length; i++) {
      const kv = kvs[i]!;
      const key = attrKey(kv.key, ctx);
      out[key] = pbValue(kv.value, 0, ctx, key);
    }
  } catch (err) {
    throw located(err, attrSegment(kvs[i]?.key, i));
  }
  return out;
}

function pbValue(v: PbAnyValue | null | undefined, depth: number, ctx: Ctx, topKey: string): AttrValue {
  if (!v) return null;
  if (has.call(v, 'stringValue')) return limitStr(v.stringValue!, ctx, topKey);
  if (has.call(v, 'intValue')) {
    const n = v.intValue!; // number or exact decimal string (OtlpReader.int64)
    if (typeof n === 'number' || typeof n === 'string') return n;
    const hi = n.high | 0; // a long.js Long, should another reader ever be used
    if (hi >= -0x200000 && hi < 0x200000) return hi * 4294967296 + (n.low >>> 0);
    return n.toString();
  }
  if (has.call(v, 'boolValue')) return v.boolValue!;
  if (has.call(v, 'doubleValue')) return finiteOrString(v.doubleValue!);
  if (has.call(v, 'arrayValue')) {
    if (depth + 1 > ctx.limits.maxDepth) throw tooDeep(ctx.limits);
    const vals = v.arrayValue?.values ?? [];
    const arr: AttrValue[] = new Array(vals.length);
    for (let i = 0; i < vals.length; i++) arr[i] = pbValue(vals[i], depth + 1, ctx, topKey);
    return arr;
  }
  if (has.call(v, 'kvlistValue')) {
    if (depth + 1 > ctx.limits.maxDepth) throw tooDeep(ctx.limits);
    const vals = v.kvlistValue?.values ?? [];
    const obj: { [k: string]: AttrValue } = {};
    for (let i = 0; i < vals.length; i++) {
      const kv = vals[i]!;
      obj[nestedKey(kv.key, ctx, topKey)] = pbValue(kv.value, depth + 1, ctx, topKey);
    }
    return obj;
  }
  if (has.call(v, 'bytesValue')) return toBase64(v.bytesValue!);
  return null;
}

function toBase64(b: Uint8Array): string {
  return (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength)).toString('base64');
}
