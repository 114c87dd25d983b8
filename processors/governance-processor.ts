// Governance at ingestion: scan every span, apply the workspace policy (redaction happens here, before the
// spool, so raw text is never written anywhere), and record findings and the policy decision.
import type { FindingRecord, PolicyRecord } from '../collector/enrichment-records.ts';
import type { Processor } from '../collector/pipeline-types.ts';
import type { SpanRecord } from '../collector/record.ts';
import { actionFor, applyGovernance, type Policy } from './governance/index.ts';

export interface PolicySource { policyFor(workspaceId: string): Promise<Policy> }

export function governanceProcessor(policies: PolicySource): Processor {
  return async (batch) => {
    const now = Date.now();
    const cache = new Map<string, Policy>();
    const spans: SpanRecord[] = new Array(batch.spans.length);
    for (let i = 0; i < batch.spans.length; i++) {
      const span = batch.spans[i]!;
      let policy = cache.get(span.workspaceId);
      if (!policy) cache.set(span.workspaceId, (policy = await policies.policyFor(span.workspaceId)));
      const { record, findings, decision } = applyGovernance(span, policy);
      spans[i] = record;
      if (findings.length === 0 && decision.decision === 'allow' && !span.prompt && !span.response) continue;
      for (const f of findings) {
        batch.extra.push({
          recordType: 'finding', workspaceId: span.workspaceId, traceId: span.traceId, spanId: span.spanId,
          detector: f.detector, rule: f.rule, category: f.category, severity: f.severity, field: f.field,
          start: f.start, end: f.end, preview: f.preview, score: f.score ?? 1, action: actionFor(policy, f) ?? 'none', createdAtMs: now,
        } satisfies FindingRecord);
      }
      batch.extra.push({
        recordType: 'policy', workspaceId: span.workspaceId, traceId: span.traceId, spanId: span.spanId,
        policyVersion: policy.version, decision: decision.decision, reasons: JSON.stringify(decision.reasons), createdAtMs: now,
      } satisfies PolicyRecord);
      if (decision.decision !== 'allow') {
        const attrs = { ...record.attributes, 'governance.decision': decision.decision, 'governance.categories': [...new Set(findings.map((f) => f.category))] };
        spans[i] = { ...record, attributes: attrs };
      }
    }
    return { spans, extra: batch.extra };
  };
}
