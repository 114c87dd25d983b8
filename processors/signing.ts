// The server's Ed25519 signing key: created on first start in DATA_DIR/keys (mode 0600), published by key id.
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';
import {
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { sha256 } from './canonical.ts';
import type { Storage } from '../core/ports/storage.ts';

export interface PublicKeyInfo {
  keyId: string;
  algorithm: 'Ed25519';
  publicKeyPem: string;
  publicKeyJwk: object;
}
export interface SigningKey {
  keyId: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

function keyIdOf(pub: KeyObject): string {
  return `ed25519:${sha256(pub.export({ type: 'spki', format: 'der' }).toString('hex')).slice(0, 16)}`;
}

/** Loads the newest key from `dir`, creating one when there is none. Older keys stay for verification. */
export function loadSigningKey(dir: string): SigningKey {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.key.pem'))
    .sort();
  let privateKey: KeyObject;
  if (files.length === 0) {
    ({ privateKey } = generateKeyPairSync('ed25519'));
    writeWhole(join(dir, `${Date.now()}.key.pem`), privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
  } else {
    privateKey = readKey(join(dir, files[files.length - 1]!));
  }
  const publicKey = createPublicKey(privateKey);
  return { keyId: keyIdOf(publicKey), privateKey, publicKey };
}

/** Every key in `dir` (current and retired), public halves only. */
export function publicKeys(dir: string): PublicKeyInfo[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.key.pem'))
    .sort()
    .map((f) => keyInfo(createPublicKey(readKey(join(dir, f)))));
}

function readKey(file: string): KeyObject {
  try {
    return createPrivateKey(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(
      `${file} is not a readable Ed25519 private key (${(err as Error).message}); restore it from a backup, or, if it never signed anything, remove it`,
      { cause: err },
    );
  }
}

/**
 * Written whole under a temporary name, fsync'd, then linked into place: a crash or a full disk leaves either no
 * file or the whole key, never an empty one every later start would stumble on.
 */
export function writeWhole(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    const fd = openSync(tmp, 'wx', 0o600);
    try {
      writeFileSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    linkSync(tmp, file);
    const dir = openSync(dirname(file), 'r');
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    } // the new name survives a power loss too
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      /* never created */
    }
  }
}

function keyInfo(pub: KeyObject): PublicKeyInfo {
  return {
    keyId: keyIdOf(pub),
    algorithm: 'Ed25519',
    publicKeyPem: pub.export({ type: 'spki', format: 'pem' }).toString(),
    publicKeyJwk: pub.export({ format: 'jwk' }),
  };
}

/**
 * The keys a checker accepts: this collector's own (DATA_DIR/keys) plus those the other collectors sharing the
 * storage published there. A published key counts only under its own id (the id is a hash of the key), so a row
 * cannot pass one key off as another; whoever can write the database can add a key, as they can add records.
 */
export async function verificationKeys(
  storage: Pick<Storage, 'publishedKeys' | 'kind'>,
  dir: string,
): Promise<PublicKeyInfo[]> {
  const keys = new Map(publicKeys(dir).map((k) => [k.keyId, k]));
  // The embedded store has one collector, whose keys are all in `dir`: a key found only in its file is not trusted.
  if (storage.kind !== 'clickhouse') return [...keys.values()];
  for (const p of await storage.publishedKeys()) {
    if (keys.has(p.keyId)) continue;
    let pub: KeyObject;
    try {
      pub = createPublicKey(p.publicKeyPem);
    } catch {
      continue;
    }
    if (pub.asymmetricKeyType !== 'ed25519') continue;
    const info = keyInfo(pub);
    if (info.keyId === p.keyId) keys.set(p.keyId, info);
  }
  return [...keys.values()].sort((a, b) => (a.keyId < b.keyId ? -1 : a.keyId > b.keyId ? 1 : 0));
}

/** Publish this collector's public keys in storage, retrying every retryMs while it is unreachable; returns stop(). */
export function publishKeys(
  storage: Pick<Storage, 'publishKeys'>,
  dir: string,
  log: { warn(o: object, m: string): void },
  retryMs = 30_000,
): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const attempt = () => {
    const retry = (err: unknown) => {
      if (stopped) return;
      log.warn(
        { err, retryInMs: retryMs },
        "verification keys not yet published to storage (other collectors cannot check this one's chains until they are)",
      );
      timer = setTimeout(attempt, retryMs);
      timer.unref();
    };
    try {
      const keys = publicKeys(dir).map((k) => ({
        keyId: k.keyId,
        publicKeyPem: k.publicKeyPem,
        publishedAtMs: Date.now(),
      }));
      storage.publishKeys(keys).catch(retry);
    } catch (err) {
      retry(err); // a key file unreadable now (publicKeys throws at once): not an uncaught error in a timer
    }
  };
  attempt();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
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
      `${file} is not a 64-hex-digit key; remove it to have a new one made, or set TRACEGATE_ID_HASH_KEY`,
    );
  return Buffer.from(key);
}
