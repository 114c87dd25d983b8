// Governance preflight for a Responses request: scan the text the model will read, apply the workspace policy,
// and produce the body to forward (redacted when the policy says so) plus what the trace may store.
import type { Attributes } from '../record.ts';
import { FIELD_SCAN_CHARS, scanBounded } from '../../processors/governance/scan.ts';
import { actionFor, evaluatePolicy, type Decision, type Policy, type PolicyReason } from '../../processors/governance/policy.ts';
import { redact } from '../../processors/governance/redact.ts';
import type { Finding } from '../../processors/governance/types.ts';
import { renderPrompt, requestTextParts, withTexts, type TextPart } from '../../mappers/proxy.ts';

export interface Preflight {
  decision: Decision;
  reasons: PolicyReason[];
  /** What goes upstream: the caller's bytes untouched unless something was redacted. */
  forward: Buffer;
  /** The request as forwarded (for the trace). */
  request: Record<string, unknown>;
  /** The prompt the trace stores: as forwarded; for a blocked request, with the offending spans masked. */
  prompt: string;
  /** governance.* attributes: categories and rules, never matched text. */
  attributes: Attributes;
}

const fieldName = (path: TextPart['path']) => path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('').slice(1);

function masked(parts: TextPart[], findings: Finding[][], keep: (f: Finding) => boolean): TextPart[] {
  return parts.map((p, i) => {
    const hits = findings[i]!.filter(keep);
    return hits.length ? { ...p, text: redact(p.text, hits) } : p;
  });
}

export function preflight(policy: Policy, raw: Buffer, body: Record<string, unknown>, environment: string): Preflight {
  const parts = requestTextParts(body);
  const findings = parts.map((p) => scanBounded(p.text, FIELD_SCAN_CHARS));
  const all = findings.flat();
  const model = typeof body.model === 'string' ? body.model : '';
  const { decision, reasons } = evaluatePolicy(policy, { model, environment, prompt: renderPrompt(parts), findings: all });

  let forward = raw;
  let request = body;
  let stored = parts;
  if (decision === 'redact') {
    stored = masked(parts, findings, (f) => actionFor(policy, f) === 'redact');
    request = withTexts(body, stored.filter((p, i) => p !== parts[i]));
    forward = Buffer.from(JSON.stringify(request));
  } else if (decision === 'block') {
    // Not forwarded, but still stored: keep what made it a block out of the trace.
    stored = masked(parts, findings, (f) => { const a = actionFor(policy, f); return a === 'block' || a === 'redact'; });
  }

  const attributes: Attributes = {};
  if (all.length || reasons.length) {
    const grouped = new Map<string, { category: string; rule: string; severity: string; detector: string; action: string; field: string; count: number }>();
    parts.forEach((p, i) => {
      for (const f of findings[i]!) {
        const field = fieldName(p.path);
        const key = `${f.rule}\u0000${field}`;
        const g = grouped.get(key);
        if (g) g.count++;
        else grouped.set(key, { category: f.category, rule: f.rule, severity: f.severity, detector: f.detector, action: actionFor(policy, f) ?? 'ignore', field, count: 1 });
      }
    });
    attributes['governance.decision'] = decision;
    attributes['governance.findings'] = [...grouped.values()];
    attributes['governance.categories'] = [...new Set(all.map((f) => f.category))];
    attributes['governance.reasons'] = reasons.map((r) => ({ code: r.code, message: r.message }));
    attributes['governance.redacted'] = decision === 'redact';
  }
  return { decision, reasons, forward, request, prompt: renderPrompt(stored), attributes };
}

/** The provider-style message of a block: the decision, categories and reasons (no matched text). */
export function blockMessage(pre: Preflight): string {
  const blocking = pre.reasons.filter((r) => r.code !== 'finding_flagged' && r.code !== 'finding_redacted');
  const categories = [...new Set(blocking.map((r) => r.category).filter(Boolean))];
  return `Request blocked by the workspace policy (decision: block${categories.length ? `; categories: ${categories.join(', ')}` : ''}): `
    + blocking.map((r) => r.message).join('; ');
}
