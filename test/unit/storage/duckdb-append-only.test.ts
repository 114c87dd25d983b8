// The embedded store's append-only tables (audit_log, verification, verification_checkpoints) have no key index
// since v6: a replayed record is skipped by its chain position. Exactly once across batches, restarts, gaps and
// failed writes, and the upgrade from v5 keeps every row.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type {
  AuditRecord,
  CheckpointRecord,
  EnrichmentRecord,
  VerificationRecord,
} from '../../../core/enrichment-records.ts';
import { DuckDbStorage } from '../../../storage/duckdb.ts';
import { ColumnRows } from '../../../storage/duckdb-columns.ts';
import { DUCKDB_MIGRATIONS } from '../../../storage/duckdb-migrations.ts';
import { auditChain, verificationChain } from '../../support/chains.ts';

const T0 = 1_763_787_000_123;
const hex = (n: number, c: string) => c.repeat(64).slice(0, 64 - String(n).length) + String(n);

function audit(seq: number, chainId = 'c1', ws = 'ws'): AuditRecord {
  return {
    recordType: 'audit',
    workspaceId: ws,
    chainId,
    seq,
    atMs: T0 + seq,
    actor: 'k_abc',
    action: 'ingest',
    route: 'POST /api/traces',
    outcome: 'ok',
    accepted: 1,
    rejected: 0,
    details: '{"traces":1}',
    prevHash: hex(seq - 1, 'a'),
    hash: hex(seq, 'a'),
  };
}

function verification(seq: number, chainId = 'v1', ws = 'ws'): VerificationRecord {
  return {
    recordType: 'verification',
    workspaceId: ws,
    traceId: `t${seq}`,
    spanIds: ['s1'],
    spanVersions: [T0 + seq],
    contentHash: hex(seq, 'c'),
    chainId,
    seq,
    prevHash: hex(seq - 1, 'd'),
    hash: hex(seq, 'd'),
    createdAtMs: T0 + seq,
  };
}

function checkpoint(seq: number, chainId = 'v1', ws = 'ws'): CheckpointRecord {
  return {
    recordType: 'checkpoint',
    workspaceId: ws,
    chainId,
    seq,
    headHash: hex(seq, 'd'),
    keyId: 'ed25519:k1',
    signature: 'c2ln',
    atMs: T0 + seq,
  };
}

const records = (seqs: number[], ws = 'ws'): EnrichmentRecord[] =>
  seqs.flatMap((n) => [audit(n, 'c1', ws), verification(n, 'v1', ws), checkpoint(n, 'v1', ws)]);

async function stored(
  s: DuckDbStorage,
  ws = 'ws',
): Promise<{ audit: number[]; verification: number[]; checkpoints: number[] }> {
  const v = await verificationChain(s, ws);
  return {
    audit: (await auditChain(s, ws)).map((r) => r.seq),
    verification: v.records.map((r) => r.seq),
    checkpoints: v.checkpoints.map((r) => r.seq),
  };
}

const all = (seqs: number[]) => ({ audit: seqs, verification: seqs, checkpoints: seqs });

describe('embedded store: append-only tables without a key index (v6)', function () {
  this.timeout(60_000);
  let dir: string;
  let path: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'tracegate-append-only-'));
    path = join(dir, 'db.duckdb');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function open(): Promise<DuckDbStorage> {
    const s = new DuckDbStorage(path, { memoryLimit: '64MB' });
    await s.init();
    return s;
  }

  it('stores a record once: replays in later batches, within a batch, and after a restart (an empty cache)', async () => {
    let s = await open();
    await s.insertEnrichment(records([1, 2, 3]));
    await s.insertEnrichment(records([2, 3, 4, 4])); // a replay overlapping new records, one twice in the batch
    expect(await stored(s)).to.deep.equal(all([1, 2, 3, 4]));
    await s.close();
    s = await open(); // the next run replays a spool segment the last one had written
    await s.insertEnrichment(records([3, 4, 5]));
    await s.insertEnrichment(records([1, 2, 3, 4, 5]));
    expect(await stored(s)).to.deep.equal(all([1, 2, 3, 4, 5]));
    await s.close();
  });

  it('an earlier record arriving after later ones is stored (a gap below the top), and only once', async () => {
    const s = await open();
    await s.insertEnrichment(records([1, 2, 5]));
    await s.insertEnrichment(records([3, 4, 5, 6]));
    await s.insertEnrichment(records([1, 2, 3, 4, 5, 6]));
    expect(await stored(s)).to.deep.equal(all([1, 2, 3, 4, 5, 6]));
    await s.close();
  });

  it('keeps chains and workspaces apart: the same positions in another chain or workspace are other records', async () => {
    const s = await open();
    await s.insertEnrichment(records([1, 2, 3]));
    await s.insertEnrichment([...records([1, 2], 'ws2'), audit(1, 'c2'), verification(1, 'v2'), checkpoint(1, 'v2')]);
    expect(await stored(s, 'ws2')).to.deep.equal(all([1, 2]));
    const v = await verificationChain(s, 'ws');
    expect(v.records.map((r) => `${r.chainId}:${r.seq}`)).to.deep.equal(['v1:1', 'v1:2', 'v1:3', 'v2:1']);
    expect((await auditChain(s, 'ws')).map((r) => `${r.chainId}:${r.seq}`)).to.deep.equal([
      'c1:1',
      'c1:2',
      'c1:3',
      'c2:1',
    ]);
    await s.close();
  });

  it('a write failing after some tables were appended stores nothing, and its retry stores everything once', async () => {
    const s = await open();
    await s.insertEnrichment(records([1]));
    const appendInto = ColumnRows.prototype.appendInto;
    let calls = 0;
    // The third table's append fails (a full disk, say): the audit and verification rows appended before it go too.
    ColumnRows.prototype.appendInto = async function (this: ColumnRows, c, table) {
      if (++calls === 3) throw new Error('injected: the append failed');
      return appendInto.call(this, c, table);
    };
    try {
      const err = await s.insertEnrichment(records([2, 3])).then(
        () => null,
        (e: unknown) => e,
      );
      expect((err as Error | null)?.message).to.equal('injected: the append failed');
    } finally {
      ColumnRows.prototype.appendInto = appendInto;
    }
    expect(await stored(s)).to.deep.equal(all([1]));
    await s.insertEnrichment(records([2, 3]));
    await s.insertEnrichment(records([1, 2, 3]));
    expect(await stored(s)).to.deep.equal(all([1, 2, 3]));
    await s.close();
  });

  it('upgrades a v5 database: every row kept, the key index gone, replays of its records still skipped', async () => {
    // A database as the collector before v6 left it.
    const inst = await DuckDBInstance.create(path);
    const c = await inst.connect();
    await c.run('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMP NOT NULL)');
    for (const m of DUCKDB_MIGRATIONS.filter((x) => x.version <= 5)) {
      for (const sql of m.statements) await c.run(sql);
      await c.run('INSERT INTO schema_migrations VALUES ($v, now())', { v: m.version });
    }
    const keys = async () =>
      (
        await c.runAndReadAll(`SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'
      AND table_name IN ('audit_log', 'verification', 'verification_checkpoints') ORDER BY table_name`)
      )
        .getRowObjectsJS()
        .map((r) => r.table_name);
    expect(await keys()).to.deep.equal(['audit_log', 'verification', 'verification_checkpoints']);
    await c.run(
      `INSERT INTO audit_log VALUES ('ws', 'c1', 1, ${T0}, 'k_abc', 'ingest', 'POST /api/traces', 'ok', 1, 0, '{}', '${hex(0, 'a')}', '${hex(1, 'a')}')`,
    );
    await c.run(
      `INSERT INTO verification VALUES ('ws', 'v1', 1, 't1', ['s1'], [${T0 + 1}], '${hex(1, 'c')}', '${hex(0, 'd')}', '${hex(1, 'd')}', ${T0 + 1})`,
    );
    await c.run(
      `INSERT INTO verification_checkpoints VALUES ('ws', 'v1', 1, '${hex(1, 'd')}', 'ed25519:k1', 'c2ln', ${T0 + 1})`,
    );
    c.closeSync();
    inst.closeSync();

    const s = await open();
    expect(await stored(s)).to.deep.equal(all([1]));
    const v = (await verificationChain(s, 'ws')).records[0]!;
    expect(v).to.deep.include({
      traceId: 't1',
      spanIds: ['s1'],
      spanVersions: [T0 + 1],
      contentHash: hex(1, 'c'),
      hash: hex(1, 'd'),
    });
    await s.insertEnrichment(records([1, 2]));
    expect(await stored(s)).to.deep.equal(all([1, 2]));
    await s.close();

    const again = await DuckDBInstance.create(path);
    const c2 = await again.connect();
    const left = (
      await c2.runAndReadAll(`SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'
      AND table_name IN ('audit_log', 'verification', 'verification_checkpoints')`)
    ).getRowObjectsJS();
    expect(left).to.deep.equal([]);
    const notNull = (
      await c2.runAndReadAll(`SELECT count(*)::INTEGER AS n FROM duckdb_constraints() WHERE constraint_type = 'NOT NULL'
      AND table_name = 'verification'`)
    ).getRowObjectsJS()[0]!.n;
    expect(notNull).to.equal(10);
    c2.closeSync();
    again.closeSync();
  });
});
