// scanText: every detector over one string; scanRecordFields: prompt, response and string attributes of a record.
import type { AttrValue, SpanRecord } from '../../collector/record.ts';
import { detectInjection, type InjectionOptions } from './injection.ts';
import { detectPii } from './pii.ts';
import { detectSecrets } from './secrets.ts';
import { SEVERITY_RANK, type DetectorKind, type Finding } from './types.ts';

export interface ScanOptions {
  /** Which detectors to run (default all three). */
  detectors?: readonly DetectorKind[];
  injection?: InjectionOptions;
}

const ALL: readonly DetectorKind[] = ['pii', 'secret', 'injection'];

/**
 * Drop a PII/secret finding that lies entirely inside another PII/secret finding that is longer (or as long and
 * at least as severe): a phone number inside a card, an IPv4 inside an IPv6. The outer one is what a redaction
 * needs. Injection findings describe phrases rather than values and only exact duplicates are dropped.
 * Linear after the sort: with starts ascending and, on ties, ends descending then severity descending, an
 * earlier kept finding contains this one exactly when the largest end kept so far reaches this one's end.
 */
function resolveOverlaps(findings: Finding[]): Finding[] {
  findings.sort((a, b) => a.start - b.start || b.end - a.end || SEVERITY_RANK[b.severity] - SEVERITY_RANK[a.severity]);
  const out: Finding[] = [];
  let maxEnd = -1;
  const seen = new Set<string>();
  for (const f of findings) {
    if (f.detector === 'injection') {
      const key = `${f.rule}:${f.start}:${f.end}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(f);
      continue;
    }
    if (f.end <= maxEnd) continue;
    maxEnd = f.end;
    out.push(f);
  }
  return out;
}

/** Run the detectors on one string. Findings are sorted by start offset; the text is scanned whole. */
export function scanText(text: string, options: ScanOptions = {}): Finding[] {
  if (text.length === 0) return [];
  const use = options.detectors ?? ALL;
  // concat, not push(...): an adversarial text can yield more findings than a call may take arguments.
  let found: Finding[] = [];
  if (use.includes('pii')) found = found.concat(detectPii(text));
  if (use.includes('secret')) found = found.concat(detectSecrets(text));
  if (use.includes('injection')) found = found.concat(detectInjection(text, options.injection));
  return found.length > 1 ? resolveOverlaps(found) : found;
}

// ---- records

export type FieldName = 'prompt' | 'response' | `attribute:${string}`;
export type FieldFinding = Finding & { field: FieldName };

/**
 * Bounds (documented for operators; every record passes through this):
 * - prompt and response: up to FIELD_SCAN_CHARS (512 Ki UTF-16 units) each. A longer value is scanned as its
 *   first and last half of that budget (the newest turn of a long conversation is usually at the end); the
 *   middle is not scanned.
 * - attributes: string values (nested objects and arrays walked to depth 8) up to ATTR_SCAN_CHARS (64 Ki) each,
 *   head+tail the same way; at most MAX_ATTRS strings and ATTR_TOTAL_CHARS (1 Mi) in total per record;
 *   strings shorter than 6 chars are skipped, as is a value identical to the prompt or response.
 */
export const FIELD_SCAN_CHARS = 512 * 1024;
export const ATTR_SCAN_CHARS = 64 * 1024;
export const MAX_ATTRS = 256;
export const ATTR_TOTAL_CHARS = 1024 * 1024;
const MAX_DEPTH = 8;
const MIN_ATTR_LEN = 6;

/** Scan `text` within `limit` chars: whole, or head and tail halves with offsets kept relative to `text`. */
export function scanBounded(text: string, limit: number, options?: ScanOptions): Finding[] {
  if (text.length <= limit) return scanText(text, options);
  const half = Math.floor(limit / 2);
  const tailStart = text.length - half;
  const head = scanText(text.slice(0, half), options);
  const tail = scanText(text.slice(tailStart), options).map((f) => ({ ...f, start: f.start + tailStart, end: f.end + tailStart }));
  return [...head, ...tail];
}

/** A string attribute value and where it sits: path segments are object keys or array indexes. */
export interface AttrString { path: Array<string | number>; key: string; value: string }

function pathKey(path: Array<string | number>): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : s.length === 0 ? p : `.${p}`;
  return s;
}

/** String leaves of an attribute map, depth-first in key order, within the bounds above. */
export function attributeStrings(attrs: Record<string, AttrValue>, skip: ReadonlySet<string> = new Set()): AttrString[] {
  const out: AttrString[] = [];
  let budget = ATTR_TOTAL_CHARS;
  const walk = (v: AttrValue, path: Array<string | number>, depth: number): void => {
    if (out.length >= MAX_ATTRS || budget <= 0) return;
    if (typeof v === 'string') {
      if (v.length < MIN_ATTR_LEN || skip.has(v)) return;
      budget -= Math.min(v.length, ATTR_SCAN_CHARS);
      out.push({ path, key: pathKey(path), value: v });
      return;
    }
    if (v === null || typeof v !== 'object' || depth >= MAX_DEPTH) return;
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...path, i], depth + 1));
    else for (const k of Object.keys(v)) walk(v[k]!, [...path, k], depth + 1);
  };
  for (const k of Object.keys(attrs)) walk(attrs[k]!, [k], 1);
  return out;
}

export type RecordFields = Pick<SpanRecord, 'prompt' | 'response' | 'attributes'>;

/** A finding with the attribute path it came from (null for prompt/response): what redaction needs. */
export interface LocatedFinding { finding: FieldFinding; path: Array<string | number> | null }

export function scanRecordLocated(record: RecordFields, options?: ScanOptions): LocatedFinding[] {
  const out: LocatedFinding[] = [];
  for (const f of scanBounded(record.prompt, FIELD_SCAN_CHARS, options)) out.push({ finding: { ...f, field: 'prompt' }, path: null });
  for (const f of scanBounded(record.response, FIELD_SCAN_CHARS, options)) out.push({ finding: { ...f, field: 'response' }, path: null });
  const skip = new Set([record.prompt, record.response].filter((s) => s.length > 0));
  for (const a of attributeStrings(record.attributes, skip)) {
    for (const f of scanBounded(a.value, ATTR_SCAN_CHARS, options)) out.push({ finding: { ...f, field: `attribute:${a.key}` }, path: a.path });
  }
  return out;
}

/** Scan a record's prompt, response and string attribute values. Offsets are into each field's own value. */
export function scanRecordFields(record: RecordFields, options?: ScanOptions): FieldFinding[] {
  return scanRecordLocated(record, options).map((l) => l.finding);
}
