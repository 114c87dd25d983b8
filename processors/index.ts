// The processor chain run on every record before it is spooled.
import type { SpanRecord } from '../collector/record.ts';
import { priceUsd } from './cost.ts';

export type Processor = (records: SpanRecord[]) => SpanRecord[] | Promise<SpanRecord[]>;

/** Fills costUsd from the price table when the client sent none (0 for unknown/local models). */
export const costProcessor: Processor = (records) => {
  for (const r of records) {
    if (r.attributes['tracegate.cost_source'] !== undefined || !r.model || r.costUsd > 0) continue;
    if (r.promptTokens === 0 && r.completionTokens === 0) continue;
    const cost = priceUsd(r.model, r.provider, { input: r.promptTokens, output: r.completionTokens });
    r.costUsd = cost;
    r.attributes['tracegate.cost_source'] = cost > 0 ? 'price_table' : 'unpriced';
  }
  return records;
};

export function defaultProcessors(): Processor[] {
  return [costProcessor];
}
