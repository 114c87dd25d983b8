// The last API-key records and workspace settings this collector read from storage, kept in
// DATA_DIR/cache/last-known.json (mode 0600). Used only while storage is unreachable, so a collector restarted
// during a ClickHouse outage keeps accepting the workspaces it served before into the spool, under the policy
// it last saw, instead of refusing everyone with 503. Keys are kept as their SHA-256 hash, as in storage.
// A key revoked while this collector could not read storage stays usable here until storage answers again.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { ApiKeyRecord } from '../storage/types.ts';

interface Snapshot { keys: Record<string, ApiKeyRecord>; settings: Record<string, { doc: string; version: number } | null> }

const WRITE_EVERY_MS = 1000;

export class LastKnown {
  private readonly path: string;
  private readonly data: Snapshot;
  private timer: NodeJS.Timeout | null = null;
  private lastWrite = 0;

  constructor(path: string) {
    this.path = path;
    let data: Snapshot = { keys: {}, settings: {} };
    try {
      const v = JSON.parse(readFileSync(path, 'utf8')) as Partial<Snapshot>;
      data = { keys: v.keys ?? {}, settings: v.settings ?? {} };
    } catch { /* first start, or unreadable: nothing known */ }
    this.data = data;
  }

  key(keyId: string): ApiKeyRecord | undefined { return Object.hasOwn(this.data.keys, keyId) ? this.data.keys[keyId] : undefined; }
  settings(workspaceId: string): { doc: string; version: number } | null | undefined {
    return Object.hasOwn(this.data.settings, workspaceId) ? this.data.settings[workspaceId] : undefined;
  }

  rememberKey(rec: ApiKeyRecord): void {
    const cur = this.key(rec.keyId);
    if (cur && cur.revokedAtMs === rec.revokedAtMs && cur.hash === rec.hash) return;
    this.data.keys[rec.keyId] = rec;
    this.schedule();
  }

  rememberSettings(workspaceId: string, row: { doc: string; version: number } | null): void {
    const cur = this.settings(workspaceId);
    if (cur !== undefined && (cur?.version ?? -1) === (row?.version ?? -1)) return;
    this.data.settings[workspaceId] = row;
    this.schedule();
  }

  /** Write now (at shutdown). */
  flush(): void {
    if (this.timer) { clearTimeout(this.timer); this.timer = null; this.write(); }
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => { this.timer = null; this.write(); }, Math.max(0, this.lastWrite + WRITE_EVERY_MS - Date.now()));
    this.timer.unref();
  }

  private write(): void {
    this.lastWrite = Date.now();
    try {
      mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
      writeFileSync(`${this.path}.tmp`, JSON.stringify(this.data), { mode: 0o600 });
      renameSync(`${this.path}.tmp`, this.path);
    } catch { /* a cache: the next change tries again */ }
  }
}
