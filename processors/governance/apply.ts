// Processor helper: scan a record, evaluate the workspace policy, and return a redacted copy when needed.
import type { AttrValue, Attributes, SpanRecord } from '../../collector/record.ts';
import { actionFor, evaluatePolicy, type Policy, type PolicyDecision } from './policy.ts';
import { redact } from './redact.ts';
import { scanRecordLocated, type FieldFinding, type ScanOptions } from './scan.ts';
import type { Finding } from './types.ts';

export interface GovernanceResult {
  /** The input record when nothing was redacted; otherwise a copy (the input is never mutated). */
  record: SpanRecord;
  /** Every finding, with offsets into the original (unredacted) field values. */
  findings: FieldFinding[];
  decision: PolicyDecision;
}

/** Structural copy of `attrs` with the strings at `edits` (keyed by JSON path) replaced; untouched branches are shared. */
function replaceAttributes(attrs: Attributes, edits: Map<string, string>): Attributes {
  const prefixes = new Set<string>();
  for (const key of edits.keys()) {
    const path = JSON.parse(key) as Array<string | number>;
    for (let i = 1; i < path.length; i++) prefixes.add(JSON.stringify(path.slice(0, i)));
  }
  const rebuild = (v: AttrValue, path: Array<string | number>): AttrValue => {
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

function valueAt(attrs: Attributes, path: Array<string | number>): string {
  let v: AttrValue | undefined = attrs as AttrValue;
  for (const p of path) v = v !== null && typeof v === 'object' ? (v as Record<string | number, AttrValue>)[p] : undefined;
  return typeof v === 'string' ? v : '';
}

/**
 * Pure: scan prompt, response and string attributes, evaluate `policy`, and redact every finding whose action
 * is 'redact' or 'block' (blocked content must not be persisted in the clear either).
 */
export function applyGovernance(record: SpanRecord, policy: Policy, options?: ScanOptions): GovernanceResult {
  const located = scanRecordLocated(record, options);
  const findings = located.map((l) => l.finding);
  const decision = evaluatePolicy(policy, {
    model: record.model, environment: record.environment, prompt: record.prompt, response: record.response, findings,
  });
  const toRedact = located.filter((l) => {
    const a = actionFor(policy, l.finding);
    return a === 'redact' || a === 'block';
  });
  if (toRedact.length === 0) return { record, findings, decision };

  const prompt: Finding[] = [];
  const response: Finding[] = [];
  const attrs = new Map<string, { path: Array<string | number>; findings: Finding[] }>();
  for (const { finding, path } of toRedact) {
    if (finding.field === 'prompt') prompt.push(finding);
    else if (finding.field === 'response') response.push(finding);
    else if (path !== null) {
      const key = JSON.stringify(path);
      const entry = attrs.get(key) ?? { path, findings: [] };
      entry.findings.push(finding);
      attrs.set(key, entry);
    }
  }
  const edits = new Map<string, string>();
  for (const [key, { path, findings: fs }] of attrs) edits.set(key, redact(valueAt(record.attributes, path), fs));
  return {
    record: {
      ...record,
      prompt: prompt.length > 0 ? redact(record.prompt, prompt) : record.prompt,
      response: response.length > 0 ? redact(record.response, response) : record.response,
      attributes: edits.size > 0 ? replaceAttributes(record.attributes, edits) : record.attributes,
    },
    findings,
    decision,
  };
}
