// The server's Ed25519 signing key: created on first start in DATA_DIR/keys (mode 0600), published by key id.
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, verify, type KeyObject } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sha256 } from './canonical.ts';

export interface PublicKeyInfo { keyId: string; algorithm: 'Ed25519'; publicKeyPem: string; publicKeyJwk: object }
export interface SigningKey { keyId: string; privateKey: KeyObject; publicKey: KeyObject }

function keyIdOf(pub: KeyObject): string {
  return `ed25519:${sha256(pub.export({ type: 'spki', format: 'der' }).toString('hex')).slice(0, 16)}`;
}

/** Loads the newest key from `dir`, creating one when there is none. Older keys stay for verification. */
export function loadSigningKey(dir: string): SigningKey {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files = readdirSync(dir).filter((f) => f.endsWith('.key.pem')).sort();
  let pem: string;
  if (files.length === 0) {
    const { privateKey } = generateKeyPairSync('ed25519');
    pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    writeFileSync(join(dir, `${Date.now()}.key.pem`), pem, { mode: 0o600 });
  } else {
    pem = readFileSync(join(dir, files[files.length - 1]!), 'utf8');
  }
  const privateKey = createPrivateKey(pem);
  const publicKey = createPublicKey(privateKey);
  return { keyId: keyIdOf(publicKey), privateKey, publicKey };
}

/** Every key in `dir` (current and retired), public halves only. */
export function publicKeys(dir: string): PublicKeyInfo[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((f) => f.endsWith('.key.pem')).sort().map((f) => {
    const pub = createPublicKey(createPrivateKey(readFileSync(join(dir, f), 'utf8')));
    return { keyId: keyIdOf(pub), algorithm: 'Ed25519', publicKeyPem: pub.export({ type: 'spki', format: 'pem' }).toString(), publicKeyJwk: pub.export({ format: 'jwk' }) };
  });
}

export function signText(key: SigningKey, text: string): string {
  return sign(null, Buffer.from(text), key.privateKey).toString('base64');
}

export function verifyText(publicKeyPem: string, text: string, signature: string): boolean {
  try {
    return verify(null, Buffer.from(text), createPublicKey(publicKeyPem), Buffer.from(signature, 'base64'));
  } catch {
    return false;
  }
}

/**
 * The secret that keys trace ids derived from redacted request ids (traceIdForRequestId): TRACEGATE_ID_HASH_KEY
 * when set (collectors sharing a database must share it, or a replay landing on another one would not collapse),
 * otherwise `id-hash.key` in `dir`, created on first start (mode 0600).
 */
export function loadIdHashKey(dir: string, configured?: string): Buffer {
  if (configured) return Buffer.from(configured);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'id-hash.key');
  if (!existsSync(file)) {
    // Written whole under a temporary name, then linked into place: two processes starting together agree on
    // the first one linked, and no reader sees a half-written key.
    const tmp = join(dir, `.id-hash.key.${process.pid}.${randomBytes(4).toString('hex')}`);
    writeFileSync(tmp, randomBytes(32).toString('hex'), { mode: 0o600 });
    try { linkSync(tmp, file); } catch (err) { if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; } finally { unlinkSync(tmp); }
  }
  const key = readFileSync(file, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/.test(key)) throw new Error(`${file} is not a 64-hex-digit key; remove it to have a new one made, or set TRACEGATE_ID_HASH_KEY`);
  return Buffer.from(key);
}
