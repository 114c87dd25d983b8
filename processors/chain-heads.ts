// Where each workspace's verification chain stands, kept in DATA_DIR/keys/verification-heads.json so the next
// run's chain continues from it. Only heads of records already fsync'd to the spool are written (the pipeline
// reports them), so after a crash the next run never links to a record that was never stored.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChainHead } from './verification.ts';

const FILE = 'verification-heads.json';
const WRITE_EVERY_MS = 1000;

export function readChainHeads(keysDir: string): Record<string, ChainHead> {
  try {
    const v: unknown = JSON.parse(readFileSync(join(keysDir, FILE), 'utf8'));
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
  constructor(keysDir: string) {
    this.path = join(keysDir, FILE);
    this.heads = readChainHeads(keysDir);
  }

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
      writeFileSync(`${this.path}.tmp`, JSON.stringify(this.heads), { mode: 0o600 });
      renameSync(`${this.path}.tmp`, this.path);
    } catch {
      this.dirty = true; // retried with the next durable batch or at shutdown
    }
  }
}
