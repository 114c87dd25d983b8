// RFC 8785 (JCS) canonical JSON and SHA-256, the basis of every hash tamper evidence relies on.
import { hash } from 'node:crypto';
import canonicalize from 'canonicalize';

/** Canonical JSON; lone surrogates become U+FFFD, as storage writes them, so stored rows hash the same. */
export function canonicalJson(value: unknown): string {
  try {
    return canonicalize(value) ?? 'null';
  } catch (err) {
    // canonicalize refuses lone surrogates (JSON input may carry "\ud800"); rare, so only then walk the value.
    if (!(err instanceof Error) || !/surrogate/i.test(err.message)) throw err;
    return canonicalize(wellFormed(value)) ?? 'null';
  }
}

function wellFormed(v: unknown): unknown {
  if (typeof v === 'string') return v.toWellFormed();
  if (Array.isArray(v)) return v.map(wellFormed);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = Object.create(null); // a "__proto__" key stays a key
    for (const [k, x] of Object.entries(v)) out[k.toWellFormed()] = wellFormed(x);
    return out;
  }
  return v;
}

export function sha256(text: string): string {
  return hash('sha256', text, 'hex'); // one-shot: about half the cost of createHash().update().digest()
}

export const GENESIS = '0'.repeat(64);
