// The audit log's coverage through the CLI run offline (child processes): each run links to the newest record, and
// verify catches a deleted policy change. checkAuditCoverage itself: test/unit/enrichment/audit-coverage.test.ts.
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { cli, testEnv } from '../support/server.ts';

describe('audit coverage', () => {
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
