// Structural pre-scan of the protobuf wire format, run BEFORE protobufjs materializes
// anything. Allocation-free; recursion is bounded by the schema plus maxDepth (checked
// before descending). It enforces the limits whose violation would otherwise cost time
// and memory proportional to a hostile body: span count, AnyValue nesting, and the total
// number of messages protobufjs would allocate (spans, events, links, key-values,
// any-values: `maxNodesOf(limits)`, by default NODES_PER_SPAN × maxSpansPerRequest).
// A 20 MB body of empty messages (10 M objects) otherwise takes seconds to decode.
import { attrSegment, maxNodesOf, OtlpDecodeError, tooDeep, type OtlpLimits } from './normalized.ts';

const K_REQ = 0,
  K_RS = 1,
  K_RES = 2,
  K_SS = 3,
  K_SCOPE = 4,
  K_SPAN = 5,
  K_EVENT = 6,
  K_LINK = 7,
  K_KV = 8,
  K_ANY = 9,
  K_ARR = 10,
  K_KVL = 11;
// ExportLogsServiceRequest: the same wrappers (same field numbers) around LogRecords.
const K_LREQ = 12,
  K_RL = 13,
  K_SL = 14,
  K_LOG = 15;
// CHILD[kind * 16 + field] = kind of the length-delimited submessage, or -1.
const CHILD = new Int8Array(16 * 16).fill(-1);
const setChild = (kind: number, field: number, child: number) => {
  CHILD[kind * 16 + field] = child;
};
setChild(K_REQ, 1, K_RS);
setChild(K_RS, 1, K_RES);
setChild(K_RS, 2, K_SS);
setChild(K_RES, 1, K_KV);
setChild(K_SS, 1, K_SCOPE);
setChild(K_SS, 2, K_SPAN);
setChild(K_SCOPE, 3, K_KV);
setChild(K_SPAN, 9, K_KV);
setChild(K_SPAN, 11, K_EVENT);
setChild(K_SPAN, 13, K_LINK);
setChild(K_EVENT, 3, K_KV);
setChild(K_LINK, 4, K_KV);
setChild(K_KV, 2, K_ANY);
setChild(K_ANY, 5, K_ARR);
setChild(K_ANY, 6, K_KVL);
setChild(K_ARR, 1, K_ANY);
setChild(K_KVL, 1, K_KV);
setChild(K_LREQ, 1, K_RL);
setChild(K_RL, 1, K_RES);
setChild(K_RL, 2, K_SL);
setChild(K_SL, 1, K_SCOPE);
setChild(K_SL, 2, K_LOG);
setChild(K_LOG, 5, K_ANY);
setChild(K_LOG, 6, K_KV);

// Field names for error locations (BadRequest field paths), for the messages above attribute values.
const FIELD_NAMES: Array<string | undefined> = [];
const REPEATED = new Set<number>();
const nameField = (kind: number, field: number, name: string, repeated: boolean) => {
  FIELD_NAMES[kind * 16 + field] = name;
  if (repeated) REPEATED.add(kind * 16 + field);
};
nameField(K_REQ, 1, 'resourceSpans', true);
nameField(K_RS, 1, 'resource', false);
nameField(K_RS, 2, 'scopeSpans', true);
nameField(K_RES, 1, 'attributes', true);
nameField(K_SS, 1, 'scope', false);
nameField(K_SS, 2, 'spans', true);
nameField(K_SCOPE, 3, 'attributes', true);
nameField(K_SPAN, 9, 'attributes', true);
nameField(K_SPAN, 11, 'events', true);
nameField(K_SPAN, 13, 'links', true);
nameField(K_EVENT, 3, 'attributes', true);
nameField(K_LINK, 4, 'attributes', true);
nameField(K_LREQ, 1, 'resourceLogs', true);
nameField(K_RL, 1, 'resource', false);
nameField(K_RL, 2, 'scopeLogs', true);
nameField(K_SL, 1, 'scope', false);
nameField(K_SL, 2, 'logRecords', true);
nameField(K_LOG, 5, 'body', false);
nameField(K_LOG, 6, 'attributes', true);

class PreScan {
  readonly buf: Buffer;
  readonly limits: OtlpLimits;
  readonly maxNodes: number;
  pos = 0;
  spans = 0;
  nodes = 0;
  logs = false;
  constructor(buf: Buffer, limits: OtlpLimits) {
    this.buf = buf;
    this.limits = limits;
    this.maxNodes = maxNodesOf(limits);
  }

  varint(end: number): number {
    // Values we use (tags, lengths) fit in 32 bits; longer varints are skipped by skipVarint.
    const b = this.buf;
    let p = this.pos;
    if (p + 5 <= end) {
      let c = b[p++]!;
      let r = c & 127;
      if (c < 128) {
        this.pos = p;
        return r;
      }
      c = b[p++]!;
      r |= (c & 127) << 7;
      if (c < 128) {
        this.pos = p;
        return r;
      }
      c = b[p++]!;
      r |= (c & 127) << 14;
      if (c < 128) {
        this.pos = p;
        return r;
      }
      c = b[p++]!;
      r |= (c & 127) << 21;
      if (c < 128) {
        this.pos = p;
        return r;
      }
      c = b[p++]!;
      r += (c & 127) * 268435456;
      if (c < 128) {
        this.pos = p;
        return r;
      }
      throw new OtlpDecodeError('undecodable protobuf body: varint too long');
    }
    let result = 0;
    let shift = 0;
    for (let i = 0; i < 5; i++) {
      if (this.pos >= end) throw new OtlpDecodeError('undecodable protobuf body: truncated varint');
      const c = b[this.pos++]!;
      result += (c & 127) * 2 ** shift;
      if (c < 128) return result;
      shift += 7;
    }
    throw new OtlpDecodeError('undecodable protobuf body: varint too long');
  }

  skipVarint(end: number): void {
    const b = this.buf;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= end) throw new OtlpDecodeError('undecodable protobuf body: truncated varint');
      if (b[this.pos++]! < 128) return;
    }
    throw new OtlpDecodeError('undecodable protobuf body: varint too long');
  }

  /** Skip a field of wire type `wt` (groups are skipped iteratively, with a nesting cap). */
  skip(wt: number, end: number): void {
    if (wt === 0) this.skipVarint(end);
    else if (wt === 1) this.advance(8, end);
    else if (wt === 5) this.advance(4, end);
    else if (wt === 2) this.advance(this.varint(end), end);
    else if (wt === 3) {
      let groups = 1;
      while (groups > 0) {
        const t = this.varint(end);
        const w = t & 7;
        if (w === 3) {
          if (++groups > 32) throw new OtlpDecodeError('protobuf message nesting is too deep');
        } else if (w === 4) groups--;
        else this.skip(w, end);
      }
    } else throw new OtlpDecodeError(`undecodable protobuf body: invalid wire type ${wt}`);
  }

  advance(n: number, end: number): void {
    if (this.pos + n > end) throw new OtlpDecodeError('undecodable protobuf body: length out of range');
    this.pos += n;
  }

  /** Walk a message of `kind` spanning [pos, end). `depth` = AnyValue container depth. */
  walk(kind: number, end: number, depth: number): void {
    const start = this.pos;
    while (this.pos < end) {
      const tagAt = this.pos;
      const tag = this.varint(end);
      const field = tag >>> 3;
      const wt = tag & 7;
      const child = wt === 2 && field < 16 ? CHILD[kind * 16 + field]! : -1;
      if (child < 0) {
        this.skip(wt, end);
        continue;
      }
      const len = this.varint(end);
      const stop = this.pos + len;
      if (stop > end) throw new OtlpDecodeError('undecodable protobuf body: length out of range');
      let d = depth;
      if (child === K_SPAN || child === K_LOG) {
        if (++this.spans > this.limits.maxSpansPerRequest) {
          throw new OtlpDecodeError(
            `request has more than ${this.limits.maxSpansPerRequest} ${this.logs ? 'log records' : 'spans'}; the limit is ${this.limits.maxSpansPerRequest}`,
            { requestWide: true },
          );
        }
      }
      if (((child >= K_SPAN && child <= K_ANY) || child === K_LOG) && ++this.nodes > this.maxNodes) {
        const what = this.logs ? 'log records' : 'spans, events, links';
        throw new OtlpDecodeError(
          `request has more than ${this.maxNodes} ${what} and attribute values in total; split the batch`,
          { requestWide: true },
        );
      }
      if (child === K_ARR || child === K_KVL) {
        d = depth + 1;
        if (d > this.limits.maxDepth) throw tooDeep(this.limits);
      }
      try {
        this.walk(child, stop, d);
      } catch (err) {
        throw this.locate(err, kind, field, start, tagAt, stop);
      }
      this.pos = stop;
    }
  }

  /**
   * Error path only: names the child (field `field` of a `kind` message starting at `start`, its tag at
   * `tagAt`, its body ending at `stop`) in the error's location, e.g. `spans[3]`, `attributes["k"]`.
   * Inside an attribute value nothing is added: the location stops at the attribute.
   */
  locate(err: unknown, kind: number, field: number, start: number, tagAt: number, stop: number): unknown {
    if (!(err instanceof OtlpDecodeError) || err.requestWide) return err;
    const name = FIELD_NAMES[kind * 16 + field];
    if (name === undefined) return err; // inside an attribute value
    if (!REPEATED.has(kind * 16 + field)) return err.within(name);
    const index = this.countBefore(start, tagAt, field);
    if (name !== 'attributes') return err.within(`${name}[${index}]`);
    err.field = null; // the attribute is the location
    return err.within(attrSegment(this.kvKey(tagAt, stop), index));
  }

  /** How many fields number `field` precede `tagAt` in the message starting at `start`. */
  countBefore(start: number, tagAt: number, field: number): number {
    let n = 0;
    try {
      this.pos = start;
      while (this.pos < tagAt) {
        const tag = this.varint(tagAt);
        if (tag >>> 3 === field) n++;
        this.skip(tag & 7, tagAt);
      }
    } catch {
      /* best effort */
    }
    return n;
  }

  /** The key of the KeyValue field whose tag is at `tagAt` and body ends at `stop` (undefined when unreadable). */
  kvKey(tagAt: number, stop: number): string | undefined {
    try {
      this.pos = tagAt;
      this.varint(stop); // tag
      this.varint(stop); // length
      while (this.pos < stop) {
        const tag = this.varint(stop);
        if (tag === 0x0a) {
          // 1: key, length-delimited
          const len = this.varint(stop);
          return this.pos + len <= stop ? this.buf.toString('utf8', this.pos, this.pos + len) : undefined;
        }
        this.skip(tag & 7, stop);
      }
    } catch {
      /* best effort */
    }
    return undefined;
  }
}

/** Validate the protobuf body's structure against the limits before decoding it (log records count as spans). */
export function prescanProtobuf(
  buf: Buffer,
  limits: OtlpLimits,
  signal: 'traces' | 'logs' = 'traces',
): { spans: number; nodes: number } {
  const p = new PreScan(buf, limits);
  p.logs = signal === 'logs';
  p.walk(p.logs ? K_LREQ : K_REQ, buf.length, 0);
  return { spans: p.spans, nodes: p.nodes };
}
