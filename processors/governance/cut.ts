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
  for (let moved = true; moved;) {
    moved = false;
    for (const f of found) {
      if (from + f.start < cut && from + f.end > cut) { cut = from + f.start; moved = true; }
    }
  }
  return cut;
}
