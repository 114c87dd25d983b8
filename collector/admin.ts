// Workspace and key management shared by the CLI and the loopback admin routes.
import { randomBytes } from 'node:crypto';
import type { ApiKeyRecord, Storage, Workspace } from '../storage/types.ts';
import { newKey, sha256Hex } from './keys.ts';

export const WORKSPACE_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export async function ensureWorkspace(storage: Storage, name: string): Promise<Workspace> {
  if (!WORKSPACE_NAME_RE.test(name)) throw new Error(`invalid workspace name "${name}": letters, digits, . _ - (max 64)`);
  const existing = await storage.getWorkspaceByName(name);
  if (existing) return existing;
  const ws: Workspace = { id: `ws_${randomBytes(8).toString('hex')}`, name, createdAtMs: Date.now() };
  await storage.createWorkspace(ws);
  return ws;
}

export async function createKey(storage: Storage, workspaceName: string) {
  const ws = await ensureWorkspace(storage, workspaceName);
  const { keyId, key } = newKey();
  const rec: ApiKeyRecord = { keyId, workspaceId: ws.id, hash: sha256Hex(key), createdAtMs: Date.now(), revokedAtMs: 0 };
  await storage.putApiKey(rec);
  return { workspaceId: ws.id, workspace: ws.name, keyId, key };
}

export async function listKeys(storage: Storage, workspaceName?: string) {
  let wsId: string | undefined;
  if (workspaceName) {
    const ws = await storage.getWorkspaceByName(workspaceName);
    if (!ws) return [];
    wsId = ws.id;
  }
  const keys = await storage.listApiKeys(wsId);
  return keys.map(({ hash: _h, ...k }) => k);
}
