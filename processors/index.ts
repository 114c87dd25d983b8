// The processor chain run on every batch before it is spooled, in this order:
// cost → governance (redaction before anything is written) → guardrails (blocked content masked, tripwires as
// findings) → alerts → audit → verification (hashes what is stored).
import { join } from 'node:path';
import type { Processor } from '../core/ports/ingest.ts';
import { USAGE_KINDS } from '../core/record.ts';
import type { AlertRecord } from '../core/enrichment-records.ts';
import { LOCAL_SOURCES, priceUsd } from './cost.ts';
import { tokens } from '../storage/codec.ts';
import { governanceProcessor, type PolicySource } from './governance-processor.ts';
import { guardrailProcessor } from './guardrails.ts';
import {
  AlertEvaluator,
  alertProcessor,
  putBackOutcomes,
  webhookNotifier,
  type AlertFires,
  type AlertSource,
} from './alerts.ts';
import { AuditChain, auditProcessor } from './audit.ts';
import { VerificationChain, verificationProcessor, type ChainHead } from './verification.ts';
import { loadSigningKey } from './signing.ts';

export type { Processor };

/**
 * Fills costUsd from the price table when the client sent none (0 for unknown/local models). Only model calls
 * are priced: an agent or chain span repeating its children's usage would otherwise count it twice.
 * First in the chain, it also puts the counters in their stored form (whole, non-negative, at most 2^53 − 1; two
 * counts each under that cap can sum past it), so that verification hashes what storage keeps.
 */
export const costProcessor: Processor = (batch) => {
  for (const r of batch.spans) {
    r.promptTokens = tokens(r.promptTokens);
    r.completionTokens = tokens(r.completionTokens);
    r.totalTokens = tokens(r.totalTokens);
    if (!USAGE_KINDS.has(r.kind)) continue;
    // Mappers set the marker when the client sent a cost (0 included) or the mapper priced the span itself.
    if (r.attributes['tracegate.cost_source'] !== undefined || !r.model || r.costUsd > 0) continue;
    if (LOCAL_SOURCES.has(r.source)) {
      r.costUsd = 0;
      r.attributes['tracegate.cost_source'] = 'local';
      continue;
    }
    if (r.promptTokens === 0 && r.completionTokens === 0) continue;
    const cost = priceUsd(r.model, r.provider, { input: r.promptTokens, output: r.completionTokens });
    r.costUsd = cost;
    r.attributes['tracegate.cost_source'] = cost > 0 ? 'price_table' : 'unpriced';
  }
  return batch;
};

export interface Enrichment {
  processors: Processor[];
  /** At shutdown: wait up to maxMs for alert webhook deliveries under way; returns the ids left undelivered. */
  settleDeliveries(maxMs: number): Promise<string[]>;
  /** Alert records whose webhook delivery ended since the last batch (their outcome), taken out. */
  takeAlertOutcomes(): AlertRecord[];
  /** Outcomes taken out for a write that failed, put back for the next. */
  putBackAlertOutcomes(carried: readonly AlertRecord[]): void;
  /** When each rule last fired (to be saved for the next run). */
  alertFires(): AlertFires;
  audit: AuditChain;
  verification: VerificationChain | null;
  keysDir: string;
}

export function createEnrichment(opts: {
  dataDir: string;
  enabled: boolean;
  settings: PolicySource & AlertSource;
  log: { warn(o: object, m: string): void; error(o: object, m: string): void };
  /** Finding records stored per span (the most severe first); the policy record still counts every finding. */
  maxFindingsPerSpan?: number | undefined;
  /** An Ed25519 signature for every trace rather than a signed checkpoint per chain per second. */
  signEachTrace?: boolean | undefined;
  /** Where the previous run's verification chains ended (see ChainHeadStore). */
  previousHeads?: Record<string, ChainHead> | undefined;
  /** Where the previous run's audit chains of this role ended. */
  previousAuditHeads?: Record<string, ChainHead> | undefined;
  /** When each rule last fired in the previous run, and what to call when one fires (see alert-fires.ts). */
  previousAlertFires?: AlertFires | undefined;
  onAlertFired?: (() => void) | undefined;
}): Enrichment {
  const keysDir = join(opts.dataDir, 'keys');
  const audit = new AuditChain(undefined, opts.previousAuditHeads);
  if (!opts.enabled)
    return {
      // Blocked content is masked with enrichment off too: the default must hold whatever the server's settings.
      processors: [costProcessor, guardrailProcessor(opts.settings, false), auditProcessor(audit)],
      settleDeliveries: async () => [],
      takeAlertOutcomes: () => [],
      putBackAlertOutcomes: () => {},
      alertFires: () => ({}),
      audit,
      verification: null,
      keysDir,
    };
  const verification = new VerificationChain(
    loadSigningKey(keysDir),
    1000,
    undefined,
    opts.signEachTrace ?? false,
    opts.previousHeads,
  );
  const notifier = webhookNotifier(opts.log);
  const outcomes: AlertRecord[] = [];
  const evaluator = new AlertEvaluator(opts.previousAlertFires, opts.onAlertFired);
  return {
    processors: [
      costProcessor,
      governanceProcessor(opts.settings, opts.maxFindingsPerSpan, opts.log),
      guardrailProcessor(opts.settings),
      alertProcessor(opts.settings, evaluator, notifier, outcomes),
      auditProcessor(audit),
      verificationProcessor(verification),
    ],
    settleDeliveries: (maxMs) => notifier.settle(maxMs),
    takeAlertOutcomes: () => outcomes.splice(0),
    putBackAlertOutcomes: (carried) => putBackOutcomes(outcomes, carried),
    alertFires: () => evaluator.fires(),
    audit,
    verification,
    keysDir,
  };
}
