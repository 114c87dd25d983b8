// Governance preflight for a Responses request: scan every string the provider would receive, apply the
// workspace policy, and produce the body to forward (redacted when the policy says so) plus what the trace may store.
import type { Attributes } from '../../core/record.ts';
import type { PreflightResult } from '../../core/ports/ingest.ts';
import { maskedFieldName, scanFull, type FieldFinding } from '../../processors/governance/scan.ts';
import {
  actionFor,
  evaluatePolicy,
  type Decision,
  type Policy,
  type PolicyReason,
} from '../../processors/governance/policy.ts';
import { redact } from '../../processors/governance/redact.ts';
import type { Finding } from '../../processors/governance/types.ts';
import { renderPrompt, requestStrings, requestTextParts, withTexts } from '../../mappers/proxy.ts';

export interface Preflight {
  decision: Decision;
  reasons: PolicyReason[];
  /** What goes upstream: the caller's bytes untouched unless something was redacted. */
  forward: Buffer;
  /** The request as the trace may store it: as forwarded; for a blocked request, with the offending spans masked. */
  request: Record<string, unknown>;
  /** The prompt the trace stores, rendered from `request`. */
  prompt: string;
  /** governance.* attributes: categories and rules, never matched text. */
  attributes: Attributes;
  /** Findings and decision for the ingestion processor, which records them (finding and policy records). */
  result: PreflightResult;
}

const SECRETS_ONLY = { detectors: ['secret' as const] };
const NO_INJECTION = { detectors: ['pii' as const, 'secret' as const] };

/** Request fields of the stored span that the preflight already scanned (its prompt and request attributes). */
const COVERED_FIELDS = ['prompt', 'attribute:metadata', 'attribute:gen_ai.request.'];

export function preflight(policy: Policy, raw: Buffer, body: Record<string, unknown>, environment: string): Preflight {
  const strings = requestStrings(body);
  const findings = strings.map((p) => scanFull(p.text, p.opaque ? SECRETS_ONLY : p.trusted ? NO_INJECTION : undefined));
  const all = findings.flat();
  const model = typeof body.model === 'string' ? body.model : '';
  const { decision, reasons } = evaluatePolicy(policy, {
    model,
    environment,
    prompt: renderPrompt(requestTextParts(body)),
    findings: all,
  });

  const masked = (keep: (f: Finding) => boolean) =>
    strings.flatMap((p, i) => {
      const hits = findings[i]!.filter(keep);
      return hits.length ? [{ path: p.path, text: redact(p.text, hits), ...(p.key ? { key: p.key } : {}) }] : [];
    });
  let forward = raw;
  let request = body;
  if (decision === 'redact') {
    request = withTexts(
      body,
      masked((f) => actionFor(policy, f) === 'redact'),
    );
    forward = Buffer.from(JSON.stringify(request));
  } else if (decision === 'block') {
    // Not forwarded, but still stored: keep what made it a block out of the trace.
    request = withTexts(
      body,
      masked((f) => {
        const a = actionFor(policy, f);
        return a === 'block' || a === 'redact';
      }),
    );
  }

  // Field names are stored and shown: a key with a finding appears masked in them, whatever the action.
  const maskedKeys = new Map<string, string>();
  strings.forEach((p, i) => {
    if (p.key && findings[i]!.length) maskedKeys.set(`request:${JSON.stringify(p.path)}`, redact(p.text, findings[i]!));
  });
  const fieldFindings: FieldFinding[] = [];
  strings.forEach((p, i) => {
    for (const f of findings[i]!)
      fieldFindings.push({ ...f, field: maskedFieldName('request:', p.path, maskedKeys, p.key) });
  });
  const attributes: Attributes = {};
  if (all.length || reasons.length) {
    const grouped = new Map<
      string,
      {
        category: string;
        rule: string;
        severity: string;
        detector: string;
        action: string;
        field: string;
        count: number;
      }
    >();
    for (const f of fieldFindings) {
      const key = `${f.rule}\u0000${f.field}`;
      const g = grouped.get(key);
      if (g) g.count++;
      else
        grouped.set(key, {
          category: f.category,
          rule: f.rule,
          severity: f.severity,
          detector: f.detector,
          action: actionFor(policy, f) ?? 'ignore',
          field: f.field.slice('request:'.length),
          count: 1,
        });
    }
    attributes['governance.decision'] = decision;
    attributes['governance.findings'] = [...grouped.values()];
    attributes['governance.categories'] = [...new Set(all.map((f) => f.category))];
    attributes['governance.reasons'] = reasons.map((r) => ({ code: r.code, message: r.message }));
    attributes['governance.redacted'] = decision === 'redact';
  }
  return {
    decision,
    reasons,
    forward,
    request,
    prompt: renderPrompt(requestTextParts(request)),
    attributes,
    result: { spanId: '', findings: fieldFindings, decision, reasons, coveredFields: COVERED_FIELDS },
  };
}

/** The provider-style message of a block: the decision, categories and reasons (no matched text). */
export function blockMessage(pre: Preflight): string {
  const blocking = pre.reasons.filter((r) => r.code !== 'finding_flagged' && r.code !== 'finding_redacted');
  const categories = [...new Set(blocking.map((r) => r.category).filter(Boolean))];
  return (
    `Request blocked by the workspace policy (decision: block${categories.length ? `; categories: ${categories.join(', ')}` : ''}): ` +
    blocking.map((r) => r.message).join('; ')
  );
}
