// Where to cut a string that is too long to store whole.
import { scanText } from './scan.ts';

/** Characters read on each side of a cut: longer than the values a cut could split (keys, addresses, cards). */
const AROUND = 8192;

/**
 * `cut`, moved back to the start of any PII or secret value it would split: the first 39 characters of a
 * 40-character key, an address without its TLD or twelve digits of a card no longer match the detector that
 * redacts them whole, and would be stored in the clear.
 */
export function cutOutsideValues(text: string, cut: number): number {
  if (cut <= 0 || cut >= text.length) return cut;
  const from = Math.max(0, cut - AROUND);
  const found = scanText(text.slice(from, Math.min(text.length, cut + AROUND)), { detectors: ['pii', 'secret'] });
  for (let moved = true; moved; ) {
    moved = false;
    for (const f of found) {
      if (from + f.start < cut && from + f.end > cut) {
        cut = from + f.start;
        moved = true;
      }
    }
  }
  return beforeEscapedWord(text, cut, from);
}

/**
 * JSON text written with \u escapes (`tcz@\u4f8b\u5b50.\u516c\u53f8`) hides its values from the detectors
 * until unescaped, which a cut-off document no longer can be whole: a word with escapes that the cut runs through
 * is left out entirely (back to the white space or quote before it).
 */
function beforeEscapedWord(text: string, cut: number, from: number): number {
  if (/[\s"]/.test(text[cut]!)) return cut; // the cut falls between words
  let start = cut;
  while (start > from && !/[\s"]/.test(text[start - 1]!)) start--;
  return text.slice(start, cut).includes('\\u') ? start : cut;
}
