// tracegate verify: re-checks stored data against its verification records and signed checkpoints.
import type { Config } from '../../config/index.ts';
import type { Command } from '../shared/args.ts';
import { manageArgs, withOps } from '../shared/manage.ts';
import type { VerifyResult } from '../shared/ops.ts';

export const command: Command = {
  summary: [['verify [--workspace NAME] [--json]', 're-check stored data against verification records']],
  help: `usage: tracegate verify [--workspace NAME] [--json]

Re-checks every verification record of the workspace (or of every workspace): the content hash of the stored
spans, the continuity of the hash chain, the Ed25519 signatures of its checkpoints, and the audit log chain.
Exits 1 and names each failure when anything does not match.`,
  run(args: string[], config: Config): Promise<number> {
    const { values } = manageArgs('verify', args);
    return withOps(config, { mayCreate: false }, async (ops) => {
      // Without --workspace: every workspace with anything to check, and _system (the audit chain of rejected
      // requests) even when it has no records yet.
      const { SYSTEM_WORKSPACE } = await import('../../processors/audit.ts');
      const targets = values.workspace
        ? [values.workspace]
        : [...new Set([...(await ops.verifiableWorkspaces()), SYSTEM_WORKSPACE])];
      let ok = true;
      const results: Record<string, VerifyResult> = {};
      for (const ws of targets) {
        const r = await ops.verify(ws);
        results[ws] = r;
        ok &&= r.ok;
        if (!values.json) printVerify(ws, r);
      }
      if (values.json) console.log(JSON.stringify(results));
      return ok ? 0 : 1;
    });
  },
};

function printVerify(name: string, r: VerifyResult): void {
  console.log(
    `${r.ok ? 'OK  ' : 'FAIL'} ${name}: ${r.recordsChecked} records over ${r.tracesChecked} traces, ${r.checkpointsChecked} signed checkpoints` +
      `${r.superseded ? `, ${r.superseded} superseded by later deliveries` : ''}${r.unsignedTail ? `, ${r.unsignedTail} awaiting their checkpoint` : ''}`,
  );
  for (const p of r.problems)
    console.log(
      `  ${p.kind}:${p.chainId ? ` chain ${p.chainId} seq ${p.seq}` : ''}${p.traceId ? ` trace ${p.traceId}` : ''}: ${p.message}`,
    );
  for (const p of r.audit)
    console.log(`  audit ${p.kind}:${p.chainId ? ` chain ${p.chainId} seq ${p.seq}` : ''} ${p.message}`);
  if (r.problemsOmitted)
    console.log(
      `  … and ${r.problemsOmitted} more problems (the first ${r.problems.length + r.audit.length} are listed)`,
    );
}
