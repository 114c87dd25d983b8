// Webhook signing secrets per workspace (POST /api/ingest/webhooks verifies deliveries with them): several active at
// once so senders can rotate, each revocable. HMAC needs the secret itself, so storage keeps it sealed with the
// collectors' key (processors/secret-box.ts); the secret is shown once, when it is made, and never logged.
// Shared by the CLI and the loopback admin routes; every change is audited.
import { randomBytes } from 'node:crypto';
import { TracegateError } from '../../core/errors.ts';
import type { Storage, WebhookSecretRecord } from '../../core/ports/storage.ts';
import { SYSTEM_WORKSPACE } from '../../processors/audit.ts';
import type { SecretBox } from '../../processors/secret-box.ts';
import { type AuditSink, workspaceId } from './admin.ts';

export const SECRET_ID_RE = /^whs_[0-9a-f]{16}$/;

/** What binds a sealed secret to its row: a sealed value copied to another id or workspace does not open. */
const aadOf = (secretId: string, workspaceId: string) => `webhook-secret\n${secretId}\n${workspaceId}`;

const event = (wsId: string, action: string, details: object) => ({
  workspaceId: wsId,
  atMs: Date.now(),
  actor: 'cli',
  action,
  route: 'admin',
  outcome: 'ok',
  accepted: 0,
  rejected: 0,
  details: JSON.stringify(details),
});

/** A new secret for an existing workspace: `whsec_` and 32 random bytes (base64url); returned once, stored sealed. */
export async function addWebhookSecret(storage: Storage, box: SecretBox, workspace: string, audit: AuditSink) {
  const wsId = await workspaceId(storage, workspace); // 404 when there is none
  if (wsId === SYSTEM_WORKSPACE)
    throw new TracegateError('invalid', 'invalid_request', `${SYSTEM_WORKSPACE} takes no webhook secrets`);
  const secretId = `whs_${randomBytes(8).toString('hex')}`;
  const secret = `whsec_${randomBytes(32).toString('base64url')}`;
  const rec: WebhookSecretRecord = {
    secretId,
    workspaceId: wsId,
    sealed: box.seal(secret, aadOf(secretId, wsId)),
    createdAtMs: Date.now(),
    revokedAtMs: 0,
  };
  await storage.putWebhookSecret(rec);
  await audit(event(wsId, 'webhook_secret.create', { secretId }));
  return { workspaceId: wsId, secretId, secret };
}

/** Secrets as shown to an operator: ids and times, never the secret. */
export async function listWebhookSecrets(storage: Storage, workspace?: string) {
  const wsId = workspace === undefined ? undefined : await workspaceId(storage, workspace);
  return (await storage.listWebhookSecrets(wsId)).map(({ sealed: _s, ...rest }) => rest);
}

/** When the secret was revoked (the first revocation's time); null when there is no such secret. */
export async function revokeWebhookSecret(
  storage: Storage,
  secretId: string,
  audit: AuditSink,
): Promise<number | null> {
  if (!SECRET_ID_RE.test(secretId)) return null;
  const rec = await storage.getWebhookSecret(secretId);
  if (!rec || !(await storage.revokeWebhookSecret(secretId, Date.now()))) return null;
  const after = await storage.getWebhookSecret(secretId);
  if (rec.revokedAtMs === 0) await audit(event(rec.workspaceId, 'webhook_secret.revoke', { secretId }));
  return after?.revokedAtMs ?? rec.revokedAtMs;
}

export interface ActiveSecret {
  secretId: string;
  key: Buffer;
}

/**
 * A workspace's active secrets, opened, as the webhook receiver uses them: kept for `ttlMs` (a secret revoked
 * through another collector stops verifying within it; through this one, at once: forget()).
 */
export class WebhookSecrets {
  private readonly storage: Pick<Storage, 'listWebhookSecrets'>;
  private readonly loadBox: () => SecretBox;
  private opened: SecretBox | null = null;
  private readonly ttlMs: number;
  private readonly cache = new Map<string, { at: number; secrets: ActiveSecret[] }>();
  private static readonly MAX_WORKSPACES = 10_000;

  /** `box` is called on first use (it may create the key file). */
  constructor(storage: Pick<Storage, 'listWebhookSecrets'>, box: () => SecretBox, ttlMs = 5_000) {
    this.storage = storage;
    this.loadBox = box;
    this.ttlMs = ttlMs;
  }

  /** The collectors' key, loaded once. */
  box(): SecretBox {
    this.opened ??= this.loadBox();
    return this.opened;
  }

  /** `read` runs the storage lookup (the routes' read deadline: an outage is a 503). */
  async active(wsId: string, read: <T>(work: () => Promise<T>) => Promise<T>): Promise<ActiveSecret[]> {
    const hit = this.cache.get(wsId);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.secrets;
    const stored = await read(() => this.storage.listWebhookSecrets(wsId));
    const live = stored.filter((s) => s.revokedAtMs === 0 && s.workspaceId === wsId);
    // Opened only when there is one: a workspace with none never makes the key file.
    const secrets = live.map((s) => ({
      secretId: s.secretId,
      key: Buffer.from(this.box().open(s.sealed, aadOf(s.secretId, s.workspaceId))),
    }));
    this.cache.delete(wsId);
    this.cache.set(wsId, { at: Date.now(), secrets });
    if (this.cache.size > WebhookSecrets.MAX_WORKSPACES) this.cache.delete(this.cache.keys().next().value!);
    return secrets;
  }

  forget(wsId?: string): void {
    if (wsId === undefined) this.cache.clear();
    else this.cache.delete(wsId);
  }
}
