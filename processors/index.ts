// The processor chain run on every record before it is spooled.
import type { Processor } from '../collector/pipeline-types.ts';
import { priceUsd } from './cost.ts';

/** Fills costUsd from the price table when the client sent none (0 for unknown/local models). */
export const costProcessor: Processor = (batch) => {
  for (const r of batch.spans) {
    if (r.attributes['tracegate.cost_source'] !== undefined || !r.model || r.costUsd > 0) continue;
    if (r.promptTokens === 0 && r.completionTokens === 0) continue;
    const cost = priceUsd(r.model, r.provider, { input: r.promptTokens, output: r.completionTokens });
    r.costUsd = cost;
    r.attributes['tracegate.cost_source'] = cost > 0 ? 'price_table' : 'unpriced';
  }
  return batch;
};

export function defaultProcessors(): Processor[] {
  return [costProcessor];
}
