// Verification chains across server runs: a restarted collector continues the chain the previous run left
// (DATA_DIR/keys/verification-heads.json), so deleting a whole earlier run is caught by `tracegate verify`.
import { auditChain, verificationChain } from '../support/chains.ts';
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { createClient } from '@clickhouse/client';
import { loadConfig } from '../../config/index.ts';
import { startServer } from '../../collector/server.ts';
import { createKey } from '../../collector/workspaces/admin.ts';
import { GENESIS } from '../../processors/canonical.ts';
import { publicKeys } from '../../processors/signing.ts';
import { verifyWorkspace } from '../../processors/verify-workspace.ts';
import { verifyAuditChain } from '../../processors/audit.ts';
import { post, testEnv } from '../support/server.ts';
import { useSharedClickHouse } from '../support/shared.ts';
import { join } from 'node:path';

describe('verification chains across restarts (clickhouse)', function () {
  this.timeout(240_000);
  useSharedClickHouse();
  it('run 2 continues run 1; deleting run 1 is reported as a chain gap', async () => {
    const config = loadConfig(testEnv('clickhouse'));
    const keysDir = join(config.DATA_DIR, 'keys');
    const send = async (port: number, key: string, ids: string[]) => {
      for (const id of ids)
        expect(
          (
            await post(
              `http://127.0.0.1:${port}/api/traces`,
              { requestId: id, prompt: 'p', response: 'r' },
              { authorization: `Bearer ${key}` },
            )
          ).status,
        ).to.equal(200);
    };
    let running = await startServer(config);
    try {
      const k = await createKey(running.storage, 'runs-co', (e) =>
        running.pipeline.record([running.enrichment.audit.append(e)]),
      ); // audited, as every key is
      await send(running.port, k.key, ['r1-a', 'r1-b']);
      await running.close();
      running = await startServer(config);
      await send(running.port, k.key, ['r2-a']);
      await running.pipeline.flush();
      const { records } = await verificationChain(running.storage, k.workspaceId);
      const chains = [...new Set(records.map((r) => r.chainId))];
      expect(chains).to.have.length(2);
      const second = records.find((r) => r.chainId === chains[1] && r.seq === 1)!;
      const first = records.filter((r) => r.chainId === chains[0]);
      expect(second.prevHash).to.not.equal(GENESIS);
      expect(second.prevHash).to.equal(first.at(-1)!.hash);
      const now = Date.now() + 60_000; // past the settle window
      expect((await verifyWorkspace(running.storage, k.workspaceId, publicKeys(keysDir), now)).ok).to.equal(true);

      // Delete run 1 entirely (its spans and enrichment rows), as someone with database access could.
      const ch = createClient({ url: config.CLICKHOUSE_URL!, compression: { request: false, response: false } });
      const db = config.CLICKHOUSE_DATABASE;
      for (const table of ['verification', 'verification_checkpoints']) {
        await ch.command({ query: `ALTER TABLE ${db}.${table} DELETE WHERE chain_id = '${chains[0]}'` });
      }
      await ch.command({ query: `ALTER TABLE ${db}.spans DELETE WHERE trace_id IN ('r1-a', 'r1-b')` });
      await ch.close();
      // 18.16 has no mutations_sync: wait until the mutations have run.
      for (let i = 0; i < 100; i++) {
        const left =
          (await verificationChain(running.storage, k.workspaceId)).records.filter((r) => r.chainId === chains[0])
            .length + (await running.storage.getTrace(k.workspaceId, 'r1-a')).length;
        if (left === 0) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const report = await verifyWorkspace(running.storage, k.workspaceId, publicKeys(keysDir), now);
      expect(report.ok).to.equal(false);
      expect(report.problems.map((p) => [p.kind, p.chainId])).to.deep.include(['chain_gap', chains[1]]);

      // The audit chains continue across runs too: run 2's ingestion chain starts from run 1's last record.
      const audit = await auditChain(running.storage, k.workspaceId);
      const auditChains = [...new Set(audit.map((r) => r.chainId))];
      const linked = audit.filter((r) => r.seq === 1 && r.prevHash !== GENESIS);
      expect(linked.length).to.be.greaterThan(0);
      for (const r of linked)
        expect(audit.some((x) => x.hash === r.prevHash && x.chainId !== r.chainId)).to.equal(true);
      expect(auditChains.length).to.be.greaterThan(1);
      expect(verifyAuditChain(audit.map((r) => ({ ...r, recordType: 'audit' as const })))).to.deep.equal([]);
      // Deleting the run a chain continues is reported.
      const gone = new Set(audit.filter((r) => r.hash === linked[0]!.prevHash).map((r) => r.chainId));
      const problems = verifyAuditChain(
        audit.filter((r) => !gone.has(r.chainId)).map((r) => ({ ...r, recordType: 'audit' as const })),
      );
      expect(problems.map((p) => p.kind)).to.include('gap');
    } finally {
      await running.close();
      rmSync(config.DATA_DIR, { recursive: true, force: true });
    }
  });
});

describe('an idle collector signs its chains', function () {
  this.timeout(60_000);
  it('the records of its last batches are signed about a second later, not at the next batch or the shutdown', async () => {
    const config = loadConfig(testEnv('duckdb'));
    const running = await startServer(config);
    try {
      const k = await createKey(running.storage, 'idle-co', (e) =>
        running.pipeline.record([running.enrichment.audit.append(e)]),
      );
      for (const id of ['i-1', 'i-2', 'i-3', 'i-4']) {
        expect(
          (
            await post(
              `http://127.0.0.1:${running.port}/api/traces`,
              { requestId: id, prompt: 'p', response: 'r' },
              { authorization: `Bearer ${k.key}` },
            )
          ).status,
        ).to.equal(200);
        await new Promise((r) => setTimeout(r, 150)); // within a second of each other: batches alone would leave the last ones unsigned
      }
      await new Promise((r) => setTimeout(r, 2_500));
      await running.pipeline.flush();
      const report = await verifyWorkspace(
        running.storage,
        k.workspaceId,
        publicKeys(join(config.DATA_DIR, 'keys')),
        Date.now() + 60_000,
      );
      expect(report.problems).to.deep.equal([]);
      expect([report.recordsChecked, report.unsignedTail]).to.deep.equal([4, 0]);
    } finally {
      await running.close();
      rmSync(config.DATA_DIR, { recursive: true, force: true });
    }
  });
});
