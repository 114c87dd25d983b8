// API keys: `tg_<keyId>_<secret>`. Only SHA-256(key) is stored; the key is shown once.
// 256 bits of entropy make a fast hash sufficient (slow KDFs are for low-entropy passwords).
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256 } from '../../processors/canonical.ts';
import type { ApiKeyRecord } from '../../core/ports/storage.ts';

const KEY_RE = /^tg_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

export function newKey(): { keyId: string; key: string } {
  const keyId = randomBytes(8).toString('hex');
  return { keyId, key: `tg_${keyId}_${randomBytes(32).toString('base64url')}` };
}

export function parseKey(key: string): { keyId: string } | null {
  const m = KEY_RE.exec(key);
  return m ? { keyId: m[1]! } : null;
}

export function keyMatches(key: string, record: ApiKeyRecord): boolean {
  const a = Buffer.from(sha256(key), 'hex');
  const b = Buffer.from(record.hash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}
