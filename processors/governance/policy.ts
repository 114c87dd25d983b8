// Workspace governance policy: schema, defaults and pure evaluation.
import { z } from 'zod';
import { POLICY_ACTION_KEYS, SEVERITIES, SEVERITY_RANK, type Finding, type Severity } from './types.ts';
import { scanFull } from './scan.ts';
import { redact } from './redact.ts';

import { type Decision, GOVERNANCE_ACTIONS, type GovernanceAction, type PolicyReason } from '../../core/governance.ts';

export { GOVERNANCE_ACTIONS, type Decision, type GovernanceAction, type PolicyReason };
export const governanceActionSchema = z.enum(GOVERNANCE_ACTIONS);

const pattern = z.string().min(1).max(200);

/**
 * A policy document. `actions` is keyed by rule id ('secret.jwt'), finding category ('email', 'api_key',
 * 'prompt_injection', …) or detector ('pii', 'secret', 'injection'); the most specific key wins, and
 * `defaultAction` covers everything else. An unknown key is refused: a typo must not silently leave data unredacted.
 * `modelAllow`/`modelDeny` are case-insensitive whole-string globs where `*` matches any run of characters.
 * `maxPromptChars` 0 means no limit. `minSeverity` ignores weaker findings (default: act on all).
 * `guardrailText`: what is kept of the text a guardrail checked and the values it detected (processors/guardrails.ts):
 * `preview` (the default, also when absent) a short preview with every finding and detected value masked, `clear`
 * the text as sent (the rest of the policy still applies to it), `omit` nothing but its length.
 */
export const policySchema = z.strictObject({
  version: z.number().int().min(1),
  modelAllow: z.array(pattern).max(1000).default([]),
  modelDeny: z.array(pattern).max(1000).default([]),
  actions: z.partialRecord(z.enum(POLICY_ACTION_KEYS as [string, ...string[]]), governanceActionSchema).default({}),
  defaultAction: governanceActionSchema.default('flag'),
  maxPromptChars: z.number().int().min(0).default(0),
  requiredEnvironments: z.array(z.string().min(1).max(100)).max(100).default([]),
  minSeverity: z.enum(SEVERITIES).default('low'),
  guardrailText: z.enum(['preview', 'clear', 'omit']).optional(),
});

export type Policy = z.output<typeof policySchema>;
/** What a client may send: defaults filled in by `parsePolicy`. */
export type PolicyInput = z.input<typeof policySchema>;

/** Flag every finding, block nothing, no model or environment restrictions. */
export const DEFAULT_POLICY: Readonly<Policy> = Object.freeze({
  version: 1,
  modelAllow: [],
  modelDeny: [],
  actions: {},
  defaultAction: 'flag',
  maxPromptChars: 0,
  requiredEnvironments: [],
  minSeverity: 'low',
});

/** Validate a policy document; throws a ZodError listing every problem. */
export function parsePolicy(doc: unknown): Policy {
  return policySchema.parse(doc);
}

export const DECISION_RANK: Readonly<Record<Decision, number>> = { allow: 0, flag: 1, redact: 2, block: 3 };

export interface PolicyDecision {
  decision: Decision;
  reasons: PolicyReason[];
}

export interface PolicySubject {
  model: string;
  environment: string;
  prompt: string;
  response?: string;
  findings: readonly Finding[];
}

const globCache = new Map<string, string[]>();
// ASCII only: full Unicode lower-casing is context-dependent (a final sigma), so a glob could miss its own model.
const asciiLower = (s: string) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());

/**
 * Whole-string, case-insensitive match where `*` is any run of characters. No regex: the literal parts are
 * found left to right with indexOf (leftmost is always safe for `*`-only globs), so a long model id cannot
 * make matching backtrack.
 */
export function globMatch(glob: string, value: string): boolean {
  let parts = globCache.get(glob);
  if (parts === undefined) {
    parts = asciiLower(glob).split('*');
    if (globCache.size > 2000) globCache.clear();
    globCache.set(glob, parts);
  }
  const v = asciiLower(value);
  const first = parts[0]!;
  if (parts.length === 1) return v === first;
  const last = parts[parts.length - 1]!;
  if (v.length < first.length + last.length || !v.startsWith(first) || !v.endsWith(last)) return false;
  let at = first.length;
  const end = v.length - last.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i]!;
    const found = v.indexOf(part, at);
    if (found < 0 || found + part.length > end) return false;
    at = found + part.length;
  }
  return true;
}

/** The action a policy takes on a finding, or null when the finding is below `minSeverity`. */
export function actionFor(
  policy: Policy,
  finding: Pick<Finding, 'rule' | 'category' | 'severity' | 'detector'>,
): GovernanceAction | null {
  if (SEVERITY_RANK[finding.severity] < SEVERITY_RANK[policy.minSeverity as Severity]) return null;
  return (
    policy.actions[finding.rule] ??
    policy.actions[finding.category] ??
    policy.actions[finding.detector] ??
    policy.defaultAction
  );
}

const FINDING_CODE: Record<GovernanceAction, PolicyReason['code']> = {
  flag: 'finding_flagged',
  redact: 'finding_redacted',
  block: 'finding_blocked',
};

/**
 * Decide what to do with a request or record. Model checks are skipped when `model` is empty (spans such as
 * tools carry none); a non-empty `requiredEnvironments` blocks any other environment, including an empty one.
 * The decision is the strongest action among the reasons; no reasons means 'allow'.
 */
/** A caller's label quoted in a reason (stored, shown, audited): masked wherever a detector matches. */
function quoted(value: string): string {
  const found = scanFull(value);
  return JSON.stringify(found.length ? redact(value, found) : value);
}

export function evaluatePolicy(policy: Policy, subject: PolicySubject): PolicyDecision {
  const reasons: PolicyReason[] = [];
  const block = (code: PolicyReason['code'], message: string) => reasons.push({ code, message });
  const model = subject.model.trim();
  if (model.length > 0) {
    const denied = policy.modelDeny.find((g) => globMatch(g, model));
    if (denied !== undefined) block('model_denied', `model ${quoted(model)} matches deny pattern "${denied}"`);
    else if (policy.modelAllow.length > 0 && !policy.modelAllow.some((g) => globMatch(g, model))) {
      block('model_not_allowed', `model ${quoted(model)} matches no allowed pattern`);
    }
  }
  if (policy.requiredEnvironments.length > 0 && !policy.requiredEnvironments.includes(subject.environment)) {
    block(
      'environment_not_allowed',
      `environment ${quoted(subject.environment)} is not one of ${policy.requiredEnvironments.join(', ')}`,
    );
  }
  if (policy.maxPromptChars > 0 && subject.prompt.length > policy.maxPromptChars) {
    block('prompt_too_long', `prompt is ${subject.prompt.length} chars; the limit is ${policy.maxPromptChars}`);
  }
  // One reason per (rule, action), in first-seen order, so a text with 500 e-mails yields one line.
  const grouped = new Map<string, PolicyReason>();
  for (const f of subject.findings) {
    const action = actionFor(policy, f);
    if (action === null) continue;
    const key = `${f.rule}\u0000${action}`;
    const r = grouped.get(key);
    if (r) {
      r.count = (r.count ?? 1) + 1;
      continue;
    }
    grouped.set(key, { code: FINDING_CODE[action], message: '', category: f.category, rule: f.rule, count: 1 });
  }
  for (const [key, r] of grouped) {
    const action = key.slice(key.indexOf('\u0000') + 1);
    r.message = `${r.count} ${r.category} finding${r.count === 1 ? '' : 's'} (${r.rule}): ${action}`;
    reasons.push(r);
  }
  let decision: Decision = 'allow';
  for (const r of reasons) {
    const d: Decision = r.code === 'finding_flagged' ? 'flag' : r.code === 'finding_redacted' ? 'redact' : 'block';
    if (DECISION_RANK[d] > DECISION_RANK[decision]) decision = d;
  }
  return { decision, reasons };
}
