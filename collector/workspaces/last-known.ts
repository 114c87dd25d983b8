// The last API-key records and workspace settings this collector read from storage, kept in
// DATA_DIR/cache/last-known.json (mode 0600). Used only while storage is unreachable, so a collector restarted
// during a ClickHouse outage keeps accepting the workspaces it served before into the spool, under the policy
// it last saw, instead of refusing everyone with 503. Keys are kept as their SHA-256 hash, as in storage.
// A key revoked elsewhere while this collector could not read storage stays usable here until storage answers
// again; one revoked through this collector, or the CLI on its data directory, is marked here at once.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { JsonSnapshot } from '../../platform/json-snapshot.ts';
import type { ApiKeyRecord } from '../../core/ports/storage.ts';

interface Snapshot {
  keys: Record<string, ApiKeyRecord>;
  settings: Record<string, { doc: string; version: number } | null>;
}

/** Where a collector keeps its copy, in its data directory. */
export const lastKnownFile = (dataDir: string) => join(dataDir, 'cache', 'last-known.json');

export class LastKnown {
  private readonly data: Snapshot;
  private readonly file: JsonSnapshot;

  constructor(path: string) {
    let data: Snapshot = { keys: {}, settings: {} };
    try {
      const v = JSON.parse(readFileSync(path, 'utf8')) as Partial<Snapshot>;
      data = { keys: v.keys ?? {}, settings: v.settings ?? {} };
    } catch {
      /* first start, or unreadable: nothing known */
    }
    this.data = data;
    this.file = new JsonSnapshot(path, () => this.data);
  }

  key(keyId: string): ApiKeyRecord | undefined {
    return Object.hasOwn(this.data.keys, keyId) ? this.data.keys[keyId] : undefined;
  }
  settings(workspaceId: string): { doc: string; version: number } | null | undefined {
    return Object.hasOwn(this.data.settings, workspaceId) ? this.data.settings[workspaceId] : undefined;
  }

  rememberKey(rec: ApiKeyRecord): void {
    const cur = this.key(rec.keyId);
    if (cur && cur.revokedAtMs === rec.revokedAtMs && cur.hash === rec.hash) return;
    this.data.keys[rec.keyId] = rec;
    this.file.changed();
  }

  /**
   * A key revoked: marked so here and written now, so that neither this collector nor its next start lets it in while
   * storage cannot answer. A copy that cannot be written now is written at the next change or shutdown.
   */
  async revokeKey(keyId: string, revokedAtMs: number): Promise<void> {
    const cur = this.key(keyId);
    if (!cur) return;
    this.rememberKey({ ...cur, revokedAtMs });
    await this.flush().catch(() => {});
  }

  rememberSettings(workspaceId: string, row: { doc: string; version: number } | null): void {
    const cur = this.settings(workspaceId);
    if (cur !== undefined && (cur?.version ?? -1) === (row?.version ?? -1)) return;
    this.data.settings[workspaceId] = row;
    this.file.changed();
  }

  /** Write now (at shutdown). */
  flush(): Promise<void> {
    return this.file.flush();
  }
}
