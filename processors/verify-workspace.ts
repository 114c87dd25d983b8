// Re-checks stored data against its verification records: used by the trace route and `tracegate verify`.
import type { Storage } from '../storage/types.ts';
import type { VerificationRecord } from '../collector/enrichment-records.ts';
import { checkAuditCoverage, verifyAuditChain, type ChainProblem } from './audit.ts';
import type { PublicKeyInfo } from './signing.ts';
import { checkChain, checkContent, type VerifyReport } from './verification.ts';

/** Spans received this recently are not judged unverified: on a live collector their records may still be in flight. */
export const SETTLE_MS = 30_000;

/** Traces read per storage call while verifying a workspace. */
const READ_BATCH = 500;

async function contentOf(storage: Storage, workspaceId: string, records: VerificationRecord[], now: number) {
  const settledBeforeMs = now - SETTLE_MS;
  // Spans ingested while a long run goes on are as new as the run: the upper bound follows the clock.
  const upTo = () => Math.max(now, Date.now());
  const byTrace = new Map<string, VerificationRecord[]>();
  for (const r of records) (byTrace.get(r.traceId) ?? byTrace.set(r.traceId, []).get(r.traceId)!).push(r);
  const problems: VerifyReport['problems'] = [];
  let superseded = 0;
  const ids = [...byTrace.keys()];
  for (let i = 0; i < ids.length; i += READ_BATCH) {
    const chunk = ids.slice(i, i + READ_BATCH);
    const stored = await storage.getTraces(workspaceId, chunk);
    const until = upTo();
    for (const traceId of chunk) {
      const res = checkContent(byTrace.get(traceId)!, stored.get(traceId) ?? [], settledBeforeMs, until);
      problems.push(...res.problems);
      superseded += res.superseded;
    }
  }
  // Traces no record names at all: inserted straight into storage (or stored with verification off).
  let unverified = 0;
  for (let cursor: string | undefined; ;) {
    const page = await storage.listTraces(workspaceId, { limit: 1000, ...cursor ? { cursor } : {} });
    const unnamed = page.items.filter((t) => !byTrace.has(t.traceId));
    for (let i = 0; i < unnamed.length; i += READ_BATCH) {
      const chunk = unnamed.slice(i, i + READ_BATCH);
      const stored = await storage.getTraces(workspaceId, chunk.map((t) => t.traceId));
      const until = upTo() + 5_000;
      for (const t of chunk) {
        if ((stored.get(t.traceId) ?? []).every((sp) => sp.ingestedAtMs >= settledBeforeMs && sp.ingestedAtMs <= until)) continue;
        unverified++;
        problems.push({ kind: 'unverified_span', chainId: '', seq: 0, traceId: t.traceId, message: `trace ${t.traceId} (${t.spanCount} span${t.spanCount === 1 ? '' : 's'}) has no verification record` });
      }
    }
    if (!page.nextCursor) break;
    cursor = page.nextCursor;
  }
  return { problems, superseded, traces: byTrace.size + unverified };
}

export async function verifyWorkspace(storage: Storage, workspaceId: string, keys: PublicKeyInfo[], now = Date.now()): Promise<VerifyReport & { audit: ChainProblem[] }> {
  const { records, checkpoints } = await storage.verificationChain(workspaceId);
  const chain = checkChain(records, checkpoints, keys, undefined, now - SETTLE_MS);
  const content = await contentOf(storage, workspaceId, records, now);
  const auditRecords = await storage.auditChain(workspaceId);
  const settings = await storage.getSettings(workspaceId);
  const apiKeys = (await storage.listApiKeys(workspaceId)).map((k) => ({ keyId: k.keyId, revoked: k.revokedAtMs > 0 }));
  const audit = [...verifyAuditChain(auditRecords), ...checkAuditCoverage(auditRecords, { settingsVersion: settings?.version ?? 0, keys: apiKeys })];
  const problems = [...chain.problems, ...content.problems];
  return {
    ok: problems.length === 0 && audit.length === 0, recordsChecked: records.length, tracesChecked: content.traces,
    checkpointsChecked: checkpoints.length, superseded: content.superseded, unsignedTail: chain.unsignedTail, problems, audit,
  };
}

/** One trace: its content against its records, and the chain those records sit in. */
export async function verifyTrace(storage: Storage, workspaceId: string, traceId: string, keys: PublicKeyInfo[]): Promise<VerifyReport & { records: VerificationRecord[] }> {
  const mine = await storage.getVerification(workspaceId, traceId);
  const { records, checkpoints } = await storage.verificationChain(workspaceId);
  const chains = new Set(mine.map((r) => r.chainId));
  const chain = checkChain(records.filter((r) => chains.has(r.chainId)), checkpoints.filter((c) => chains.has(c.chainId)), keys, new Set(records.map((r) => r.hash)));
  const now = Date.now();
  const content = checkContent(mine, await storage.getTrace(workspaceId, traceId), now - SETTLE_MS, now);
  const problems = [...content.problems, ...chain.problems.filter((p) => !p.traceId || p.traceId === traceId || p.kind !== 'link_hash_mismatch')];
  return {
    ok: problems.length === 0, recordsChecked: mine.length, tracesChecked: 1, checkpointsChecked: checkpoints.length,
    superseded: content.superseded, unsignedTail: chain.unsignedTail, problems, records: mine,
  };
}
