// RFC 8785 (JCS) canonical JSON and SHA-256, the basis of every hash tamper evidence relies on.
import { hash } from 'node:crypto';
import canonicalize from 'canonicalize';

/**
 * Canonical JSON of a value as storage writes it, so stored rows hash the same: lone surrogates become
 * U+FFFD and non-finite numbers null (JSON.stringify's rule; JSON input such as 1e400 parses to Infinity).
 */
export function canonicalJson(value: unknown): string {
  try {
    return canonicalize(value) ?? 'null';
  } catch (err) {
    // canonicalize refuses both; rare, so only then walk the value.
    if (!(err instanceof Error) || !/surrogate|NaN|Infinity/i.test(err.message)) throw err;
    return canonicalize(asStored(value)) ?? 'null';
  }
}

function asStored(v: unknown): unknown {
  if (typeof v === 'string') return v.toWellFormed();
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (Array.isArray(v)) return v.map(asStored);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = Object.create(null); // a "__proto__" key stays a key
    for (const [k, x] of Object.entries(v)) out[k.toWellFormed()] = asStored(x);
    return out;
  }
  return v;
}

export function sha256(text: string): string {
  return hash('sha256', text, 'hex'); // one-shot: about half the cost of createHash().update().digest()
}

export const GENESIS = '0'.repeat(64);
