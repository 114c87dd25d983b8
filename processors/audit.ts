// Tamper-evident audit log: every record carries the hash of the previous one in its chain.
// A chain is per workspace and per server process (chainId), so concurrent instances never fork one.
import { randomBytes } from 'node:crypto';
import type { AuditRecord } from '../core/enrichment-records.ts';
import type { Processor } from '../core/ports/ingest.ts';
import { canonicalJson, GENESIS, sha256 } from './canonical.ts';

export type AuditEvent = Omit<AuditRecord, 'recordType' | 'chainId' | 'seq' | 'prevHash' | 'hash'>;

export const SYSTEM_WORKSPACE = '_system';

/** hash = sha256(prevHash || canonical JSON of every other field). */
export function auditHash(r: Omit<AuditRecord, 'hash'>): string {
  const { prevHash, ...rest } = r;
  return sha256(prevHash + canonicalJson(rest));
}

const newChainId = () => `c_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;

export interface AuditMark {
  chainId: string;
  heads: Array<[string, { seq: number; hash: string } | undefined]>;
}

export class AuditChain {
  private readonly heads = new Map<string, { seq: number; hash: string }>();
  chainId: string;
  /** Where the previous run's chain of this role ended (durably): this run's first record links to it. */
  private previous: Readonly<Record<string, { hash: string }>>;
  constructor(chainId = newChainId(), previous: Readonly<Record<string, { hash: string }>> = {}) {
    this.chainId = chainId;
    this.previous = previous;
  }

  /** Records were lost (a spool append failed): continue as a new run from the heads last made durable. */
  rewind(durable: Readonly<Record<string, { hash: string }>>): void {
    this.heads.clear();
    this.previous = durable;
    this.chainId = newChainId();
  }

  /** Where these workspaces' chains stand now (see restore). */
  mark(workspaceIds: Iterable<string>): AuditMark {
    return { chainId: this.chainId, heads: [...new Set(workspaceIds)].map((ws) => [ws, this.heads.get(ws)]) };
  }

  /**
   * Back to `mark`: the records appended since will not be written (an item failed later in the processor chain),
   * so the next one must not link to them. Nothing when the chain was rewound since (a new run).
   */
  restore(mark: AuditMark): void {
    if (mark.chainId !== this.chainId) return;
    for (const [ws, head] of mark.heads) {
      if (head) this.heads.set(ws, head);
      else this.heads.delete(ws);
    }
  }

  /** Builds the next record of the workspace's chain (synchronous, so order is the call order). */
  append(e: AuditEvent): AuditRecord {
    const head = this.heads.get(e.workspaceId) ?? { seq: 0, hash: this.previous[e.workspaceId]?.hash ?? GENESIS };
    const base = { recordType: 'audit' as const, ...e, chainId: this.chainId, seq: head.seq + 1, prevHash: head.hash };
    const rec: AuditRecord = { ...base, hash: auditHash(base) };
    this.heads.set(e.workspaceId, { seq: rec.seq, hash: rec.hash });
    return rec;
  }
}

/**
 * The pipeline's view of a chain built on its own thread: records of the chain's current run may be written; when
 * an append of them failed, the chain continues as a new run from the heads last made durable, and records of the
 * old run still waiting are refused (they may link to the lost ones).
 */
export function mainAuditChain(chain: AuditChain, durable: { current(): Readonly<Record<string, { hash: string }>> }) {
  const oldRun = (records: ReadonlyArray<object>) =>
    records.some(
      (r) => (r as Partial<AuditRecord>).recordType === 'audit' && (r as AuditRecord).chainId !== chain.chainId,
    );
  return {
    current: (records: ReadonlyArray<object>) => !oldRun(records),
    failed: (records: ReadonlyArray<object>) => {
      if (!oldRun(records) && records.some((r) => (r as Partial<AuditRecord>).recordType === 'audit'))
        chain.rewind(durable.current());
    },
  };
}

/** One audit record per ingestion request, spooled atomically with the spans it describes. */
export function auditProcessor(chain: AuditChain): Processor {
  return (batch, ctx) => {
    if (!ctx) return batch;
    const rejected = ctx.rejected ?? 0;
    const accepted = batch.spans.length + (ctx.records?.length ?? 0);
    batch.extra.push(
      chain.append({
        workspaceId: ctx.workspaceId,
        atMs: Date.now(),
        actor: ctx.keyId,
        action: 'ingest',
        route: ctx.route,
        outcome: rejected === 0 ? 'ok' : accepted ? 'partial' : 'rejected',
        accepted,
        rejected,
        details: JSON.stringify({ traces: new Set(batch.spans.map((s) => s.traceId)).size }),
      }),
    );
    return batch;
  };
}

export interface ChainProblem {
  chainId: string;
  seq: number;
  kind: 'gap' | 'prev_hash_mismatch' | 'hash_mismatch' | 'missing_record';
  message: string;
}

/** Re-checks audit chains: sequence continuity, links and each record's own hash (all in memory; see AuditCheck). */
export function verifyAuditChain(records: AuditRecord[]): ChainProblem[] {
  const check = new AuditCheck();
  check.records(records);
  return check.finish(new Set(records.map((r) => r.hash)));
}

/**
 * verifyAuditChain fed a page at a time in (chainId, seq) order. A chain continuing an earlier run names that run's
 * head (`continued()`); finish() is told which of those are still stored.
 */
export class AuditCheck {
  readonly problems: ChainProblem[] = [];
  private prev: AuditRecord | null = null;
  private readonly continuing: AuditRecord[] = [];
  /** key.create / key.revoke per key id, settings versions: what checkAuditCoverage looks for. */
  readonly seen = new Set<string>();

  continued(): string[] {
    return this.continuing.map((r) => r.prevHash);
  }

  records(records: AuditRecord[]): void {
    for (const r of records) {
      const prev = this.prev;
      const first = !prev || prev.chainId !== r.chainId;
      const expectSeq = first ? 1 : prev!.seq + 1;
      if (r.seq !== expectSeq)
        this.problems.push({
          chainId: r.chainId,
          seq: r.seq,
          kind: 'gap',
          message: `expected seq ${expectSeq}, found ${r.seq}`,
        });
      else if (first && r.prevHash !== GENESIS)
        this.continuing.push(r); // that record must still be there: see finish
      else if (r.prevHash !== (first ? GENESIS : prev!.hash))
        this.problems.push({
          chainId: r.chainId,
          seq: r.seq,
          kind: 'prev_hash_mismatch',
          message: 'prevHash does not match the previous record',
        });
      const { hash, ...rest } = r;
      if (auditHash(rest) !== hash)
        this.problems.push({
          chainId: r.chainId,
          seq: r.seq,
          kind: 'hash_mismatch',
          message: 'record content does not match its hash',
        });
      noteCoverage(r, this.seen);
      this.prev = r;
    }
  }

  finish(stored: ReadonlySet<string>): ChainProblem[] {
    for (const r of this.continuing) {
      if (!stored.has(r.prevHash))
        this.problems.push({
          chainId: r.chainId,
          seq: r.seq,
          kind: 'gap',
          message: 'the earlier run this chain continues is missing (its records were deleted)',
        });
    }
    this.continuing.length = 0;
    return this.problems;
  }
}

function noteCoverage(r: AuditRecord, seen: Set<string>): void {
  if (
    r.action !== 'key.create' &&
    r.action !== 'key.revoke' &&
    r.action !== 'policy.update' &&
    r.action !== 'settings.update'
  )
    return;
  let d: { keyId?: unknown; version?: unknown };
  try {
    d = JSON.parse(r.details) as typeof d;
  } catch {
    return;
  }
  if (r.action === 'key.create' || r.action === 'key.revoke') seen.add(`${r.action}:${String(d.keyId)}`);
  else seen.add(`settings:${String(d.version)}`);
}

/** What the audit log must hold for the workspace's current state: the change that made the settings version,
 * and each key's creation and revocation. */
export interface AuditedState {
  settingsVersion: number;
  keys: Array<{ keyId: string; revoked: boolean }>;
}

/**
 * Deleting the newest records of a chain breaks no link, so the chains alone cannot show it. The state those
 * records changed still names them: a settings version, a key, a revocation with no audit record of its own is
 * reported as `missing_record`.
 */
export function checkAuditCoverage(records: AuditRecord[] | ReadonlySet<string>, state: AuditedState): ChainProblem[] {
  let seen: ReadonlySet<string>;
  if (Array.isArray(records)) {
    const s = new Set<string>();
    for (const r of records) noteCoverage(r, s);
    seen = s;
  } else seen = records as ReadonlySet<string>;
  const problems: ChainProblem[] = [];
  const missing = (message: string) => problems.push({ chainId: '', seq: 0, kind: 'missing_record', message });
  if (state.settingsVersion > 0 && !seen.has(`settings:${state.settingsVersion}`))
    missing(`settings version ${state.settingsVersion} has no audit record of the change that made it`);
  for (const k of state.keys) {
    if (!seen.has(`key.create:${k.keyId}`)) missing(`key ${k.keyId} has no key.create audit record`);
    if (k.revoked && !seen.has(`key.revoke:${k.keyId}`))
      missing(`key ${k.keyId} is revoked but has no key.revoke audit record`);
  }
  return problems;
}
