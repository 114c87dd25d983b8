// The governance vocabulary the record model and the ports share: detector kinds, severities, a finding, the
// actions a policy takes and the reasons it gives. The detectors and the policy live in processors/governance.

export const DETECTOR_KINDS = ['pii', 'secret', 'injection'] as const;
export type DetectorKind = (typeof DETECTOR_KINDS)[number];

export const SEVERITIES = ['low', 'medium', 'high', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];

/** One match of one rule. Offsets are UTF-16 code units into the scanned text; `preview` never holds the raw value. */
export interface Finding {
  detector: DetectorKind;
  /** Stable rule id, e.g. 'pii.email', 'secret.openai_key', 'injection.ignore_instructions'. */
  rule: string;
  /** What kind of data was found: 'email', 'api_key', 'prompt_injection', … (policies key actions on this). */
  category: string;
  severity: Severity;
  start: number;
  end: number;
  /** Masked rendering, safe to store and show. */
  preview: string;
  /** Injection findings: the text's overall injection score in [0,1]. */
  score?: number;
}

/** How a finding names its field: prompt, response, name, status_message, actionName (and the other labels),
 * attribute:<path>, resource:<path>, event[<i>].name, event[<i>]:<path>, or request:<path> (the proxy's preflight). */
export type FieldName = string;
export type FieldFinding = Finding & { field: FieldName };

export const GOVERNANCE_ACTIONS = ['flag', 'redact', 'block'] as const;
export type GovernanceAction = (typeof GOVERNANCE_ACTIONS)[number];
export type Decision = 'allow' | GovernanceAction;

export interface PolicyReason {
  code:
    | 'model_denied'
    | 'model_not_allowed'
    | 'environment_not_allowed'
    | 'prompt_too_long'
    | 'finding_flagged'
    | 'finding_redacted'
    | 'finding_blocked'
    | 'scan_failed';
  message: string;
  category?: string;
  rule?: string;
  /** Findings of this rule that the reason covers. */
  count?: number;
}
