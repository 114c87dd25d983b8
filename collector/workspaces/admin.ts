// Workspace, key and settings management shared by the CLI and the loopback admin routes.
// Every change is audited.
import { TracegateError } from '../../core/errors.ts';
import { SYSTEM_WORKSPACE } from '../../processors/audit.ts';
import type { ApiKeyRecord, Storage, Workspace } from '../../core/ports/storage.ts';
import type { AuditEvent } from '../../processors/audit.ts';
import { newKey } from './api-keys.ts';

import { sha256 } from '../../processors/canonical.ts';
import { settingsPatchSchema, type SettingsDoc, type SettingsPatch, type SettingsStore } from './settings.ts';

export const WORKSPACE_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export type AuditSink = (e: AuditEvent) => Promise<void>;
const noAudit: AuditSink = async () => {};

const event = (workspaceId: string, action: string, details: object): AuditEvent => ({
  workspaceId,
  atMs: Date.now(),
  actor: 'cli',
  action,
  route: 'admin',
  outcome: 'ok',
  accepted: 0,
  rejected: 0,
  details: JSON.stringify(details),
});

/** The form of workspace ids. A name of this form could stand for another workspace (commands take a name or an id). */
export const WORKSPACE_ID_RE = /^ws_[0-9a-f]{16}$/;

export async function ensureWorkspace(storage: Storage, name: string): Promise<Workspace> {
  if (!WORKSPACE_NAME_RE.test(name))
    throw new TracegateError(
      'invalid',
      'invalid_request',
      `invalid workspace name "${name}": letters, digits, . _ - (max 64), starting with a letter or digit`,
    );
  // `keys create --workspace <id>`: a key for that workspace (or for one named so before ids were reserved).
  const existing = await findWorkspace(storage, name);
  if (existing) return existing;
  if (WORKSPACE_ID_RE.test(name))
    throw new TracegateError(
      'invalid',
      'invalid_request',
      `invalid workspace name "${name}": names of the form ws_<16 hex digits> are workspace ids`,
    );
  // The id follows from the name: two collectors creating the same new workspace at once make one workspace.
  const ws: Workspace = { id: workspaceIdFor(name), name, createdAtMs: Date.now() };
  await storage.createWorkspace(ws);
  return ws;
}

/** The id a new workspace of this name gets (names are unique; ids of workspaces made before this were random). */
export function workspaceIdFor(name: string): string {
  return `ws_${sha256(`workspace:${name}`).slice(0, 16)}`;
}

/** A workspace given by name or by id. */
export async function workspaceId(storage: Storage, nameOrId: string): Promise<string> {
  if (nameOrId === SYSTEM_WORKSPACE) return nameOrId; // audit records of requests with no workspace (rejected keys)
  const ws = await findWorkspace(storage, nameOrId);
  if (!ws) throw new TracegateError('not_found', 'not_found', `no workspace "${nameOrId}"`);
  return ws.id;
}

/** An id is looked up as an id first: a name in the id form (allowed before ids were reserved) cannot shadow it. */
async function findWorkspace(storage: Storage, nameOrId: string): Promise<Workspace | null> {
  if (WORKSPACE_ID_RE.test(nameOrId))
    return (await storage.getWorkspace(nameOrId)) ?? (await storage.getWorkspaceByName(nameOrId));
  return storage.getWorkspaceByName(nameOrId);
}

export async function createKey(storage: Storage, workspaceName: string, audit: AuditSink = noAudit) {
  const ws = await ensureWorkspace(storage, workspaceName);
  const { keyId, key } = newKey();
  const rec: ApiKeyRecord = { keyId, workspaceId: ws.id, hash: sha256(key), createdAtMs: Date.now(), revokedAtMs: 0 };
  await storage.putApiKey(rec);
  await audit(event(ws.id, 'key.create', { keyId }));
  return { workspaceId: ws.id, workspace: ws.name, keyId, key };
}

/** When the key was revoked; null when there is no such key (or it was revoked before). */
export async function revokeKey(storage: Storage, keyId: string, audit: AuditSink = noAudit): Promise<number | null> {
  const rec = await storage.getApiKey(keyId);
  const at = Date.now();
  if (!rec || !(await storage.revokeApiKey(keyId, at))) return null;
  await audit(event(rec.workspaceId, 'key.revoke', { keyId }));
  return at;
}

export async function listKeys(storage: Storage, workspace?: string) {
  let wsId: string | undefined;
  if (workspace) {
    const ws = await findWorkspace(storage, workspace);
    if (!ws) throw new TracegateError('not_found', 'not_found', `no workspace "${workspace}"`);
    wsId = ws.id;
  }
  const keys = await storage.listApiKeys(wsId);
  return keys.map(({ hash: _h, ...k }) => k);
}

/** Settings as shown to an operator: the provider key is never returned. */
export function showSettings(doc: SettingsDoc, version: number) {
  const provider = doc.provider ? { ...doc.provider, apiKey: doc.provider.apiKey ? '(set)' : undefined } : undefined;
  return { version, ...doc, provider, alertWebhookSecret: doc.alertWebhookSecret ? '(set)' : undefined };
}

/** Validation problems on one line, as the admin route and the CLI report them: `path: message; path: message`. */
export function formatIssues(issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>): string {
  return issues.map((i) => (i.path.length ? `${i.path.map(String).join('.')}: ${i.message}` : i.message)).join('; ');
}

/** A settings patch as the admin route takes it: 400 invalid_settings naming every problem (formatIssues). */
export function parseSettingsPatch(input: unknown): SettingsPatch {
  const patch = settingsPatchSchema.safeParse(input);
  if (!patch.success)
    throw new TracegateError('invalid', 'invalid_settings', formatIssues(patch.error.issues), {
      details: patch.error.issues,
    });
  return patch.data;
}

/** The object without its undefined fields (JSON leaves them out; a spread would store them as removals). */
const defined = <T extends object>(o: T): T =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;

/**
 * Apply a settings patch (settingsPatchSchema: parts replace, provider fields merge) and audit what changed. A part
 * the patch does not give (absent or undefined) stays as stored, as it does for a patch that came as JSON.
 */
export async function updateSettings(
  settings: SettingsStore,
  wsId: string,
  given: SettingsPatch,
  audit: AuditSink = noAudit,
) {
  const patch = defined(given);
  const next = await settings.update(wsId, (doc) => {
    const { provider, ...given } = patch;
    // null removes a part (the webhook's URL or secret); the schema takes null nowhere else at the top level
    const parts = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== null)) as Partial<SettingsDoc>;
    const base: SettingsDoc = { ...doc };
    for (const [k, v] of Object.entries(given)) if (v === null) delete base[k as keyof SettingsDoc];
    if (!provider) return { ...base, ...parts };
    // The stored key must not follow the base URL to another host unless the change says so.
    const origin = (url: string | null | undefined) => new URL(url ?? settings.defaultProviderBaseUrl).origin;
    if (
      provider.baseUrl !== undefined &&
      provider.apiKey === undefined &&
      doc.provider?.apiKey &&
      origin(provider.baseUrl) !== origin(doc.provider.baseUrl)
    ) {
      throw new TracegateError(
        'invalid',
        'provider_key_required',
        'the provider base URL moves to another host: give the key to use there, or clear the stored one (provider set --api-key-env VAR | --clear-api-key)',
      );
    }
    const merged: Record<string, unknown> = { allowCallerKey: false, ...doc.provider, ...defined(provider) };
    for (const k of Object.keys(merged)) if (merged[k] === null) delete merged[k];
    return { ...base, ...parts, provider: merged as SettingsDoc['provider'] };
  });
  const parts = Object.keys(patch);
  const action = parts.length === 1 && parts[0] === 'policy' ? 'policy.update' : 'settings.update';
  // Never the provider key or webhook secret themselves.
  await audit(event(wsId, action, { parts, version: next.version, policyVersion: next.policy.version }));
  return showSettings(next.doc, next.version);
}
