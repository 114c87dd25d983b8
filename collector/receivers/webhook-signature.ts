// Signed webhook deliveries (spec, Authentication): `X-Service-Delivery-Timestamp: <unix seconds>` and
// `X-Service-Signature: v1=<lowercase hex HMAC-SHA256>` over `<timestamp>.<raw body bytes>` (Stripe's construction),
// one or more v1 values (a sender rotating its secret signs with both), any one matching any active secret.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { HttpError } from '../http/errors.ts';

export const TIMESTAMP_HEADER = 'x-service-delivery-timestamp';
export const SIGNATURE_HEADER = 'x-service-signature';

export interface SignedDelivery {
  timestamp: string;
  /** The v1 signatures sent, 32 bytes each. */
  signatures: Buffer[];
}

const malformed = (header: string, message: string) =>
  new HttpError(400, 'malformed_signature', `${header}: ${message}`, { header });

/**
 * The signature headers, checked: null when neither is sent (an unsigned delivery). One without the other, a
 * timestamp that is not 1-10 digits, an entry that is not `scheme=value`, a v1 value that is not 64 hex digits, or
 * no v1 value at all: 400 malformed_signature. Entries of other schemes are ignored.
 */
export function signedDelivery(timestamp: string | undefined, signature: string | undefined): SignedDelivery | null {
  if (timestamp === undefined && signature === undefined) return null;
  if (timestamp === undefined)
    throw malformed('X-Service-Delivery-Timestamp', `missing, but ${SIGNATURE_HEADER} is sent`);
  if (signature === undefined) throw malformed('X-Service-Signature', `missing, but ${TIMESTAMP_HEADER} is sent`);
  if (!/^\d{1,10}$/.test(timestamp.trim()))
    throw malformed('X-Service-Delivery-Timestamp', 'must be the delivery time in unix seconds (1-10 digits)');
  const signatures: Buffer[] = [];
  const entries = signature.split(/[,\s]+/).filter(Boolean);
  if (entries.length > 16) throw malformed('X-Service-Signature', 'more than 16 entries');
  for (const entry of entries) {
    const m = /^([A-Za-z0-9]{1,16})=(.*)$/.exec(entry);
    if (!m) throw malformed('X-Service-Signature', 'entries are scheme=value (v1=<64 hex digits>), comma-separated');
    if (m[1] !== 'v1') continue;
    if (!/^[0-9a-fA-F]{64}$/.test(m[2]!)) throw malformed('X-Service-Signature', 'a v1 value is 64 hex digits');
    signatures.push(Buffer.from(m[2]!, 'hex'));
  }
  if (signatures.length === 0) throw malformed('X-Service-Signature', 'no v1= signature');
  return { timestamp: timestamp.trim(), signatures };
}

/** HMAC-SHA256 of `<timestamp>.<raw body>` under `key`. */
export function sign(key: Buffer | string, timestamp: string, raw: Buffer): Buffer {
  return createHmac('sha256', key).update(`${timestamp}.`).update(raw).digest();
}

/**
 * The id of the first secret one of the signatures verifies under, or null. Every signature is compared with every
 * secret's HMAC in constant time (equal lengths: 32 bytes each).
 */
export function verifyingSecret(
  d: SignedDelivery,
  raw: Buffer,
  secrets: ReadonlyArray<{ secretId: string; key: Buffer }>,
): string | null {
  let found: string | null = null;
  for (const s of secrets) {
    const expected = sign(s.key, d.timestamp, raw);
    for (const given of d.signatures) if (timingSafeEqual(expected, given) && found === null) found = s.secretId;
  }
  return found;
}

/** Seconds between the delivery's timestamp and now, either way. */
export function skewSeconds(d: SignedDelivery, nowMs: number): number {
  return Math.abs(nowMs / 1000 - Number(d.timestamp));
}

/** What a replay repeats: the signed content (`<timestamp>.<raw body>`), hashed. */
export function deliveryKey(d: SignedDelivery, raw: Buffer): string {
  return createHash('sha256').update(`${d.timestamp}.`).update(raw).digest('hex');
}
