// RFC 8785 (JCS) canonical JSON and SHA-256, the basis of every hash tamper evidence relies on.
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/** Canonical JSON; lone surrogates become U+FFFD, as storage writes them, so stored rows hash the same. */
export function canonicalJson(value: unknown): string {
  return (canonicalize(value) ?? 'null').toWellFormed();
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export const GENESIS = '0'.repeat(64);
