// The audit log must account for the workspace's current state: a deleted newest record breaks no chain link,
// but the settings version or key it recorded still names it. Offline CLI runs link to the newest record.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { checkAuditCoverage } from '../../processors/audit.ts';
import type { AuditRecord } from '../../core/enrichment-records.ts';
import { cli, testEnv } from '../support/server.ts';

const rec = (action: string, details: object): AuditRecord => ({
  recordType: 'audit',
  workspaceId: 'w',
  atMs: 1,
  actor: 'cli',
  action,
  route: 'admin',
  outcome: 'ok',
  accepted: 0,
  rejected: 0,
  details: JSON.stringify(details),
  chainId: 'c',
  seq: 1,
  prevHash: '',
  hash: '',
});

describe('audit coverage', () => {
  it('names a settings version, key creation or revocation without its audit record', () => {
    const records = [
      rec('key.create', { keyId: 'k1' }),
      rec('key.create', { keyId: 'k2' }),
      rec('key.revoke', { keyId: 'k2' }),
      rec('policy.update', { version: 2 }),
      rec('ingest', {}),
    ];
    expect(
      checkAuditCoverage(records, {
        settingsVersion: 2,
        keys: [
          { keyId: 'k1', revoked: false },
          { keyId: 'k2', revoked: true },
        ],
      }),
    ).to.deep.equal([]);
    expect(checkAuditCoverage(records, { settingsVersion: 0, keys: [] })).to.deep.equal([]);
    const problems = checkAuditCoverage(records, {
      settingsVersion: 3,
      keys: [
        { keyId: 'k1', revoked: true },
        { keyId: 'k3', revoked: false },
      ],
    });
    expect(problems.map((p) => [p.kind, p.message])).to.deep.equal([
      ['missing_record', 'settings version 3 has no audit record of the change that made it'],
      ['missing_record', 'key k1 is revoked but has no key.revoke audit record'],
      ['missing_record', 'key k3 has no key.create audit record'],
    ]);
    expect(
      checkAuditCoverage([{ ...rec('policy.update', {}), details: 'not json' }], { settingsVersion: 1, keys: [] }),
    ).to.have.length(1);
  });

  it('offline CLI: each run links to the newest record; deleting the last policy change is caught by verify', async function () {
    this.timeout(120_000);
    const env = testEnv('duckdb');
    const policy = join(env.TRACEGATE_DATA_DIR!, 'policy.json');
    writeFileSync(policy, JSON.stringify({ version: 1, actions: { email: 'redact' } }));
    const run = async (args: string[]) => {
      const out = await cli(null, args, env);
      expect(out.code, out.stdout + out.stderr).to.equal(0);
      return out;
    };
    await run(['keys', 'create', '--workspace', 'offline-co', '--json']);
    await run(['policy', 'set', '--workspace', 'offline-co', '--file', policy]);
    expect((await run(['verify', '--workspace', 'offline-co'])).stdout).to.match(/^OK /);

    const db = await DuckDBInstance.create(join(env.TRACEGATE_DATA_DIR!, 'tracegate.duckdb'));
    const conn = await db.connect();
    const rows = (await (
      await conn.run('SELECT action, chain_id, seq, prev_hash, hash FROM audit_log ORDER BY at_ms, seq')
    ).getRowObjects()) as Array<Record<string, string | number>>;
    expect(rows.map((r) => r.action)).to.deep.equal(['key.create', 'policy.update']);
    expect(rows[0]!.chain_id).to.not.equal(rows[1]!.chain_id); // two CLI runs, two chains
    expect(rows[1]!.prev_hash).to.equal(rows[0]!.hash); // the second continues the first
    await conn.run(`DELETE FROM audit_log WHERE action = 'policy.update'`);
    conn.closeSync();
    db.closeSync();

    const out = await cli(null, ['verify', '--workspace', 'offline-co'], env);
    expect(out.code).to.equal(1);
    expect(out.stdout).to.include('missing_record').and.include('settings version 1');
  });
});
