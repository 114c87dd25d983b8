// Shared shapes for the governance detectors, policy evaluation and redaction.
import { DETECTOR_KINDS, type DetectorKind, type Finding, type Severity } from '../../core/governance.ts';

export { DETECTOR_KINDS, SEVERITIES, type DetectorKind, type Finding, type Severity } from '../../core/governance.ts';

export type Detector = (text: string) => Finding[];

export const SEVERITY_RANK: Record<Severity, number> = { low: 0, medium: 1, high: 2, critical: 3 };

/** Category → detector, for every category the built-in detectors emit. */
export const CATEGORY_DETECTOR: Record<string, DetectorKind> = {
  email: 'pii',
  phone: 'pii',
  payment_card: 'pii',
  iban: 'pii',
  ssn: 'pii',
  ip_address: 'pii',
  api_key: 'secret',
  private_key: 'secret',
  jwt: 'secret',
  webhook_url: 'secret',
  prompt_injection: 'injection',
  invisible_text: 'injection',
};

/** Every rule id the built-in detectors emit (policies may key actions on these). */
export const RULE_IDS = [
  'pii.email',
  'pii.phone',
  'pii.payment_card',
  'pii.iban',
  'pii.ssn',
  'pii.ip_address',
  'secret.anthropic_key',
  'secret.openai_key',
  'secret.aws_access_key_id',
  'secret.aws_secret_key',
  'secret.github_token',
  'secret.slack_token',
  'secret.slack_webhook',
  'secret.stripe_key',
  'secret.google_api_key',
  'secret.huggingface_token',
  'secret.private_key',
  'secret.jwt',
  'injection.ignore_instructions',
  'injection.reveal_system_prompt',
  'injection.role_override',
  'injection.spoofed_delimiter',
  'injection.exfiltration',
  'injection.jailbreak',
  'injection.indirect',
  'injection.invisible_text',
] as const;

/** What a policy's `actions` may be keyed by: a rule id, a category, or a whole detector. */
export const POLICY_ACTION_KEYS: readonly string[] = [
  ...RULE_IDS,
  ...Object.keys(CATEGORY_DETECTOR),
  ...DETECTOR_KINDS,
];
