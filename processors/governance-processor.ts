// Governance at ingestion: scan every span, apply the workspace policy (redaction happens here, before the
// spool, so raw text is never written anywhere), and record findings and the policy decision.
import { hash } from 'node:crypto';
import {
  CLEAN_POLICY_ATTRIBUTE,
  type FindingRecord,
  type PolicyRecord,
  type TraceMetaRecord,
} from '../core/enrichment-records.ts';
import type { Processor } from '../core/ports/ingest.ts';
import type { Attributes, SpanRecord } from '../core/record.ts';
import type { PreflightResult } from '../core/ports/ingest.ts';
import { newScanCache, scanFull } from './governance/scan.ts';
import { redact } from './governance/redact.ts';
import {
  actionFor,
  applyGovernance,
  evaluatePolicy,
  SEVERITY_RANK,
  type GovernanceResult,
  type Policy,
} from './governance/index.ts';
import { DECISION_RANK } from './governance/policy.ts';
import { withheldPreview } from './governance/injection.ts';
import { ownershipOf, OWNERSHIP_ATTRIBUTES } from '../core/response-ownership.ts';

/**
 * A finding's field name is a path into the span's attributes, as long as their keys: stored (and put in page
 * cursors) cut to this many characters, with a hash of the whole name so two long fields stay apart.
 */
export const MAX_FINDING_FIELD_CHARS = 512;
export function findingField(field: string): string {
  if (field.length <= MAX_FINDING_FIELD_CHARS) return field;
  const tag = `…#${hash('sha256', field, 'hex').slice(0, 16)}`;
  let head = field.slice(0, MAX_FINDING_FIELD_CHARS - tag.length);
  if (/[\ud800-\udbff]$/.test(head)) head = head.slice(0, -1); // not half a character
  return head + tag;
}

export interface PolicySource {
  policyFor(workspaceId: string): Promise<Policy>;
}

/**
 * A text full of e-mail addresses yields a finding per address, and storing them all took one trace tens of seconds.
 * Storing the most severe `max` per span bounds that; redaction and the policy decision still use every
 * finding, and the policy record's reasons count them all.
 */
function strongest<F extends { severity: keyof typeof SEVERITY_RANK; start: number }>(findings: F[], max: number): F[] {
  if (findings.length <= max) return findings;
  return [...findings]
    .sort((a, b) => SEVERITY_RANK[b.severity] - SEVERITY_RANK[a.severity] || a.start - b.start)
    .slice(0, max);
}

/**
 * A proxied span: its request was scanned (and redacted) by the preflight before it went upstream, so the
 * stored prompt holds only masks. The preflight's findings stand for the request fields; this scan adds what
 * the rest of the span holds (the response above all); the decision is the stronger of the two.
 */
function withPreflight(
  own: GovernanceResult,
  pre: PreflightResult,
  policy: Policy,
  span: SpanRecord,
): GovernanceResult {
  const covered = (field: string) =>
    pre.coveredFields.some(
      (c) =>
        field === c || (c.endsWith('.') ? field.startsWith(c) : field.startsWith(`${c}.`) || field.startsWith(`${c}[`)),
    );
  // A finding in a request-derived field is the preflight's to report only when the preflight has it too.
  const seenByPreflight = new Set(pre.findings.map((f) => `${f.rule}\u0000${f.preview}`));
  const rest = own.findings.filter((f) => !(covered(f.field) && seenByPreflight.has(`${f.rule}\u0000${f.preview}`)));
  const restDecision = evaluatePolicy(policy, {
    model: span.model,
    environment: span.environment,
    prompt: '',
    response: span.response,
    findings: rest,
  });
  const reasons = [...pre.reasons];
  const seen = new Set(reasons.map((r) => `${r.code}\u0000${r.message}`));
  for (const r of restDecision.reasons) if (!seen.has(`${r.code}\u0000${r.message}`)) reasons.push(r);
  const decision =
    DECISION_RANK[restDecision.decision] > DECISION_RANK[pre.decision] ? restDecision.decision : pre.decision;
  return { record: own.record, findings: [...pre.findings, ...rest], decision: { decision, reasons } };
}

/**
 * A span the scan failed on (a detector bug on some text): stored with every text withheld and decision `block`,
 * rather than failing its whole request, which its exporter would retry for ever. Usage, times and ids stay.
 */
function withheld(span: SpanRecord, err: unknown): GovernanceResult {
  const message = `the governance scan failed on this span (${err instanceof Error ? err.name : 'error'}); its text is withheld`;
  return {
    record: {
      ...span,
      prompt: '',
      response: '',
      statusMessage: '',
      name: span.name.length <= 64 && /^[\w .:/-]*$/.test(span.name) ? span.name : 'withheld',
      requestId: '',
      actionName: '',
      environment: '',
      trainable: false,
      events: [],
      resourceAttributes: {},
      attributes: { 'tracegate.withheld': 'governance_error' },
    },
    findings: [],
    decision: { decision: 'block', reasons: [{ code: 'scan_failed', message }] },
  };
}

/**
 * A proxy span's provider host, port and response id: tracegate's own settings and the provider's token, not
 * request text, and the proof the proxy's ownership index reads (core/response-ownership.ts). Not scanned, so
 * a policy redacting IP addresses (a provider at 10.1.2.3) cannot break the index, and kept when the text is
 * withheld. Taken out before the scan, put back after it.
 */
function setAside(span: SpanRecord): [SpanRecord, Attributes | null] {
  if (!ownershipOf(span)) return [span, null];
  const attributes = { ...span.attributes };
  const kept: Attributes = {};
  for (const k of OWNERSHIP_ATTRIBUTES) {
    kept[k] = attributes[k]!;
    delete attributes[k];
  }
  return [{ ...span, attributes }, kept];
}

/** Whether the policy ever masks a finding (every action `flag`: nothing is ever rewritten). */
const masks = (policy: Policy) =>
  policy.defaultAction !== 'flag' || Object.values(policy.actions).some((a) => a !== 'flag');

/** `text` with what the policy redacts or blocks masked. */
function masked(text: string, policy: Policy): string {
  if (!text) return text;
  const hits = scanFull(text).filter((f) => {
    const a = actionFor(policy, f);
    return a === 'redact' || a === 'block';
  });
  return hits.length ? redact(text, hits) : text;
}

/**
 * A trace's metadata record (an agent runtime's workflow name, group id and metadata) is stored as the policy has
 * span text stored: what it redacts or blocks masked (keys and values of the metadata alike). It has no span to
 * hang findings on: the spans of its trace carry those.
 */
export function governedTraceMeta(r: TraceMetaRecord, policy: Policy): TraceMetaRecord {
  if (!masks(policy)) return r;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return masked(v, policy);
    if (Array.isArray(v)) return v.map(walk);
    if (typeof v !== 'object' || v === null) return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[masked(k, policy)] = walk(x);
    return out;
  };
  return {
    ...r,
    workflowName: masked(r.workflowName, policy),
    groupId: masked(r.groupId, policy),
    metadata: r.metadata ? JSON.stringify(walk(JSON.parse(r.metadata))) : '',
  };
}

export function governanceProcessor(
  policies: PolicySource,
  maxFindingsPerSpan = 100,
  log?: { error(o: object, m: string): void },
): Processor {
  return async (batch, ctx) => {
    const cache = new Map<string, Policy>();
    const scanCache = newScanCache();
    const spans: SpanRecord[] = new Array(batch.spans.length);
    for (let i = 0; i < batch.spans.length; i++) {
      const [span, kept] = setAside(batch.spans[i]!);
      let policy = cache.get(span.workspaceId);
      if (!policy) cache.set(span.workspaceId, (policy = await policies.policyFor(span.workspaceId)));
      const pre = ctx?.preflight?.spanId === span.spanId ? ctx.preflight : undefined;
      let own: GovernanceResult;
      try {
        own = applyGovernance(span, policy, undefined, scanCache);
      } catch (err) {
        log?.error(
          { err, traceId: span.traceId, spanId: span.spanId },
          'governance: scan failed on a span; stored with its text withheld',
        );
        own = withheld(span, err);
      }
      if (kept) own = { ...own, record: { ...own.record, attributes: { ...own.record.attributes, ...kept } } };
      const { record, findings, decision } = pre ? withPreflight(own, pre, policy, span) : own;
      // Stamped with the span version's ingestion time: a span delivered again with other content gets records of
      // its own, and reads keep only those of the version stored (older ones cannot be deleted from ClickHouse).
      const now = span.ingestedAtMs || Date.now();
      spans[i] = record;
      if (findings.length === 0 && decision.decision === 'allow' && !span.prompt && !span.response) continue;
      for (const f of strongest(findings, maxFindingsPerSpan)) {
        const action = actionFor(policy, f) ?? 'none';
        // PII and secret previews are masked already; an injection preview quotes the phrase.
        const preview =
          f.detector === 'injection' && (action === 'redact' || action === 'block') ? withheldPreview(f) : f.preview;
        batch.extra.push({
          recordType: 'finding',
          workspaceId: span.workspaceId,
          traceId: span.traceId,
          spanId: span.spanId,
          detector: f.detector,
          rule: f.rule,
          category: f.category,
          severity: f.severity,
          field: findingField(f.field),
          start: f.start,
          end: f.end,
          preview,
          score: f.score ?? 1,
          action,
          createdAtMs: now,
        } satisfies FindingRecord);
      }
      if (findings.length === 0 && decision.decision === 'allow' && decision.reasons.length === 0) {
        // Nothing to report: the version that allowed it goes on the span (see CLEAN_POLICY_ATTRIBUTE).
        spans[i] = { ...record, attributes: { ...record.attributes, [CLEAN_POLICY_ATTRIBUTE]: policy.version } };
        continue;
      }
      batch.extra.push({
        recordType: 'policy',
        workspaceId: span.workspaceId,
        traceId: span.traceId,
        spanId: span.spanId,
        policyVersion: policy.version,
        decision: decision.decision,
        reasons: JSON.stringify(decision.reasons),
        createdAtMs: now,
      } satisfies PolicyRecord);
      if (decision.decision !== 'allow') {
        const attrs = {
          ...record.attributes,
          'governance.decision': decision.decision,
          'governance.categories': [...new Set(findings.map((f) => f.category))],
        };
        spans[i] = { ...record, attributes: attrs };
      }
    }
    for (let i = 0; i < batch.extra.length; i++) {
      const r = batch.extra[i]!;
      if (r.recordType !== 'trace_meta') continue;
      let policy = cache.get(r.workspaceId);
      if (!policy) cache.set(r.workspaceId, (policy = await policies.policyFor(r.workspaceId)));
      batch.extra[i] = governedTraceMeta(r, policy);
    }
    return { spans, extra: batch.extra };
  };
}
