// Processor helper: scan a record, evaluate the workspace policy, and return a redacted copy when needed.
import type { AttrValue, Attributes, SpanEvent, SpanRecord } from '../../collector/record.ts';
import { actionFor, evaluatePolicy, type Policy, type PolicyDecision } from './policy.ts';
import { redact } from './redact.ts';
import { reportedFindings, scanRecordSlots, type FieldFinding, type Path, type ScanCache, type ScanOptions, type TextLocation } from './scan.ts';

export interface GovernanceResult {
  /** The input record when nothing was redacted; otherwise a copy (the input is never mutated). */
  record: SpanRecord;
  /** Every finding, with offsets into the original (unredacted) field values. */
  findings: FieldFinding[];
  decision: PolicyDecision;
}

/** Structural copy of `attrs` with the strings at `edits` (keyed by JSON path) replaced; untouched branches are shared. */
function replaceAttributes(attrs: Attributes, edits: Map<string, string>): Attributes {
  if (edits.size === 0) return attrs;
  const prefixes = new Set<string>();
  for (const key of edits.keys()) {
    const path = JSON.parse(key) as Path;
    for (let i = 1; i < path.length; i++) prefixes.add(JSON.stringify(path.slice(0, i)));
  }
  const rebuild = (v: AttrValue, path: Path): AttrValue => {
    const key = JSON.stringify(path);
    if (typeof v === 'string') return edits.get(key) ?? v;
    if (v === null || typeof v !== 'object' || !prefixes.has(key)) return v;
    if (Array.isArray(v)) return v.map((x, i) => rebuild(x, [...path, i]));
    const copy: Record<string, AttrValue> = {};
    for (const k of Object.keys(v)) copy[k] = rebuild(v[k]!, [...path, k]);
    return copy;
  };
  const out: Attributes = {};
  for (const k of Object.keys(attrs)) out[k] = rebuild(attrs[k]!, [k]);
  return out;
}

/** A copy of `record` with the strings at the given locations replaced. */
function writeBack(record: SpanRecord, edits: Array<{ at: TextLocation; value: string }>): SpanRecord {
  const out = { ...record };
  const attrs = new Map<string, string>();
  const resource = new Map<string, string>();
  const events = new Map<number, { name?: string; attrs: Map<string, string> }>();
  const eventEdit = (i: number) => events.get(i) ?? events.set(i, { attrs: new Map() }).get(i)!;
  for (const { at, value } of edits) {
    switch (at.kind) {
      case 'prompt': out.prompt = value; break;
      case 'response': out.response = value; break;
      case 'name': out.name = value; break;
      case 'statusMessage': out.statusMessage = value; break;
      case 'label': out[at.field] = value; break;
      case 'attribute': attrs.set(JSON.stringify(at.path), value); break;
      case 'resource': resource.set(JSON.stringify(at.path), value); break;
      case 'eventName': eventEdit(at.event).name = value; break;
      case 'eventAttribute': eventEdit(at.event).attrs.set(JSON.stringify(at.path), value); break;
    }
  }
  out.attributes = replaceAttributes(record.attributes, attrs);
  out.resourceAttributes = replaceAttributes(record.resourceAttributes, resource);
  if (events.size) {
    out.events = record.events.map((e, i): SpanEvent => {
      const ed = events.get(i);
      return ed ? { ...e, name: ed.name ?? e.name, attributes: replaceAttributes(e.attributes, ed.attrs) } : e;
    });
  }
  return out;
}

/**
 * Pure: scan every string of the record, evaluate `policy`, and redact every finding whose action is 'redact'
 * or 'block' (blocked content must not be persisted in the clear either), in every copy of the value.
 */
export function applyGovernance(record: SpanRecord, policy: Policy, options?: ScanOptions, cache?: ScanCache): GovernanceResult {
  const scans = scanRecordSlots(record, options, cache);
  const findings = reportedFindings(scans);
  const decision = evaluatePolicy(policy, {
    model: record.model, environment: record.environment, prompt: record.prompt, response: record.response, findings,
  });
  const edits: Array<{ at: TextLocation; value: string }> = [];
  for (const s of scans) {
    const hits = s.findings.filter((f) => { const a = actionFor(policy, f); return a === 'redact' || a === 'block'; });
    if (hits.length) edits.push({ at: s.slot.at, value: redact(s.slot.value, hits) });
  }
  return { record: edits.length ? writeBack(record, edits) : record, findings, decision };
}
