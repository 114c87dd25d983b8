// Where each workspace's chains stand (DATA_DIR/keys/verification-heads.json, audit-ingest-heads.json,
// audit-main-heads.json), so the next run's chains continue from them. Only heads of records already fsync'd to
// the spool are written (the pipeline reports them), so after a crash the next run never links to a record that
// was never stored.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ChainHead } from './verification.ts';

export type ChainRole = 'verification' | 'audit-ingest' | 'audit-main';
const WRITE_EVERY_MS = 1000;
const fileOf = (role: ChainRole) => `${role}-heads.json`;

export function readChainHeads(keysDir: string, role: ChainRole): Record<string, ChainHead> {
  try {
    const v: unknown = JSON.parse(readFileSync(join(keysDir, fileOf(role)), 'utf8'));
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, ChainHead>) : {};
  } catch {
    return {}; // first run, or an unreadable file: chains start at the genesis hash
  }
}

export class ChainHeadStore {
  private readonly path: string;
  private readonly heads: Record<string, ChainHead>;
  private dirty = false;
  private lastWrite = 0;
  private timer: NodeJS.Timeout | null = null;
  constructor(keysDir: string, role: ChainRole) {
    this.path = join(keysDir, fileOf(role));
    this.heads = readChainHeads(keysDir, role);
  }

  /** The heads as last made durable (what a new chain of this role continues from). */
  current(): Record<string, ChainHead> { return { ...this.heads }; }

  /** Heads of records that are now durable; written at most once a second. */
  durable(heads: Record<string, ChainHead> | undefined): void {
    if (!heads) return;
    for (const [ws, h] of Object.entries(heads)) {
      const cur = this.heads[ws];
      if (!cur || cur.chainId !== h.chainId || h.seq > cur.seq) { this.heads[ws] = h; this.dirty = true; }
    }
    if (!this.dirty || this.timer) return;
    const wait = Math.max(0, this.lastWrite + WRITE_EVERY_MS - Date.now());
    this.timer = setTimeout(() => { this.timer = null; this.write(); }, wait);
    this.timer.unref();
  }

  /** Write now (at shutdown). */
  flush(): void {
    if (this.timer) { clearTimeout(this.timer); this.timer = null; }
    this.write();
  }

  private write(): void {
    if (!this.dirty) return;
    this.dirty = false;
    this.lastWrite = Date.now();
    try {
      mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
      writeFileSync(`${this.path}.tmp`, JSON.stringify(this.heads), { mode: 0o600 });
      renameSync(`${this.path}.tmp`, this.path);
    } catch {
      this.dirty = true; // retried with the next durable batch or at shutdown
    }
  }
}
