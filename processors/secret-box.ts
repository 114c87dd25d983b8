// Secrets the server must read back (webhook signing secrets: HMAC needs the secret itself) are kept encrypted with
// the collectors' key: AES-256-GCM, a random 96-bit nonce each, bound to what they belong to (the additional data).
// The key is TRACEGATE_SECRETS_KEY, or DATA_DIR/keys/secrets.key made on first use (collectors sharing storage must
// share one key: set TRACEGATE_SECRETS_KEY on each).
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TracegateError } from '../core/errors.ts';
import { writeWhole } from './signing.ts';

/** `v1.<key id>.<nonce>.<tag>.<ciphertext>`, base64url parts: the key id names the key without revealing it. */
const VERSION = 'v1';

export interface SecretBox {
  /** A short public id of the key (a hash of it), stored with each sealed secret. */
  readonly keyId: string;
  seal(plaintext: string, aad: string): string;
  /** Throws a TracegateError (unavailable, secrets_key_mismatch / secret_unreadable) when this key cannot open it. */
  open(sealed: string, aad: string): string;
}

/** The 32-byte key: `configured` (64 hex digits) when set, else `secrets.key` in `dir`, created on first use (0600). */
export function loadSecretsKey(dir: string, configured?: string): Buffer {
  if (configured) return Buffer.from(configured, 'hex');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'secrets.key');
  if (!existsSync(file)) {
    // Two processes starting together agree on the first one linked (writeWhole), and no reader sees half a key.
    try {
      writeWhole(file, randomBytes(32).toString('hex'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  const key = readFileSync(file, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/.test(key))
    throw new Error(
      `${file} is not a 64-hex-digit key; remove it to have a new one made, or set TRACEGATE_SECRETS_KEY`,
    );
  return Buffer.from(key, 'hex');
}

export function secretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new RangeError('the secrets key must be 32 bytes');
  const keyId = createHash('sha256').update('tracegate secrets key\n').update(key).digest('hex').slice(0, 12);
  const unreadable = (code: string, message: string) =>
    new TracegateError('unavailable', code, message, { retryAfterSeconds: 60 });
  return {
    keyId,
    seal(plaintext, aad) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(aad));
      const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      const parts = [iv, cipher.getAuthTag(), ct].map((b) => b.toString('base64url'));
      return [VERSION, keyId, ...parts].join('.');
    },
    open(sealed, aad) {
      const [version, id, iv, tag, ct] = sealed.split('.');
      if (version !== VERSION || !id || iv === undefined || tag === undefined || ct === undefined)
        throw unreadable('secret_unreadable', 'a stored secret is not in a form this server reads');
      if (id !== keyId)
        throw unreadable(
          'secrets_key_mismatch',
          `a stored secret was sealed with another key (${id}; this server's is ${keyId}): collectors sharing storage must share TRACEGATE_SECRETS_KEY`,
        );
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
        decipher.setAAD(Buffer.from(aad));
        decipher.setAuthTag(Buffer.from(tag, 'base64url'));
        return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
      } catch {
        throw unreadable('secret_unreadable', 'a stored secret failed its integrity check (altered in storage?)');
      }
    },
  };
}
