// Governance: PII / secret / prompt-injection detectors, policy evaluation and redaction.
export type { DetectorKind, Severity, Finding, Detector } from './types.ts';
export { DETECTOR_KINDS, SEVERITIES, SEVERITY_RANK, CATEGORY_DETECTOR } from './types.ts';
export { detectPii, detectEmails, detectPhones, detectCards, detectIbans, detectSsns, detectIps } from './pii.ts';
export { detectSecrets, detectPrivateKeys, detectJwts, SECRET_RULES } from './secrets.ts';
export {
  detectInjection,
  analyzeInjection,
  injectionScore,
  severityForScore,
  DEFAULT_INJECTION_THRESHOLD,
} from './injection.ts';
export type { InjectionOptions, InjectionResult } from './injection.ts';
export { normalizeForInjection } from './normalize.ts';
export {
  scanText,
  scanFull,
  scanRecordFields,
  scanRecordSlots,
  textSlots,
  newScanCache,
  SCAN_WINDOW,
  SCAN_OVERLAP,
} from './scan.ts';
export type {
  ScanOptions,
  ScanCache,
  FieldName,
  FieldFinding,
  RecordFields,
  SlotFindings,
  TextSlot,
  TextLocation,
} from './scan.ts';
export {
  policySchema,
  governanceActionSchema,
  GOVERNANCE_ACTIONS,
  DEFAULT_POLICY,
  parsePolicy,
  evaluatePolicy,
  actionFor,
  globMatch,
} from './policy.ts';
export type {
  Policy,
  PolicyInput,
  GovernanceAction,
  Decision,
  PolicyReason,
  PolicyDecision,
  PolicySubject,
} from './policy.ts';
export { redact } from './redact.ts';
export { applyGovernance, traceIdForRequestId } from './apply.ts';
export type { GovernanceResult } from './apply.ts';
export { luhnValid, ibanValid, ssnValid, cardBrand } from './checksums.ts';
