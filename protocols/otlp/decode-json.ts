// OTLP/JSON → NormalizedRequest, following the OTLP JSON rules (lowerCamelCase keys, hex or base64 ids,
// 64-bit integers as strings or numbers, integer or named enums, unknown fields ignored).
import { isUtf8 } from 'node:buffer';
import type { Attributes, AttrValue } from '../../core/record.ts';
import { jsonPrescan, jsonSyntaxError } from '../../platform/json-prescan.ts';
import { LOG_BODY, logSpan, SEVERITY_NAMES } from './logs.ts';
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
  maxNodesOf,
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
  tooDeep,
  ZERO_SPAN,
  ZERO_TRACE,
} from './normalized.ts';

type J = Record<string, unknown>;

const isObj = (v: unknown): v is J => typeof v === 'object' && v !== null && !Array.isArray(v);

function jArr(v: unknown, what: string, perSpan: boolean): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) {
    if (perSpan) throw new SpanReject(`${what} is not an array`);
    throw new OtlpDecodeError(`${what} is not an array`);
  }
  return v;
}

function jStr(v: unknown, what: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw new SpanReject(`${what} is not a string`);
  return v;
}

function jUint(v: unknown): number {
  if (typeof v === 'number') return v >= 0 && Number.isFinite(v) ? Math.floor(v) >>> 0 : 0;
  if (typeof v === 'string' && v !== '') {
    const n = Number(v);
    return n >= 0 && Number.isFinite(n) ? Math.floor(n) >>> 0 : 0;
  }
  return 0;
}

function hostileObject(o: J): void {
  if (has.call(o, '__proto__')) throw new OtlpDecodeError('JSON key "__proto__" is not allowed');
}

const SPAN_KIND_NAMES: Record<string, number> = {
  SPAN_KIND_UNSPECIFIED: 0,
  SPAN_KIND_INTERNAL: 1,
  SPAN_KIND_SERVER: 2,
  SPAN_KIND_CLIENT: 3,
  SPAN_KIND_PRODUCER: 4,
  SPAN_KIND_CONSUMER: 5,
};
const STATUS_CODE_NAMES: Record<string, number> = { STATUS_CODE_UNSET: 0, STATUS_CODE_OK: 1, STATUS_CODE_ERROR: 2 };

function jEnum(v: unknown, names: Record<string, number>): number {
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string') {
    if (has.call(names, v)) return names[v]!;
    const n = Number(v);
    if (Number.isInteger(n)) return n;
  }
  return 0;
}

function isDigits(s: string, from: number): boolean {
  if (s.length <= from) return false;
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

function jTime(v: unknown, what: string): string {
  if (v === undefined || v === null) return '0';
  if (typeof v === 'string') {
    if (!isDigits(v, 0)) throw new SpanReject(`${what} is not a decimal integer`);
    if (v.length > 1 && v.charCodeAt(0) === 48) return BigInt(v).toString();
    if (v.length > 20 || (v.length === 20 && v > '18446744073709551615'))
      throw new SpanReject(`${what} is out of range`);
    return v;
  }
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return BigInt(v).toString();
  throw new SpanReject(`${what} is not a decimal integer`);
}

function isHex(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i) | 0x20; // lower-case letters; digits unchanged
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

function isBase64(s: string): boolean {
  let i = 0;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ok =
      (c >= 65 && c <= 90) ||
      (c >= 97 && c <= 122) ||
      (c >= 48 && c <= 57) ||
      c === 43 ||
      c === 47 ||
      c === 45 ||
      c === 95;
    if (!ok) break;
  }
  for (; i < s.length; i++) if (s.charCodeAt(i) !== 61) return false; // '=' padding only at the end
  return true;
}

/** Hex (case-insensitive) or base64 (standard or URL-safe, padding optional) id → lowercase hex; '' when absent; null when invalid. */
function jId(v: unknown, size: 8 | 16): string | null {
  if (v === undefined || v === null || v === '') return '';
  if (typeof v !== 'string') return null;
  if (v.length === size * 2 && isHex(v)) return v.toLowerCase();
  const b64len = Math.ceil(size / 3) * 4; // 24 for 16 bytes, 12 for 8
  const unpadded = Math.ceil((size * 4) / 3); // 22 / 11
  if ((v.length === b64len || v.length === unpadded) && isBase64(v)) {
    const b = Buffer.from(v, v.includes('-') || v.includes('_') ? 'base64url' : 'base64');
    if (b.length === size) return b.toString('hex');
  }
  return null;
}

function jSpanId(v: unknown, size: 8 | 16, what: string, optional: boolean): string {
  const id = jId(v, size);
  if (id === null) throw new SpanReject(`invalid ${what}`);
  if (id === '' || id === (size === 16 ? ZERO_TRACE : ZERO_SPAN)) {
    if (optional) return '';
    throw new SpanReject(id === '' ? `missing ${what}` : `invalid ${what} (all zero)`);
  }
  return id;
}

/** A JSON number of 16+ digits somewhere (maybe inside a string: then the slower parse below is merely unneeded). */
const UNSAFE_INT = /[:[,]\s*-?\d{16}/;
const INT64_KEYS = new Set([
  'intValue',
  'startTimeUnixNano',
  'endTimeUnixNano',
  'timeUnixNano',
  'observedTimeUnixNano',
]);

/**
 * OTLP/JSON allows 64-bit integers as numbers, but JSON.parse rounds those beyond 2^53: for the 64-bit fields,
 * keep the number's own digits (as the string form the decoder also takes) so nothing is silently changed.
 */
function exactInt64(key: string, value: unknown, ctx?: { source?: string }): unknown {
  if (typeof value !== 'number' || Number.isSafeInteger(value) || !INT64_KEYS.has(key)) return value;
  const src = ctx?.source;
  return src !== undefined && /^-?\d+$/.test(src) ? src : value;
}

/** What differs between the traces and the logs request: the wrapper keys and the leaf message. */
interface JSignal {
  resource: string;
  scope: string;
  items: string;
  noun: string;
  leaf(o: J, ctx: Ctx): NormalizedSpan;
}
const TRACES: JSignal = {
  resource: 'resourceSpans',
  scope: 'scopeSpans',
  items: 'spans',
  noun: 'span',
  leaf: (o, ctx) => jSpan(o, ctx),
};
const LOGS: JSignal = {
  resource: 'resourceLogs',
  scope: 'scopeLogs',
  items: 'logRecords',
  noun: 'log record',
  leaf: (o, ctx) => jLogRecord(o, ctx),
};

export function decodeJson(buf: Buffer, limits: OtlpLimits): NormalizedRequest {
  return decodeSignal(buf, limits, TRACES);
}

/** ExportLogsServiceRequest (OTLP/JSON) → the same normalized form, one event span per log record (see logs.ts). */
export function decodeLogsJson(buf: Buffer, limits: OtlpLimits): NormalizedRequest {
  return decodeSignal(buf, limits, LOGS);
}

function decodeSignal(buf: Buffer, limits: OtlpLimits, sig: JSignal): NormalizedRequest {
  if (!isUtf8(buf)) throw new OtlpDecodeError('request body is not valid UTF-8');
  // Structural depth of a span attribute value is 12 for a scalar; each container adds ≤ 4.
  const maxObjects = 2 * maxNodesOf(limits);
  const pre = jsonPrescan(buf, 16 + 4 * limits.maxDepth, maxObjects);
  if (pre === 'deep') throw tooDeep(limits);
  if (pre === 'wide') throw new OtlpDecodeError(`request has more than ${maxObjects} JSON objects; split the batch`);
  let root: unknown;
  const bom = buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0;
  try {
    const text = buf.toString('utf8', bom);
    root = text === '' ? {} : UNSAFE_INT.test(text) ? JSON.parse(text, exactInt64) : JSON.parse(text);
  } catch (err) {
    throw new OtlpDecodeError(`undecodable JSON body: ${jsonSyntaxError(err)}`);
  }
  if (!isObj(root)) throw new OtlpDecodeError('request body is not a JSON object');
  hostileObject(root);
  const rsList = jArr(root[sig.resource], sig.resource, false);
  let total = 0;
  for (const rs of rsList) {
    if (!isObj(rs)) throw new OtlpDecodeError(`${sig.resource}[] entry is not an object`);
    for (const ss of jArr(rs[sig.scope], sig.scope, false)) {
      if (!isObj(ss)) throw new OtlpDecodeError(`${sig.scope}[] entry is not an object`);
      total += jArr(ss[sig.items], sig.items, false).length;
    }
  }
  const tally = new SpanTally(total, limits, sig.noun);
  const ctx = new Ctx(limits);
  const out: NormalizedResourceSpans[] = [];
  for (let r = 0; r < rsList.length; r++) {
    const rs = rsList[r] as J;
    try {
      hostileObject(rs);
      const res = isObj(rs.resource) ? rs.resource : null;
      let resAttrs = {} as Attributes;
      if (res) {
        try {
          hostileObject(res);
          resAttrs = jAttrList(res.attributes, ctx, 'resource');
        } catch (err) {
          throw located(err, 'resource');
        }
      }
      const nss: NormalizedScopeSpans[] = [];
      const ssList = jArr(rs[sig.scope], sig.scope, false);
      for (let s = 0; s < ssList.length; s++) {
        const ss = ssList[s] as J;
        try {
          hostileObject(ss);
          const sc = isObj(ss.scope) ? ss.scope : null;
          let scope: NormalizedScope;
          if (sc) {
            try {
              hostileObject(sc);
              scope = {
                name: limitPlain(typeof sc.name === 'string' ? sc.name : '', limits, 'otel.scope.name', ctx),
                version: limitPlain(
                  typeof sc.version === 'string' ? sc.version : '',
                  limits,
                  'otel.scope.version',
                  ctx,
                ),
                attributes: jAttrList(sc.attributes, ctx, 'scope'),
                droppedAttributesCount:
                  jUint(sc.droppedAttributesCount) +
                  over(jArr(sc.attributes, 'scope attributes', false), limits.maxAttributes),
              };
            } catch (err) {
              throw located(err, 'scope');
            }
          } else {
            scope = { name: '', version: '', attributes: {} as Attributes, droppedAttributesCount: 0 };
          }
          const spans: NormalizedSpan[] = [];
          const spList = jArr(ss[sig.items], sig.items, false);
          for (let k = 0; k < spList.length; k++) {
            const sp = spList[k];
            try {
              if (!isObj(sp)) throw new SpanReject(`${sig.noun} is not an object`);
              spans.push(sig.leaf(sp, ctx));
              tally.keep();
            } catch (err) {
              if (!(err instanceof SpanReject)) throw located(err, `${sig.items}[${k}]`);
              tally.reject(ctx, isObj(sp) ? idHint(sp.spanId) : '', err.reason);
            }
          }
          nss.push({ scope, schemaUrl: typeof ss.schemaUrl === 'string' ? ss.schemaUrl : '', spans });
        } catch (err) {
          throw located(err, `${sig.scope}[${s}]`);
        }
      }
      out.push({
        resource: {
          attributes: resAttrs,
          droppedAttributesCount: res
            ? jUint(res.droppedAttributesCount) +
              over(jArr(res.attributes, 'resource attributes', false), limits.maxAttributes)
            : 0,
        },
        schemaUrl: typeof rs.schemaUrl === 'string' ? rs.schemaUrl : '',
        scopeSpans: nss,
      });
    } catch (err) {
      throw located(err, `${sig.resource}[${r}]`);
    }
  }
  return { resourceSpans: out, spanCount: tally.kept, rejectedSpans: tally.rejected, errorMessage: tally.errorMessage };
}

/** An event's or link's attributes (the first `max`), its own keys checked; a failure names `segment`. */
function jItemAttrs(
  item: J,
  what: string,
  segment: string,
  max: number,
  ctx: Ctx,
): { raw: unknown[]; attributes: Attributes } {
  try {
    hostileObject(item);
    const raw = jArr(item.attributes, `${what} attributes`, true);
    return { raw, attributes: jAttrs(cap(raw, max), ctx) };
  } catch (err) {
    throw located(err, segment);
  }
}

function jSpan(sp: J, ctx: Ctx): NormalizedSpan {
  const limits = ctx.limits;
  hostileObject(sp);
  const traceId = jSpanId(sp.traceId, 16, 'traceId', false);
  const spanId = jSpanId(sp.spanId, 8, 'spanId', false);
  const parentSpanId = jSpanId(sp.parentSpanId, 8, 'parentSpanId', true);
  const startTimeNs = jTime(sp.startTimeUnixNano, 'startTimeUnixNano');
  const endTimeNs = jTime(sp.endTimeUnixNano, 'endTimeUnixNano');
  checkSpanTimes(startTimeNs, endTimeNs);
  const rawAttrs = jArr(sp.attributes, 'attributes', true);
  const rawEvents = jArr(sp.events, 'events', true);
  const rawLinks = jArr(sp.links, 'links', true);
  const max = limits.maxAttributes;
  const jEvents = cap(rawEvents, limits.maxEvents);

  const events: NormalizedEvent[] = new Array(jEvents.length);
  for (let i = 0; i < jEvents.length; i++) {
    const e = jEvents[i];
    if (!isObj(e)) throw new SpanReject('event is not an object');
    const { raw: ea, attributes } = jItemAttrs(e, 'event', `events[${i}]`, max, ctx);
    const name = limitPlain(jStr(e.name, 'event name'), limits, 'otel.event.name', ctx);
    events[i] = {
      name,
      timeNs: jTime(e.timeUnixNano, 'event timeUnixNano'),
      attributes: finishAttrs(attributes, ctx),
      droppedAttributesCount: jUint(e.droppedAttributesCount) + over(ea, max),
    };
  }
  const links: NormalizedLink[] = [];
  const jLinks = cap(rawLinks, limits.maxEvents);
  for (let i = 0; i < jLinks.length; i++) {
    const l = jLinks[i];
    if (!isObj(l)) throw new SpanReject('link is not an object');
    const { raw: la, attributes } = jItemAttrs(l, 'link', `links[${i}]`, max, ctx);
    const traceState = limitPlain(jStr(l.traceState, 'link traceState'), limits, 'otel.trace_state', ctx);
    const attrs = finishAttrs(attributes, ctx);
    const lt = jId(l.traceId, 16);
    const ls = jId(l.spanId, 8);
    if (!lt || !ls || lt === ZERO_TRACE || ls === ZERO_SPAN) continue; // link without valid ids: dropped
    links.push({
      traceId: lt,
      spanId: ls,
      traceState,
      flags: jUint(l.flags),
      attributes: attrs,
      droppedAttributesCount: jUint(l.droppedAttributesCount) + over(la, max),
    });
  }
  const attributes = jAttrs(cap(rawAttrs, max), ctx);
  const name = limitPlain(jStr(sp.name, 'name'), limits, 'otel.span.name', ctx);
  const traceState = limitPlain(jStr(sp.traceState, 'traceState'), limits, 'otel.trace_state', ctx);
  let statusCode = 0;
  let statusMessage = '';
  if (isObj(sp.status)) {
    try {
      hostileObject(sp.status);
    } catch (err) {
      throw located(err, 'status');
    }
    statusCode = jEnum(sp.status.code, STATUS_CODE_NAMES);
    if (statusCode !== 1 && statusCode !== 2) statusCode = 0;
    statusMessage = limitPlain(jStr(sp.status.message, 'status message'), limits, 'otel.status_message', ctx);
  }
  return {
    traceId,
    spanId,
    parentSpanId,
    traceState,
    flags: jUint(sp.flags),
    name,
    kind: jEnum(sp.kind, SPAN_KIND_NAMES),
    startTimeNs,
    endTimeNs,
    attributes: finishAttrs(attributes, ctx),
    droppedAttributesCount: jUint(sp.droppedAttributesCount) + over(rawAttrs, max),
    events,
    droppedEventsCount: jUint(sp.droppedEventsCount) + over(rawEvents, limits.maxEvents),
    links,
    droppedLinksCount: jUint(sp.droppedLinksCount) + over(rawLinks, limits.maxEvents),
    statusCode,
    statusMessage,
  };
}

function jLogRecord(lr: J, ctx: Ctx): NormalizedSpan {
  const limits = ctx.limits;
  hostileObject(lr);
  const traceId = jSpanId(lr.traceId, 16, 'traceId', true);
  const spanId = jSpanId(lr.spanId, 8, 'spanId', true);
  const rawAttrs = jArr(lr.attributes, 'attributes', true);
  const attributes = jAttrs(cap(rawAttrs, limits.maxAttributes), ctx);
  let body: AttrValue | undefined;
  if (lr.body !== undefined && lr.body !== null) {
    try {
      body = jValue(lr.body, 0, ctx, LOG_BODY);
    } catch (err) {
      throw located(err, 'body');
    }
  }
  return logSpan(
    {
      traceId,
      spanId,
      timeNs: jTime(lr.timeUnixNano, 'timeUnixNano'),
      observedTimeNs: jTime(lr.observedTimeUnixNano, 'observedTimeUnixNano'),
      severityNumber: jEnum(lr.severityNumber, SEVERITY_NAMES),
      severityText: limitPlain(jStr(lr.severityText, 'severityText'), limits, 'otel.log.severity_text', ctx),
      eventName: limitPlain(jStr(lr.eventName, 'eventName'), limits, 'otel.event.name', ctx),
      flags: jUint(lr.flags),
      body,
      attributes,
      droppedAttributesCount: jUint(lr.droppedAttributesCount) + over(rawAttrs, limits.maxAttributes),
    },
    ctx,
  );
}

function jAttrList(v: unknown, ctx: Ctx, where: string): Attributes {
  const kvs = jArr(v, `${where} attributes`, false);
  try {
    return finishAttrs(jAttrs(cap(kvs, ctx.limits.maxAttributes), ctx), ctx);
  } catch (err) {
    if (err instanceof SpanReject) {
      // no span to reject: the request fails
      const e = new OtlpDecodeError(`${where}: ${err.reason}`);
      e.field = err.field;
      throw e;
    }
    throw err;
  }
}

function jAttrs(kvs: unknown[], ctx: Ctx): Attributes {
  const out: Attributes = {}; // plain object: safe, see "Prototype safety" above
  let i = 0;
  try {
    for (; i < kvs.length; i++) {
      const kv = kvs[i];
      if (!isObj(kv)) throw new SpanReject('attribute is not an object');
      hostileObject(kv);
      if (typeof kv.key !== 'string') throw new SpanReject('attribute key is not a string');
      const key = attrKey(kv.key, ctx);
      out[key] = jValue(kv.value, 0, ctx, key);
    }
  } catch (err) {
    const kv = kvs[i];
    throw located(err, attrSegment(isObj(kv) ? kv.key : undefined, i));
  }
  return out;
}

function jInt(v: unknown, key: string): number | string {
  if (typeof v === 'number') {
    if (Number.isSafeInteger(v)) return v;
    if (Number.isInteger(v)) return BigInt(v).toString();
    throw new SpanReject(`attribute "${key}": intValue is not an integer`);
  }
  if (typeof v === 'string') {
    const neg = v.charCodeAt(0) === 45;
    if (!isDigits(v, neg ? 1 : 0)) throw new SpanReject(`attribute "${key}": intValue is not an integer`);
    if (v.length <= 15) return Number(v);
    const b = BigInt(v);
    if (b > 9223372036854775807n || b < -9223372036854775808n)
      throw new SpanReject(`attribute "${key}": intValue is out of int64 range`);
    return b <= 9007199254740991n && b >= -9007199254740991n ? Number(b) : b.toString();
  }
  throw new SpanReject(`attribute "${key}": intValue is not an integer`);
}

function jDouble(v: unknown, key: string): number | string {
  if (typeof v === 'number') return finiteOrString(v); // 1e400 parses to Infinity
  if (typeof v === 'string') {
    if (v === 'NaN' || v === 'Infinity' || v === '-Infinity') return v;
    const n = Number(v);
    if (v.trim() !== '' && !Number.isNaN(n)) return finiteOrString(n);
  }
  throw new SpanReject(`attribute "${key}": doubleValue is not a number`);
}

function jValue(v: unknown, depth: number, ctx: Ctx, topKey: string): AttrValue {
  if (v === undefined || v === null) return null;
  if (!isObj(v)) throw new SpanReject(`attribute "${topKey}": value is not an AnyValue object`);
  hostileObject(v);
  let x: unknown;
  if ((x = v.stringValue) !== undefined) {
    if (typeof x !== 'string') throw new SpanReject(`attribute "${topKey}": stringValue is not a string`);
    return limitStr(x, ctx, topKey);
  }
  if ((x = v.intValue) !== undefined) return jInt(x, topKey);
  if ((x = v.boolValue) !== undefined) {
    if (typeof x !== 'boolean') throw new SpanReject(`attribute "${topKey}": boolValue is not a boolean`);
    return x;
  }
  if ((x = v.doubleValue) !== undefined) return jDouble(x, topKey);
  if ((x = v.arrayValue) !== undefined) {
    if (depth + 1 > ctx.limits.maxDepth) throw tooDeep(ctx.limits);
    if (!isObj(x)) throw new SpanReject(`attribute "${topKey}": arrayValue is not an object`);
    hostileObject(x);
    const vals = jArr(x.values, `attribute "${topKey}" arrayValue.values`, true);
    const arr: AttrValue[] = new Array(vals.length);
    for (let i = 0; i < vals.length; i++) arr[i] = jValue(vals[i], depth + 1, ctx, topKey);
    return arr;
  }
  if ((x = v.kvlistValue) !== undefined) {
    if (depth + 1 > ctx.limits.maxDepth) throw tooDeep(ctx.limits);
    if (!isObj(x)) throw new SpanReject(`attribute "${topKey}": kvlistValue is not an object`);
    hostileObject(x);
    const vals = jArr(x.values, `attribute "${topKey}" kvlistValue.values`, true);
    const obj: { [k: string]: AttrValue } = {};
    for (const kv of vals) {
      if (!isObj(kv)) throw new SpanReject(`attribute "${topKey}": malformed kvlistValue entry`);
      hostileObject(kv);
      if (typeof kv.key !== 'string') throw new SpanReject(`attribute "${topKey}": malformed kvlistValue entry`);
      obj[nestedKey(kv.key, ctx, topKey)] = jValue(kv.value, depth + 1, ctx, topKey);
    }
    return obj;
  }
  if ((x = v.bytesValue) !== undefined) {
    if (typeof x !== 'string' || !isBase64(x)) throw new SpanReject(`attribute "${topKey}": bytesValue is not base64`);
    return Buffer.from(x, x.includes('-') || x.includes('_') ? 'base64url' : 'base64').toString('base64');
  }
  return null;
}
