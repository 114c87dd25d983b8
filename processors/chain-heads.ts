// Where each workspace's chains stand (DATA_DIR/keys/verification-heads.json, audit-ingest-heads.json,
// audit-main-heads.json), so the next run's chains continue from them. Only heads of records already fsync'd to
// the spool are written (the pipeline reports them), so after a crash the next run never links to a record that
// was never stored.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { JsonSnapshot } from '../platform/json-snapshot.ts';
import type { ChainHead } from './verification.ts';

export type ChainRole = 'verification' | 'audit-ingest' | 'audit-main';
const fileOf = (role: ChainRole) => `${role}-heads.json`;

/**
 * Which database the heads belong to: heads from another store (a switch from DuckDB to ClickHouse, another
 * database name) are ignored rather than linked to records that store never had. Null when the spool does not
 * fsync: then "durable" is not, and a power loss could leave heads naming lost records, so nothing is linked.
 */
export function storeIdentity(c: {
  CLICKHOUSE_URL?: string | undefined;
  CLICKHOUSE_DATABASE: string;
  CLICKHOUSE_CLUSTER?: string | undefined;
  DATA_DIR: string;
  SPOOL_FSYNC: boolean;
}): string | null {
  if (!c.SPOOL_FSYNC) return null;
  if (!c.CLICKHOUSE_URL) return `duckdb:${join(c.DATA_DIR, 'tracegate.duckdb')}`;
  // A cluster is the same store whichever node the collector talks to.
  if (c.CLICKHOUSE_CLUSTER) return `clickhouse-cluster:${c.CLICKHOUSE_CLUSTER}#${c.CLICKHOUSE_DATABASE}`;
  const u = new URL(c.CLICKHOUSE_URL);
  return `clickhouse:${u.host}${u.pathname}#${c.CLICKHOUSE_DATABASE}`;
}

export function readChainHeads(keysDir: string, role: ChainRole, store: string | null): Record<string, ChainHead> {
  if (store === null) return {};
  try {
    const v = JSON.parse(readFileSync(join(keysDir, fileOf(role)), 'utf8')) as { store?: unknown; heads?: unknown };
    return v.store === store && v.heads && typeof v.heads === 'object' && !Array.isArray(v.heads)
      ? (v.heads as Record<string, ChainHead>)
      : {};
  } catch {
    return {}; // first run, or an unreadable file: chains start at the genesis hash
  }
}

export class ChainHeadStore {
  private readonly heads: Record<string, ChainHead>;
  private readonly store: string | null;
  private readonly file: JsonSnapshot;
  constructor(keysDir: string, role: ChainRole, store: string | null) {
    this.store = store;
    this.heads = readChainHeads(keysDir, role, store);
    this.file = new JsonSnapshot(join(keysDir, fileOf(role)), () => ({ store: this.store, heads: this.heads }));
  }

  /** The heads as last made durable (what a new chain of this role continues from). */
  current(): Record<string, ChainHead> {
    return { ...this.heads };
  }

  /** Heads of records that are now durable; written at most once a second. */
  durable(heads: Record<string, ChainHead> | undefined): void {
    if (!heads || this.store === null) return;
    for (const [ws, h] of Object.entries(heads)) {
      const cur = this.heads[ws];
      if (!cur || cur.chainId !== h.chainId || h.seq > cur.seq) {
        this.heads[ws] = h;
        this.file.changed();
      }
    }
  }

  /** Write now (at shutdown). */
  flush(): Promise<void> {
    return this.file.flush();
  }
}
