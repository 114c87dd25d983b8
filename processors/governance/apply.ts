// Processor helper: scan a record, evaluate the workspace policy, and return a redacted copy when needed.
import { createHmac } from 'node:crypto';
import type { AttrValue, Attributes, SpanEvent, SpanRecord } from '../../core/record.ts';
import { actionFor, evaluatePolicy, type Policy, type PolicyDecision } from './policy.ts';
import { redact, renameKeys } from './redact.ts';
import {
  reportedFindings,
  scanFull,
  scanRecordSlots,
  type FieldFinding,
  type Path,
  type ScanCache,
  type ScanOptions,
  type TextLocation,
} from './scan.ts';

export interface GovernanceResult {
  /** The input record when nothing was redacted; otherwise a copy (the input is never mutated). */
  record: SpanRecord;
  /** Every finding, with offsets into the original (unredacted) field values. */
  findings: FieldFinding[];
  decision: PolicyDecision;
}

/**
 * Structural copy of `attrs` with the strings at `edits` replaced and the keys at `renames` renamed (both keyed by
 * the JSON path as sent); untouched branches are shared (renameKeys: order kept, clashes numbered).
 */
function replaceAttributes(
  attrs: Attributes,
  edits: Map<string, string>,
  renames: Map<string, string> = new Map(),
): Attributes {
  if (edits.size === 0 && renames.size === 0) return attrs;
  const prefixes = new Set<string>();
  for (const key of [...edits.keys(), ...renames.keys()]) {
    const path = JSON.parse(key) as Path;
    for (let i = 1; i < path.length; i++) prefixes.add(JSON.stringify(path.slice(0, i)));
  }
  const copyObject = (v: Record<string, AttrValue>, path: Path): Record<string, AttrValue> => {
    const copy: Record<string, AttrValue> = {};
    const here = new Map<string, string>();
    for (const k of Object.keys(v)) {
      const p = [...path, k];
      copy[k] = rebuild(v[k]!, p);
      const to = renames.get(JSON.stringify(p));
      if (to !== undefined) here.set(k, to);
    }
    return here.size ? renameKeys(copy, here) : copy;
  };
  const rebuild = (v: AttrValue, path: Path): AttrValue => {
    const key = JSON.stringify(path);
    if (typeof v === 'string' || typeof v === 'number') return edits.get(key) ?? v;
    if (v === null || typeof v !== 'object' || !prefixes.has(key)) return v;
    if (Array.isArray(v)) return v.map((x, i) => rebuild(x, [...path, i]));
    return copyObject(v, path);
  };
  return copyObject(attrs, []) as Attributes;
}

/** A copy of `record` with the strings at the given locations replaced. */
function writeBack(record: SpanRecord, edits: Array<{ at: TextLocation; value: string }>): SpanRecord {
  const out = { ...record };
  type Changes = { values: Map<string, string>; keys: Map<string, string> };
  const changes = (): Changes => ({ values: new Map(), keys: new Map() });
  const attrs = changes();
  const resource = changes();
  const events = new Map<number, { name?: string; attrs: Changes }>();
  const eventEdit = (i: number) => events.get(i) ?? events.set(i, { attrs: changes() }).get(i)!;
  const set = (c: Changes, path: Path, key: boolean | undefined, value: string) =>
    (key ? c.keys : c.values).set(JSON.stringify(path), value);
  for (const { at, value } of edits) {
    switch (at.kind) {
      case 'prompt':
        out.prompt = value;
        break;
      case 'response':
        out.response = value;
        break;
      case 'name':
        out.name = value;
        break;
      case 'statusMessage':
        out.statusMessage = value;
        break;
      case 'label':
        out[at.field] = value;
        break;
      case 'attribute':
        set(attrs, at.path, at.key, value);
        break;
      case 'resource':
        set(resource, at.path, at.key, value);
        break;
      case 'eventName':
        eventEdit(at.event).name = value;
        break;
      case 'eventAttribute':
        set(eventEdit(at.event).attrs, at.path, at.key, value);
        break;
    }
  }
  out.attributes = replaceAttributes(record.attributes, attrs.values, attrs.keys);
  out.resourceAttributes = replaceAttributes(record.resourceAttributes, resource.values, resource.keys);
  if (events.size) {
    out.events = record.events.map((e, i): SpanEvent => {
      const ed = events.get(i);
      return ed
        ? { ...e, name: ed.name ?? e.name, attributes: replaceAttributes(e.attributes, ed.attrs.values, ed.attrs.keys) }
        : e;
    });
  }
  return out;
}

/**
 * Pure: scan every string of the record, evaluate `policy`, and redact every finding whose action is 'redact'
 * or 'block' (blocked content must not be persisted in the clear either), in every copy of the value.
 */
export function applyGovernance(
  record: SpanRecord,
  policy: Policy,
  options?: ScanOptions,
  cache?: ScanCache,
): GovernanceResult {
  const scans = scanRecordSlots(record, options, cache);
  const findings = reportedFindings(scans);
  const decision = evaluatePolicy(policy, {
    model: record.model,
    environment: record.environment,
    prompt: record.prompt,
    response: record.response,
    findings,
  });
  const edits: Array<{ at: TextLocation; value: string }> = [];
  for (const s of scans) {
    const hits = s.findings.filter((f) => {
      const a = actionFor(policy, f);
      return a === 'redact' || a === 'block';
    });
    if (hits.length) edits.push({ at: s.slot.at, value: redact(s.slot.value, hits) });
  }
  return { record: edits.length ? writeBack(record, edits) : record, findings, decision };
}

/**
 * The trace id for a trace keyed by the client's request id. The request id label is redacted like any text, but
 * an id cannot hold a mask (every such trace would share it): when the policy redacts or blocks what the request
 * id holds, the trace is keyed by an HMAC of it instead (keyed by a server secret, so a reader cannot test guesses
 * against it; per workspace), the same for every delivery so replays still collapse.
 */
export function traceIdForRequestId(requestId: string, policy: Policy, key: Buffer, workspaceId: string): string {
  if (policy.defaultAction === 'flag' && Object.values(policy.actions).every((a) => a === 'flag')) return requestId; // nothing is ever masked
  const masked = scanFull(requestId).some((f) => {
    const a = actionFor(policy, f);
    return a === 'redact' || a === 'block';
  });
  return masked
    ? `redacted-${createHmac('sha256', key).update(`${workspaceId}\u0000${requestId}`).digest('hex').slice(0, 32)}`
    : requestId;
}
