// RFC 8785 (JCS) canonical JSON and SHA-256, the basis of every hash tamper evidence relies on.
import { hash } from 'node:crypto';
import canonicalize from 'canonicalize';

/**
 * Canonical JSON of a value as storage writes it, so stored rows hash the same: lone surrogates become
 * U+FFFD and non-finite numbers null (JSON.stringify's rule; JSON input such as 1e400 parses to Infinity).
 */
export function canonicalJson(value: unknown): string {
  // Records are plain JSON data. For them JSON.stringify writes JCS once every object's keys are in sorted order
  // (its numbers and escapes are JCS's): `ordered` checks that, rebuilding only objects whose keys are not, and
  // one native stringify does the rest (a native span record: about 25 % faster than the JavaScript walk). A lone surrogate
  // (which stringify escapes as \udxxx, where storage writes U+FFFD) shows in the output, and then, as for
  // integer-like keys (which JS always orders first), the JavaScript walk writes it; anything stranger takes the
  // library path, which defines the output.
  try {
    const fast = JSON.stringify(ordered(value, 0)) ?? 'null';
    if (!fast.includes('\\ud')) return fast;
  } catch (err) {
    if (err !== NOT_PLAIN) throw err;
  }
  try {
    return plain(value, 0) ?? 'null';
  } catch (err) {
    if (err !== NOT_PLAIN) throw err;
  }
  try {
    return canonicalize(value) ?? 'null';
  } catch (err) {
    // canonicalize refuses both; rare, so only then walk the value.
    if (!(err instanceof Error) || !/surrogate|NaN|Infinity/i.test(err.message)) throw err;
    return canonicalize(asStored(value)) ?? 'null';
  }
}

const NOT_PLAIN = Symbol('not plain JSON data');
const MAX_DEPTH = 256; // deeper values use the library's iterative walk (no stack overflow)
const OBJECT_PROTO = Object.prototype;
const ARRAY_PROTO = Array.prototype;

const INDEX_LIKE = /^(?:0|[1-9]\d*)$/;

/**
 * The value with every object's keys in JCS order, sharing every part that already is; throws NOT_PLAIN for what
 * JSON.stringify would write differently from JCS (integer-like keys, toJSON, bigint, non-plain objects, depth).
 * Lone surrogates are left to the caller's check of the output.
 */
function ordered(v: unknown, depth: number): unknown {
  if (typeof v !== 'object') {
    if (typeof v === 'bigint') throw NOT_PLAIN;
    return v; // strings, numbers (non-finite → null), booleans, undefined, functions, symbols: as JSON.stringify does
  }
  if (v === null) return null;
  if (depth >= MAX_DEPTH) throw NOT_PLAIN;
  if (Array.isArray(v)) {
    if (Object.getPrototypeOf(v) !== ARRAY_PROTO || typeof (v as { toJSON?: unknown }).toJSON === 'function')
      throw NOT_PLAIN;
    let copy: unknown[] | null = null;
    for (let i = 0; i < v.length; i++) {
      const x = v[i] as unknown;
      const y = typeof x === 'object' || typeof x === 'bigint' ? ordered(x, depth + 1) : x;
      if (y !== x && copy === null) copy = v.slice(0, i);
      if (copy !== null) copy.push(y);
    }
    return copy ?? v;
  }
  const proto = Object.getPrototypeOf(v) as unknown;
  if ((proto !== OBJECT_PROTO && proto !== null) || typeof (v as { toJSON?: unknown }).toJSON === 'function')
    throw NOT_PLAIN;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  let sorted = true;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    const c = k.charCodeAt(0);
    if (c >= 48 && c <= 57 && INDEX_LIKE.test(k)) throw NOT_PLAIN;
    if (i > 0 && keys[i - 1]! > k) sorted = false;
  }
  let values: unknown[] | null = null;
  for (let i = 0; i < keys.length; i++) {
    const x = o[keys[i]!];
    if (typeof x !== 'object' && typeof x !== 'bigint') continue;
    const y = ordered(x, depth + 1);
    if (y !== x) (values ??= keys.map((k) => o[k]))[i] = y;
  }
  if (sorted && values === null) return o;
  if (sorted) {
    // Only nested values changed: a spread copy (V8 clones the object's shape) with those values replaced is
    // far cheaper than adding the keys one by one to a new object. ("__proto__" is defined, not assigned.)
    const out: Record<string, unknown> = { ...o };
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      if (values![i] === o[k]) continue;
      if (k === '__proto__')
        Object.defineProperty(out, k, { value: values![i], enumerable: true, writable: true, configurable: true });
      else out[k] = values![i];
    }
    return out;
  }
  // Object.fromEntries (which defines "__proto__" as a plain key) builds the sorted copy as a fast object, which
  // JSON.stringify writes much faster than a dictionary-mode one.
  const entries = keys.map((k, i): [string, unknown] => [k, values ? values[i] : o[k]]);
  entries.sort((a, b) => (a[0] < b[0] ? -1 : 1));
  return Object.fromEntries(entries);
}

/** JCS for plain data (strings, finite or non-finite numbers, booleans, null, arrays, plain objects); throws NOT_PLAIN otherwise. */
function plain(v: unknown, depth: number): string | undefined {
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v.isWellFormed() ? v : v.toWellFormed());
    case 'number':
      return Number.isFinite(v) ? JSON.stringify(v) : 'null';
    case 'boolean':
      return v ? 'true' : 'false';
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
    case 'object':
      break;
    default:
      throw NOT_PLAIN; // bigint: the library path raises JSON.stringify's error
  }
  if (v === null) return 'null';
  if (depth >= MAX_DEPTH) throw NOT_PLAIN;
  if (Array.isArray(v)) {
    if (Object.getPrototypeOf(v) !== ARRAY_PROTO || typeof (v as { toJSON?: unknown }).toJSON === 'function')
      throw NOT_PLAIN;
    let s = '[';
    for (let i = 0; i < v.length; i++) s += (i ? ',' : '') + (plain(v[i], depth + 1) ?? 'null');
    return s + ']';
  }
  const proto = Object.getPrototypeOf(v) as unknown;
  if ((proto !== OBJECT_PROTO && proto !== null) || typeof (v as { toJSON?: unknown }).toJSON === 'function')
    throw NOT_PLAIN;
  const o = v as Record<string, unknown>;
  // Default sort compares UTF-16 code units: the order JCS requires.
  const keys = Object.keys(o).sort();
  let s = '{';
  let first = true;
  for (const k of keys) {
    const x = plain(o[k], depth + 1);
    if (x === undefined) continue;
    if (!k.isWellFormed()) throw NOT_PLAIN; // two keys may fold to the same one: the library path decides
    s += (first ? '"' : ',"') + (needsEscape(k) ? JSON.stringify(k).slice(1, -1) : k) + '":' + x;
    first = false;
  }
  return s + '}';
}

/** Keys are nearly always plain ASCII names: skip JSON.stringify for them. */
function needsEscape(k: string): boolean {
  for (let i = 0; i < k.length; i++) {
    const c = k.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || c > 0x7e) return true;
  }
  return false;
}

function asStored(v: unknown): unknown {
  // A toJSON value (a Date) is what JSON would write, as on the paths that do not need this walk.
  if (v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function')
    return asStored((v as { toJSON(): unknown }).toJSON());
  if (typeof v === 'string') return v.toWellFormed();
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (Array.isArray(v)) return v.map(asStored);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = Object.create(null); // a "__proto__" key stays a key
    for (const [k, x] of Object.entries(v)) out[k.toWellFormed()] = asStored(x);
    return out;
  }
  return v;
}

export function sha256(text: string): string {
  return hash('sha256', text, 'hex'); // one-shot: about half the cost of createHash().update().digest()
}

export const GENESIS = '0'.repeat(64);
