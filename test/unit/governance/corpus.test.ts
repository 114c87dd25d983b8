// Precision and recall of scanText over the labelled corpus, per detector and per category.
import { expect } from 'chai';
import { CATEGORY_DETECTOR, DETECTOR_KINDS, scanText } from '../../../processors/governance/index.ts';
import { CORPUS, NEGATIVES, POSITIVES } from './corpus.ts';

interface Tally {
  tp: number;
  fp: number;
  fn: number;
}
const ratio = (a: number, b: number) => (b === 0 ? 1 : a / b);
const precision = (t: Tally) => ratio(t.tp, t.tp + t.fp);
const recall = (t: Tally) => ratio(t.tp, t.tp + t.fn);

function evaluate() {
  const byCategory = new Map<string, Tally>();
  const errors: string[] = [];
  const tally = (c: string) => {
    let t = byCategory.get(c);
    if (!t) byCategory.set(c, (t = { tp: 0, fp: 0, fn: 0 }));
    return t;
  };
  for (const sample of CORPUS) {
    const got = new Set(scanText(sample.text).map((f) => f.category));
    const want = new Set(sample.expect);
    for (const c of got) {
      if (want.has(c)) tally(c).tp++;
      else {
        tally(c).fp++;
        errors.push(`FP ${c}: ${JSON.stringify(sample.text.slice(0, 90))}`);
      }
    }
    for (const c of want)
      if (!got.has(c)) {
        tally(c).fn++;
        errors.push(`FN ${c}: ${JSON.stringify(sample.text.slice(0, 90))}`);
      }
  }
  const byDetector = new Map<string, Tally>(DETECTOR_KINDS.map((d) => [d, { tp: 0, fp: 0, fn: 0 }]));
  for (const [c, t] of byCategory) {
    const d = byDetector.get(CATEGORY_DETECTOR[c] ?? 'unknown') ?? { tp: 0, fp: 0, fn: 0 };
    d.tp += t.tp;
    d.fp += t.fp;
    d.fn += t.fn;
    byDetector.set(CATEGORY_DETECTOR[c] ?? 'unknown', d);
  }
  return { byCategory, byDetector, errors };
}

function table(title: string, rows: Map<string, Tally>): string {
  const lines = [`${title.padEnd(18)}   TP   FP   FN  precision  recall`];
  for (const [k, t] of [...rows].sort()) {
    lines.push(
      `${k.padEnd(18)} ${String(t.tp).padStart(4)} ${String(t.fp).padStart(4)} ${String(t.fn).padStart(4)}  ${precision(t).toFixed(3).padStart(9)}  ${recall(t).toFixed(3).padStart(6)}`,
    );
  }
  return lines.join('\n');
}

describe('governance corpus', () => {
  const result = evaluate();

  before(() => {
    console.log(`\n    corpus: ${POSITIVES.length} positive samples, ${NEGATIVES.length} negative samples`);
    console.log(table('detector', result.byDetector).replace(/^/gm, '    '));
    console.log(table('category', result.byCategory).replace(/^/gm, '    '));
    if (result.errors.length > 0) console.log(result.errors.map((e) => `    ${e}`).join('\n'));
  });

  it('has at least 150 positives and 150 negatives', () => {
    expect(POSITIVES.length).to.be.at.least(150);
    expect(NEGATIVES.length).to.be.at.least(150);
  });

  for (const detector of DETECTOR_KINDS) {
    it(`${detector}: precision ≥ 0.95 and recall ≥ 0.9`, () => {
      const t = result.byDetector.get(detector)!;
      expect(t.tp, 'detector has positives').to.be.greaterThan(20);
      expect(precision(t), 'precision').to.be.at.least(0.95);
      expect(recall(t), 'recall').to.be.at.least(0.9);
    });
  }

  it('covers every category the detectors emit', () => {
    for (const category of Object.keys(CATEGORY_DETECTOR))
      expect(result.byCategory.get(category)?.tp ?? 0, category).to.be.greaterThan(0);
  });
});
