// What the CLI can do, two ways: through a running server's loopback admin routes (it holds the embedded
// database), or directly on storage when no server runs on this data dir.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { Agent, fetch } from 'undici';
import { join } from 'node:path';
import type { Config } from '../../config/index.ts';
import { createStorage } from '../../storage/index.ts';
import { DataDirInUse, lockDataDir } from '../../platform/data-dir-lock.ts';
import type { Storage } from '../../core/ports/storage.ts';
import {
  createKey,
  listKeys,
  parseSettingsPatch,
  revokeKey,
  showSettings,
  updateSettings,
  workspaceId,
  type AuditSink,
} from '../../collector/workspaces/admin.ts';
import { SettingsStore, type SettingsPatch } from '../../collector/workspaces/settings.ts';
import { AuditChain } from '../../processors/audit.ts';
import { LastKnown, lastKnownFile } from '../../collector/workspaces/last-known.ts';
import { verificationKeys } from '../../processors/signing.ts';
import { checkedExport, exportOptions } from '../../collector/routes/export.ts';
import { exportTraining } from '../../training/export.ts';
import { verifyWorkspace } from '../../processors/verify-workspace.ts';
import { loadSecretsKey, secretBox } from '../../processors/secret-box.ts';
import {
  addWebhookSecret,
  listWebhookSecrets,
  revokeWebhookSecret,
} from '../../collector/workspaces/webhook-secrets.ts';
import {
  createSignInLink,
  defaultOrigin,
  listSessions,
  revokeSession,
  type SessionView,
  signInLink,
} from '../../collector/workspaces/sessions.ts';

type Created = Awaited<ReturnType<typeof createKey>>;
type KeyList = Awaited<ReturnType<typeof listKeys>>;
type Shown = ReturnType<typeof showSettings>;
export type VerifyResult = Awaited<ReturnType<typeof verifyWorkspace>>;
type AddedSecret = Awaited<ReturnType<typeof addWebhookSecret>>;
type SecretList = Awaited<ReturnType<typeof listWebhookSecrets>>;
type LinkToken = Awaited<ReturnType<typeof createSignInLink>>;
/** A one-time sign-in link for the browser. */
export interface SignInLink {
  workspaceId: string;
  workspace: string;
  link: string;
  expiresAt: string;
}

export interface Ops {
  createKey(workspace: string): Promise<Created>;
  listKeys(workspace?: string): Promise<KeyList>;
  revokeKey(keyId: string): Promise<boolean>;
  settings(workspace: string): Promise<Shown>;
  updateSettings(workspace: string, patch: SettingsPatch): Promise<Shown>;
  verify(workspace: string): Promise<VerifyResult>;
  verifiableWorkspaces(): Promise<string[]>;
  addWebhookSecret(workspace: string): Promise<AddedSecret>;
  listWebhookSecrets(workspace?: string): Promise<SecretList>;
  /** When the secret was revoked; null when there is no such secret. */
  revokeWebhookSecret(secretId: string): Promise<number | null>;
  createSignInLink(workspace: string): Promise<SignInLink>;
  listSessions(workspace?: string): Promise<SessionView[]>;
  revokeSession(sessionId: string): Promise<boolean>;
  /** The training export's NDJSON for a workspace; `params`: GET /api/export/training's query parameters. */
  exportTraining(workspace: string, params: Record<string, string>): Promise<AsyncIterable<string | Uint8Array>>;
  close(): Promise<void>;
}

/** The link's origin: TRACEGATE_PUBLIC_ORIGIN, else this machine at the server's port. */
function toLink(config: Config, port: number, t: LinkToken): SignInLink {
  const origin = config.PUBLIC_ORIGIN ?? defaultOrigin(config.HOST, port);
  return {
    workspaceId: t.workspaceId,
    workspace: t.workspace,
    link: signInLink(origin, t.token),
    expiresAt: t.expiresAt,
  };
}

/** Written by a running server: its loopback admin port (the main port unless it listens on another address only). */
interface ServerFile {
  pid: number;
  port: number;
  adminPort?: number;
  adminToken: string;
}

/**
 * The server holding DATA_DIR's lock, when server.json names that same process. A server.json left by a killed
 * server whose pid now belongs to another program names a pid the lock file does not, or a lock nobody holds.
 */
function runningServer(config: Config): ServerFile | null {
  try {
    const s = JSON.parse(readFileSync(join(config.DATA_DIR, 'server.json'), 'utf8')) as ServerFile;
    if (readFileSync(join(config.DATA_DIR, 'LOCK'), 'utf8').trim() !== String(s.pid)) return null;
    process.kill(s.pid, 0);
    return s;
  } catch {
    return null;
  }
}

class RemoteOps implements Ops {
  private readonly s: ServerFile;
  private readonly config: Config;
  constructor(s: ServerFile, config: Config) {
    this.s = s;
    this.config = config;
  }
  /** `patient`: no time limit on the answer (verifying a large workspace takes minutes, past fetch's 300 s). */
  private async call<T>(method: string, path: string, body?: unknown, patient = false): Promise<T> {
    const port = this.s.adminPort ?? this.s.port;
    let res: Awaited<ReturnType<typeof fetch>>;
    try {
      res = await fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.s.adminToken}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        ...(patient ? { dispatcher: new Agent({ headersTimeout: 0, bodyTimeout: 0 }) } : {}),
      });
    } catch (err) {
      // Most often a server stopping (it closes its port before it lets go of DATA_DIR).
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new Error(
        `the tracegate server on this DATA_DIR (pid ${this.s.pid}, port ${port}) did not answer` +
          ` (${cause?.code ?? cause?.message ?? (err as Error).message}); if it is stopping, run the command again once it has stopped`,
      );
    }
    const json = (await res.json()) as { error?: { message: string } };
    if (!res.ok) throw new Error(json.error?.message ?? `server answered ${res.status}`);
    return json as T;
  }
  private q = (ws: string) => `?workspace=${encodeURIComponent(ws)}`;
  createKey(workspace: string) {
    return this.call<Created>('POST', '/admin/keys', { workspace });
  }
  async listKeys(workspace?: string) {
    return (await this.call<{ keys: KeyList }>('GET', `/admin/keys${workspace ? this.q(workspace) : ''}`)).keys;
  }
  async revokeKey(keyId: string) {
    try {
      await this.call('POST', `/admin/keys/${encodeURIComponent(keyId)}/revoke`);
      return true;
    } catch (e) {
      if (/no such key/.test((e as Error).message)) return false;
      throw e;
    }
  }
  settings(ws: string) {
    return this.call<Shown>('GET', `/admin/settings${this.q(ws)}`);
  }
  updateSettings(ws: string, patch: SettingsPatch) {
    return this.call<Shown>('PATCH', `/admin/settings${this.q(ws)}`, patch);
  }
  verify(ws: string) {
    return this.call<VerifyResult>('GET', `/admin/verify${this.q(ws)}`, undefined, true);
  }
  async verifiableWorkspaces() {
    return (await this.call<{ workspaces: string[] }>('GET', '/admin/workspaces')).workspaces;
  }
  addWebhookSecret(workspace: string) {
    return this.call<AddedSecret>('POST', '/admin/webhook-secrets', { workspace });
  }
  async listWebhookSecrets(workspace?: string) {
    const path = `/admin/webhook-secrets${workspace ? this.q(workspace) : ''}`;
    return (await this.call<{ secrets: SecretList }>('GET', path)).secrets;
  }
  async revokeWebhookSecret(secretId: string) {
    try {
      const path = `/admin/webhook-secrets/${encodeURIComponent(secretId)}/revoke`;
      return (await this.call<{ revokedAtMs: number }>('POST', path)).revokedAtMs;
    } catch (e) {
      if (/no such webhook secret/.test((e as Error).message)) return null;
      throw e;
    }
  }
  async createSignInLink(workspace: string) {
    return toLink(this.config, this.s.port, await this.call<LinkToken>('POST', '/admin/sessions', { workspace }));
  }
  async listSessions(workspace?: string) {
    const q = workspace ? this.q(workspace) : '';
    return (await this.call<{ sessions: SessionView[] }>('GET', `/admin/sessions${q}`)).sessions;
  }
  async revokeSession(sessionId: string) {
    try {
      await this.call('POST', `/admin/sessions/${encodeURIComponent(sessionId)}/revoke`);
      return true;
    } catch (e) {
      if (/no such session/.test((e as Error).message)) return false;
      throw e;
    }
  }
  async exportTraining(workspace: string, params: Record<string, string>) {
    const port = this.s.adminPort ?? this.s.port;
    const q = new URLSearchParams({ ...params, workspace });
    const res = await fetch(`http://127.0.0.1:${port}/admin/export/training?${q}`, {
      headers: { authorization: `Bearer ${this.s.adminToken}` },
      dispatcher: new Agent({ headersTimeout: 0, bodyTimeout: 0 }),
    });
    if (!res.ok) {
      const json = (await res.json().catch(() => ({}))) as { error?: { message: string } };
      throw new Error(json.error?.message ?? `server answered ${res.status}`);
    }
    if (!res.body) throw new Error('the server answered no body');
    // A server failing mid-export cuts its chunked answer short: reading it then throws ("terminated").
    return res.body as AsyncIterable<Uint8Array>;
  }
  async close() {}
}

class LocalOps implements Ops {
  private readonly storage: Storage;
  private readonly config: Config;
  private readonly store: SettingsStore;
  private readonly audit: AuditSink;
  constructor(storage: Storage, config: Config) {
    this.storage = storage;
    this.config = config;
    this.store = new SettingsStore(storage, config, 0);
    // Each run's records link to the workspace's newest audit record, so deleting an earlier change breaks a link.
    const previous: Record<string, { hash: string }> = {};
    const chain = new AuditChain(`cli_${Date.now().toString(36)}_${process.pid}`, previous);
    this.audit = async (e) => {
      if (!Object.hasOwn(previous, e.workspaceId)) {
        const newest = (await storage.listAudit(e.workspaceId, { limit: 1 })).items[0];
        if (newest) previous[e.workspaceId] = { hash: newest.hash };
      }
      await storage.insertEnrichment([chain.append(e)]);
    };
  }
  createKey(workspace: string) {
    return createKey(this.storage, workspace, this.audit);
  }
  listKeys(workspace?: string) {
    return listKeys(this.storage, workspace);
  }
  async revokeKey(keyId: string) {
    const at = await revokeKey(this.storage, keyId, this.audit);
    if (at === null) return false;
    // The server's copy for storage outages (collector/workspaces/last-known.ts) must not let the key in at its next start.
    await new LastKnown(lastKnownFile(this.config.DATA_DIR)).revokeKey(keyId, at);
    return true;
  }
  async settings(ws: string) {
    const s = await this.store.forWorkspace(await workspaceId(this.storage, ws));
    return showSettings(s.doc, s.version);
  }
  async updateSettings(ws: string, patch: SettingsPatch) {
    const id = await workspaceId(this.storage, ws);
    // As the admin route gets it: through JSON (undefined fields left out), validated with the same message.
    return updateSettings(this.store, id, parseSettingsPatch(JSON.parse(JSON.stringify(patch))), this.audit);
  }
  async verify(ws: string) {
    return verifyWorkspace(
      this.storage,
      await workspaceId(this.storage, ws),
      await verificationKeys(this.storage, join(this.config.DATA_DIR, 'keys')),
    );
  }
  verifiableWorkspaces() {
    return this.storage.verificationWorkspaces();
  }
  addWebhookSecret(workspace: string) {
    const box = secretBox(loadSecretsKey(join(this.config.DATA_DIR, 'keys'), this.config.SECRETS_KEY));
    return addWebhookSecret(this.storage, box, workspace, this.audit);
  }
  listWebhookSecrets(workspace?: string) {
    return listWebhookSecrets(this.storage, workspace);
  }
  revokeWebhookSecret(secretId: string) {
    return revokeWebhookSecret(this.storage, secretId, this.audit);
  }
  async createSignInLink(workspace: string) {
    const t = await createSignInLink(this.storage, workspace, this.config.SESSION_LINK_SECONDS * 1000, this.audit);
    return toLink(this.config, this.config.PORT, t);
  }
  listSessions(workspace?: string) {
    return listSessions(this.storage, workspace, this.config.SESSION_IDLE_SECONDS * 1000);
  }
  revokeSession(sessionId: string) {
    return revokeSession(this.storage, sessionId, this.audit);
  }
  async exportTraining(workspace: string, params: Record<string, string>) {
    const query = checkedExport(params);
    const id = await workspaceId(this.storage, workspace);
    const opts = exportOptions(query, this.config, await this.store.policyFor(id));
    return exportTraining(this.storage, id, opts);
  }
  close() {
    return this.storage.close();
  }
}

/**
 * A running server's admin routes when one holds DATA_DIR, storage directly when nothing does. Only `mayCreate`
 * (the first key on a new machine) makes a DATA_DIR that does not exist: for any other command a mistyped path
 * would otherwise be an empty store answering "no keys", "no key X" or the default policy.
 */
export async function openOps(config: Config, opts: { mayCreate: boolean }): Promise<Ops> {
  if (!existsSync(config.DATA_DIR)) {
    if (!opts.mayCreate && !config.CLICKHOUSE_URL) {
      throw new Error(
        `DATA_DIR ${config.DATA_DIR} does not exist: no tracegate data there (TRACEGATE_DATA_DIR names the server's data directory)`,
      );
    }
    mkdirSync(config.DATA_DIR, { recursive: true });
  }
  // Only a probe: held while the CLI works, the lock would stop a server (re)starting meanwhile, which instead
  // waits for the embedded database's own lock (up to 30 s).
  try {
    (await lockDataDir(config.DATA_DIR))();
  } catch (err) {
    if (!(err instanceof DataDirInUse)) throw err;
    const server = runningServer(config);
    if (server) return new RemoteOps(server, config);
    throw new Error(
      `DATA_DIR ${config.DATA_DIR} is held by process ${err.owner}, which does not answer as a running tracegate server` +
        ' (a server starting or stopping, or `tracegate refused requeue`): try again in a moment',
    );
  }
  const storage = createStorage(config);
  await storage.init();
  return new LocalOps(storage, config);
}
