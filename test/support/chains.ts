// Whole chains of a workspace, read through the storage's keyset pages (small pages, so tests cross page bounds).
import type { AuditRecord, CheckpointRecord, VerificationRecord } from '../../core/enrichment-records.ts';
import type { ChainPos, Storage } from '../../core/ports/storage.ts';

async function allPages<T extends ChainPos>(
  read: (after: ChainPos | null, limit: number) => Promise<T[]>,
  limit = 3,
): Promise<T[]> {
  const out: T[] = [];
  for (let after: ChainPos | null = null; ; ) {
    const page = await read(after, limit);
    out.push(...page);
    if (page.length < limit) return out;
    after = { chainId: page.at(-1)!.chainId, seq: page.at(-1)!.seq };
  }
}

/** Every audit record of a workspace in chain order (chainId, seq). */
export function auditChain(s: Storage, workspaceId: string): Promise<AuditRecord[]> {
  return allPages((after, limit) => s.auditPage(workspaceId, after, limit));
}

/** Every verification record and checkpoint of a workspace in chain order (chainId, seq). */
export async function verificationChain(
  s: Storage,
  workspaceId: string,
): Promise<{ records: VerificationRecord[]; checkpoints: CheckpointRecord[] }> {
  return {
    records: await allPages((after, limit) => s.verificationPage(workspaceId, after, limit)),
    checkpoints: await allPages((after, limit) => s.checkpointPage(workspaceId, after, limit)),
  };
}
