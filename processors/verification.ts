// Integrity verification: each trace's spans, as stored in a batch, get a content hash (RFC 8785 + SHA-256)
// linked into a per-workspace hash chain. By default the chain head is signed with Ed25519 at most once a
// second per chain (a signed checkpoint covers every record before it, as certificate-transparency tree heads
// do) and once more at shutdown; with TRACEGATE_SIGN_EACH_TRACE every record gets its own signed checkpoint,
// i.e. a signature per trace, at ~45 µs of signing and one more stored row each.
import { randomBytes } from 'node:crypto';
import type { CheckpointRecord, VerificationRecord } from '../collector/enrichment-records.ts';
import type { Processor } from '../collector/pipeline-types.ts';
import type { SpanRecord } from '../collector/record.ts';
import { canonicalJson, GENESIS, sha256 } from './canonical.ts';
import { rememberJson } from '../collector/spool.ts';
import { signText, verifyText, type PublicKeyInfo, type SigningKey } from './signing.ts';

const CLOCK_SKEW_MS = 5_000;

const bySpanId = (a: SpanRecord, b: SpanRecord) => (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0);

/** The spans' stored content, in span id order. */
export function contentHash(spans: SpanRecord[]): string {
  return sha256(canonicalJson([...spans].sort(bySpanId)));
}

/**
 * contentHash, handing each span's canonical JSON to the spool frame (rememberJson) so it is serialized once.
 * JCS writes an array as its elements' JCS joined by commas, so the hash is contentHash's (a test checks).
 * Not when it holds U+FFFD, which may stand for a lone surrogate: attribute JSON keeps those as sent.
 */
export function contentHashKeepingJson(spans: SpanRecord[]): string {
  const parts = [...spans].sort(bySpanId).map((s) => {
    const json = canonicalJson(s);
    if (!json.includes('\ufffd')) rememberJson(s, json);
    return json;
  });
  return sha256(`[${parts.join(',')}]`);
}

export function linkHash(prevHash: string, r: Pick<VerificationRecord, 'seq' | 'traceId' | 'contentHash'>): string {
  return sha256(`${prevHash}|${r.seq}|${r.traceId}|${r.contentHash}`);
}

export function checkpointText(c: Pick<CheckpointRecord, 'workspaceId' | 'chainId' | 'seq' | 'headHash'>): string {
  return `tracegate-checkpoint-v1|${c.workspaceId}|${c.chainId}|${c.seq}|${c.headHash}`;
}

interface Head { seq: number; hash: string; signedSeq: number; signedAt: number }

/** The newest record of a chain: what the next run links to. */
export interface ChainHead { chainId: string; seq: number; hash: string }

/** The newest record per workspace among `records` of one chained type (verification, or audit). */
export function headsOf(records: ReadonlyArray<object>, type: 'verification' | 'audit' = 'verification'): Record<string, ChainHead> {
  const out: Record<string, ChainHead> = {};
  for (const r of records) {
    if ((r as { recordType?: string }).recordType !== type) continue;
    const v = r as { workspaceId: string; chainId: string; seq: number; hash: string };
    const cur = out[v.workspaceId];
    if (!cur || v.seq > cur.seq) out[v.workspaceId] = { chainId: v.chainId, seq: v.seq, hash: v.hash };
  }
  return out;
}

const newChainId = () => `v_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;

export class VerificationChain {
  chainId: string;
  private readonly heads = new Map<string, Head>();
  private readonly key: SigningKey;
  private readonly checkpointEveryMs: number;
  /** TRACEGATE_SIGN_EACH_TRACE: a signed checkpoint at every record, i.e. an Ed25519 signature per trace (~45 µs each). */
  private readonly signEach: boolean;
  private pending: CheckpointRecord[] = [];
  /** Where the previous run's chains ended (durably), per workspace: this run's chains continue from there. */
  private previous: Readonly<Record<string, ChainHead>>;
  /** Chain ids of this process's runs (see rewind). */
  private readonly runs = new Set<string>();
  constructor(key: SigningKey, checkpointEveryMs = 1000, chainId = newChainId(), signEach = false, previous: Readonly<Record<string, ChainHead>> = {}) {
    this.key = key;
    this.checkpointEveryMs = checkpointEveryMs;
    this.chainId = chainId;
    this.runs.add(chainId);
    this.signEach = signEach;
    this.previous = previous;
  }

  /**
   * Records were lost (a spool append failed): continue as a new run from the heads last made durable, as a
   * restarted collector would. Checkpoints of this process's runs may have been lost with them: the durable heads
   * of those runs are signed again, with the next batch.
   */
  rewind(durable: Readonly<Record<string, ChainHead>>, now: number): void {
    this.heads.clear();
    this.previous = durable;
    this.chainId = newChainId();
    this.pending = Object.entries(durable).filter(([, h]) => this.runs.has(h.chainId))
      .map(([workspaceId, h]) => this.checkpoint({ workspaceId, chainId: h.chainId, seq: h.seq, headHash: h.hash }, now));
    this.runs.add(this.chainId);
  }

  private checkpoint(base: Pick<CheckpointRecord, 'workspaceId' | 'chainId' | 'seq' | 'headHash'>, now: number): CheckpointRecord {
    return { recordType: 'checkpoint', ...base, keyId: this.key.keyId, signature: signText(this.key, checkpointText(base)), atMs: now };
  }

  private sign(workspaceId: string, h: Head, now: number): CheckpointRecord {
    h.signedSeq = h.seq;
    h.signedAt = now;
    return this.checkpoint({ workspaceId, chainId: this.chainId, seq: h.seq, headHash: h.hash }, now);
  }

  /** Verification records for the spans of one batch, grouped by trace. */
  records(spans: SpanRecord[], now: number): VerificationRecord[] {
    const byTrace = new Map<string, SpanRecord[]>();
    for (const s of spans) {
      const k = `${s.workspaceId}\u0000${s.traceId}`;
      const list = byTrace.get(k);
      if (list) list.push(s);
      else byTrace.set(k, [s]);
    }
    const out: VerificationRecord[] = [];
    for (const group of byTrace.values()) {
      const { workspaceId, traceId } = group[0]!;
      const head = this.head(workspaceId);
      const rec = {
        recordType: 'verification' as const, workspaceId, traceId,
        spanIds: group.map((s) => s.spanId), spanVersions: group.map((s) => s.ingestedAtMs),
        contentHash: contentHashKeepingJson(group), chainId: this.chainId, seq: head.seq + 1, prevHash: head.hash, createdAtMs: now,
      };
      const hash = linkHash(head.hash, rec);
      head.seq = rec.seq;
      head.hash = hash;
      out.push({ ...rec, hash });
      // The first record is signed at once: it also signs the link to the run before (its prevHash), and a chain
      // without any signature can then only be a rebuilt one (verify reports it).
      if (this.signEach || rec.seq === 1) this.pending.push(this.sign(workspaceId, head, now));
    }
    return out;
  }

  /** Signed checkpoints for chains whose unsigned tail is older than the interval (or all, with force). */
  checkpoints(now: number, force = false): CheckpointRecord[] {
    const out = this.pending;
    this.pending = [];
    for (const [workspaceId, h] of this.heads) {
      if (h.seq === h.signedSeq || (!force && now - h.signedAt < this.checkpointEveryMs)) continue;
      out.push(this.sign(workspaceId, h, now));
    }
    return out;
  }

  private head(workspaceId: string): Head {
    let h = this.heads.get(workspaceId);
    if (!h) {
      // A run's first record links to the last durable record of the run before, so deleting that whole run shows.
      h = { seq: 0, hash: this.previous[workspaceId]?.hash ?? GENESIS, signedSeq: 0, signedAt: 0 };
      this.heads.set(workspaceId, h);
    }
    return h;
  }
}

/** Runs last, so it hashes exactly what will be stored (after redaction and cost). */
export function verificationProcessor(chain: VerificationChain): Processor {
  return (batch) => {
    if (batch.spans.length === 0) return batch;
    const now = Date.now();
    for (const r of chain.records(batch.spans, now)) batch.extra.push(r);
    for (const c of chain.checkpoints(now)) batch.extra.push(c);
    return batch;
  };
}

// ---- re-checking ----

export interface VerifyProblem {
  kind: 'content_hash_mismatch' | 'span_missing' | 'unverified_span' | 'chain_gap' | 'prev_hash_mismatch' | 'link_hash_mismatch' | 'bad_signature' | 'unknown_key' | 'checkpoint_mismatch' | 'unsigned_chain' | 'checkpoint_missing';
  chainId: string;
  seq: number;
  traceId?: string;
  message: string;
}

export interface VerifyReport {
  ok: boolean;
  recordsChecked: number;
  tracesChecked: number;
  checkpointsChecked: number;
  superseded: number;        // records whose spans were later replaced by a newer delivery (not tampering)
  unsignedTail: number;      // records after the last checkpoint of their chain (signed about a second later, with a batch or by the idle signer, and at shutdown)
  problems: VerifyProblem[];
}

/**
 * Content: recompute each record's hash from the spans as stored now. `records` must be every record of the
 * trace: a stored span newer than a record is fine only when another record vouches for that newer version
 * (a later delivery), otherwise someone wrote it behind the collector's back.
 */
export function checkContent(records: VerificationRecord[], stored: SpanRecord[], settledBeforeMs = Infinity, nowMs = Infinity): { problems: VerifyProblem[]; superseded: number } {
  const check = new ContentCheck(records, settledBeforeMs, nowMs);
  check.records(records, new Map(stored.map((s) => [s.spanId, s])));
  check.stored(stored);
  return check.finish();
}

/** What the rules across records need of a stored span. */
type SpanVersion = Pick<SpanRecord, 'spanId' | 'traceId' | 'ingestedAtMs'>;

/**
 * checkContent in steps, so that a large trace is checked a part at a time: `records` for groups of its records
 * with the stored spans they name (a record's hash needs its own spans only), `stored` for every stored span of
 * the trace in parts (to find spans no record names), then `finish`. What is kept between steps is ids and
 * versions, not span content.
 */
export class ContentCheck {
  private readonly settledBeforeMs: number;
  private readonly now: () => number;
  private readonly problems: VerifyProblem[] = [];
  private readonly unverified: VerifyProblem[] = [];
  /** Every span id a record of the trace names. */
  private readonly named: Set<string>;
  // A record's span list is not under its chain hash: only a record whose content hash matches the stored spans
  // vouches for their versions (`matched`). A record naming a newer stored version is superseded only when such a
  // record covers that version; one naming no span at all vouches for nothing.
  private readonly matched = new Set<string>();
  // Records at the stored versions whose hash differs: fine only if a matching record covers the same versions
  // (two deliveries in the same millisecond with different content; storage keeps one of them).
  private readonly tied: VerificationRecord[] = [];
  private readonly newer: Array<{ r: VerificationRecord; later: SpanVersion[] }> = [];

  /** `all`: every record of the trace. `now`: the clock as the spans are read (a long check goes on for a while). */
  constructor(all: VerificationRecord[], settledBeforeMs = Infinity, now: number | (() => number) = Infinity) {
    this.settledBeforeMs = settledBeforeMs;
    this.now = typeof now === 'number' ? () => now : now;
    this.named = new Set(all.flatMap((r) => r.spanIds));
  }

  // A span received after `settledBeforeMs` may have its record still on the way (a live collector, or a long
  // verify run that read the records first). Only a recent receive time excuses it: one in the future (beyond
  // clock skew) is as forged as the span.
  private settling(s: SpanVersion): boolean {
    return s.ingestedAtMs >= this.settledBeforeMs && s.ingestedAtMs <= this.now() + CLOCK_SKEW_MS;
  }

  private rewritten(r: VerificationRecord, id: string, s: SpanVersion): VerifyProblem {
    return { kind: 'content_hash_mismatch', chainId: r.chainId, seq: r.seq, traceId: r.traceId, message: `span ${id} of trace ${r.traceId} was rewritten outside the collector (version ${s.ingestedAtMs} has no verification record that matches it)` };
  }

  /** Some records, in chain order, with (at least) the stored spans they name. */
  records(records: VerificationRecord[], byId: ReadonlyMap<string, SpanRecord>): void {
    for (const r of records) {
      if (r.spanIds.length === 0) { this.problems.push({ kind: 'content_hash_mismatch', chainId: r.chainId, seq: r.seq, traceId: r.traceId, message: `the record of trace ${r.traceId} names no span (its span list was emptied)` }); continue; }
      const spans: SpanRecord[] = [];
      const later: SpanVersion[] = [];
      let problem: VerifyProblem | null = null;
      r.spanIds.forEach((id, i) => {
        const s = byId.get(id);
        if (!s) problem ??= { kind: 'span_missing', chainId: r.chainId, seq: r.seq, traceId: r.traceId, message: `span ${id} is no longer stored` };
        else if (s.ingestedAtMs === r.spanVersions[i]) spans.push(s);
        else if (s.ingestedAtMs > r.spanVersions[i]!) later.push({ spanId: s.spanId, traceId: s.traceId, ingestedAtMs: s.ingestedAtMs });
        else problem ??= this.rewritten(r, id, s);
      });
      if (problem) this.problems.push(problem);
      else if (later.length) this.newer.push({ r, later });
      else if (contentHash(spans) !== r.contentHash) this.tied.push(r);
      else r.spanIds.forEach((id, i) => this.matched.add(`${id}@${r.spanVersions[i]}`));
    }
  }

  /** Stored spans of the trace (all of them, over one or more calls): a span no record names was written behind the collector's back (or with verification off). */
  stored(spans: readonly SpanVersion[]): void {
    for (const s of spans) {
      if (!this.named.has(s.spanId) && !this.settling(s)) this.unverified.push({ kind: 'unverified_span', chainId: '', seq: 0, traceId: s.traceId, message: `span ${s.spanId} of trace ${s.traceId} has no verification record` });
    }
  }

  finish(): { problems: VerifyProblem[]; superseded: number } {
    let superseded = 0;
    const problems = [...this.problems];
    for (const r of this.tied) {
      if (r.spanIds.every((id, i) => this.matched.has(`${id}@${r.spanVersions[i]}`))) superseded++;
      else problems.push({ kind: 'content_hash_mismatch', chainId: r.chainId, seq: r.seq, traceId: r.traceId, message: `stored content of trace ${r.traceId} does not match its hash` });
    }
    // What records superseded in part still list (a span re-delivered alone, its siblings not): no hash covers those.
    const listedOnly = new Set(this.newer.flatMap(({ r }) => r.spanIds.map((id, i) => `${id}@${r.spanVersions[i]}`)));
    for (const { r, later } of this.newer) {
      const unvouched = later.find((s) => !this.matched.has(`${s.spanId}@${s.ingestedAtMs}`) && !this.settling(s));
      if (!unvouched) superseded++;
      else if (listedOnly.has(`${unvouched.spanId}@${unvouched.ingestedAtMs}`)) {
        problems.push({ kind: 'content_hash_mismatch', chainId: r.chainId, seq: r.seq, traceId: r.traceId, message: `span ${unvouched.spanId} of trace ${r.traceId} cannot be checked: the only record of its stored version (${unvouched.ingestedAtMs}) was superseded in part by a later delivery of its sibling spans, and no hash covers it alone` });
      } else problems.push(this.rewritten(r, unvouched.spanId, unvouched));
    }
    problems.push(...this.unverified);
    return { problems, superseded };
  }
}

/** Chain continuity, link hashes and checkpoint signatures. Records must be in (chainId, seq) order. */
export function checkChain(records: VerificationRecord[], checkpoints: CheckpointRecord[], keys: PublicKeyInfo[], allHashes?: ReadonlySet<string>, settledBeforeMs = -Infinity): { problems: VerifyProblem[]; unsignedTail: number } {
  const problems: VerifyProblem[] = [];
  // Hashes of every record of the workspace (a chain may continue one that is not among `records`).
  const byHash = allHashes ?? new Set(records.map((r) => r.hash));
  const bySeq = new Map<string, VerificationRecord>();
  const lastSigned = new Map<string, number>();
  const lastSeq = new Map<string, number>();
  let prev: VerificationRecord | null = null;
  for (const r of records) {
    bySeq.set(`${r.chainId}|${r.seq}`, r);
    lastSeq.set(r.chainId, r.seq);
    const first = !prev || prev.chainId !== r.chainId;
    const expectSeq = first ? 1 : prev!.seq + 1;
    if (r.seq !== expectSeq) problems.push({ kind: 'chain_gap', chainId: r.chainId, seq: r.seq, message: `expected seq ${expectSeq}, found ${r.seq}: records are missing` });
    else if (first && r.prevHash !== GENESIS) {
      // Continues an earlier run's chain: that record must still be there.
      if (!byHash.has(r.prevHash)) problems.push({ kind: 'chain_gap', chainId: r.chainId, seq: r.seq, message: 'the earlier run this chain continues is missing (its records were deleted)' });
    } else if (r.prevHash !== (first ? GENESIS : prev!.hash)) problems.push({ kind: 'prev_hash_mismatch', chainId: r.chainId, seq: r.seq, traceId: r.traceId, message: 'prevHash does not match the previous record' });
    if (linkHash(r.prevHash, r) !== r.hash) problems.push({ kind: 'link_hash_mismatch', chainId: r.chainId, seq: r.seq, traceId: r.traceId, message: 'record fields do not match its chain hash' });
    prev = r;
  }
  const keyById = new Map(keys.map((k) => [k.keyId, k]));
  for (const c of checkpoints) {
    const key = keyById.get(c.keyId);
    if (!key) { problems.push({ kind: 'unknown_key', chainId: c.chainId, seq: c.seq, message: `checkpoint signed by unknown key ${c.keyId}` }); continue; }
    if (!verifyText(key.publicKeyPem, checkpointText(c), c.signature)) { problems.push({ kind: 'bad_signature', chainId: c.chainId, seq: c.seq, message: 'checkpoint signature does not verify' }); continue; }
    const at = bySeq.get(`${c.chainId}|${c.seq}`);
    if (!at || at.hash !== c.headHash) problems.push({ kind: 'checkpoint_mismatch', chainId: c.chainId, seq: c.seq, message: 'signed head does not match the stored chain' });
    lastSigned.set(c.chainId, Math.max(lastSigned.get(c.chainId) ?? 0, c.seq));
  }
  let unsignedTail = 0;
  for (const [chain, seq] of lastSeq) unsignedTail += seq - (lastSigned.get(chain) ?? 0);
  // Every chain signs its first record when it is made: a settled chain with no valid signature at all was rebuilt.
  for (const r of records) {
    if (r.seq === 1 && !lastSigned.has(r.chainId) && r.createdAtMs < settledBeforeMs) {
      problems.push({ kind: 'unsigned_chain', chainId: r.chainId, seq: 1, message: 'no record of this chain carries a signature (its checkpoints were deleted, or the chain was rebuilt)' });
    }
  }
  // While a chain grows, its head is signed with the next batch once the last signature is a second old: a record
  // that records made well after it follow, with no checkpoint at or after it, lost its checkpoints (deleted, so
  // that the records after the first one could be rewritten). A crashed run's unsigned tail is within a second.
  const newest = new Map<string, number>();
  for (const r of records) newest.set(r.chainId, Math.max(newest.get(r.chainId) ?? 0, r.createdAtMs));
  const reported = new Set<string>();
  for (const r of records) {
    if (reported.has(r.chainId) || r.seq <= (lastSigned.get(r.chainId) ?? 0) || !lastSigned.has(r.chainId)) continue;
    if (r.createdAtMs < newest.get(r.chainId)! - UNSIGNED_GRACE_MS) {
      reported.add(r.chainId);
      problems.push({ kind: 'checkpoint_missing', chainId: r.chainId, seq: r.seq, traceId: r.traceId, message: `no checkpoint covers record ${r.seq} although the chain went on for ${Math.round((newest.get(r.chainId)! - r.createdAtMs) / 1000)} s after it (its checkpoints were deleted)` });
    }
  }
  return { problems, unsignedTail };
}

/** How long records may follow an unsigned one before its missing checkpoint is a problem (the collector signs each second). */
export const UNSIGNED_GRACE_MS = 10_000;

/** A checkpoint's signature: signed by a known key over its own fields, or the problem. */
export function signatureProblem(c: CheckpointRecord, keys: PublicKeyInfo[]): VerifyProblem | null {
  const key = keys.find((k) => k.keyId === c.keyId);
  if (!key) return { kind: 'unknown_key', chainId: c.chainId, seq: c.seq, message: `checkpoint signed by unknown key ${c.keyId}` };
  if (!verifyText(key.publicKeyPem, checkpointText(c), c.signature)) return { kind: 'bad_signature', chainId: c.chainId, seq: c.seq, message: 'checkpoint signature does not verify' };
  return null;
}

/**
 * One stretch of a chain, seqs `from`..`to` as read (a run of missing seqs is one gap): every record's fields
 * against its hash, each linked to the one before it, the first one (seq 1) to genesis or to an earlier run's head
 * that still exists (`earlierRunExists`), and `checkpoint` (at `to`, its signature checked already, or null) over
 * the record stored there. The check of one trace's records: the stretch from the record before them to the first
 * checkpoint after them, whose signature reaches them through the links.
 */
export function checkChainSegment(segment: VerificationRecord[], from: number, to: number, checkpoint: CheckpointRecord | null, earlierRunExists: boolean): VerifyProblem[] {
  const problems: VerifyProblem[] = [];
  const bySeq = new Map(segment.map((r) => [r.seq, r]));
  const chainId = segment[0]?.chainId ?? checkpoint?.chainId ?? '';
  let prev: VerificationRecord | undefined;
  let missingFrom = 0;
  for (let seq = from; seq <= to; seq++) {
    const r = bySeq.get(seq);
    if (!r) {
      missingFrom ||= seq;
      prev = undefined;
      continue;
    }
    if (missingFrom) {
      problems.push({ kind: 'chain_gap', chainId, seq: missingFrom, message: `records ${missingFrom}${seq - 1 > missingFrom ? `–${seq - 1}` : ''} are missing: they were deleted` });
      missingFrom = 0;
    }
    if (seq === 1 && r.prevHash !== GENESIS && !earlierRunExists) problems.push({ kind: 'chain_gap', chainId, seq, message: 'the earlier run this chain continues is missing (its records were deleted)' });
    else if (prev && r.prevHash !== prev.hash) problems.push({ kind: 'prev_hash_mismatch', chainId, seq, traceId: r.traceId, message: 'prevHash does not match the previous record' });
    if (linkHash(r.prevHash, r) !== r.hash) problems.push({ kind: 'link_hash_mismatch', chainId, seq, traceId: r.traceId, message: 'record fields do not match its chain hash' });
    prev = r;
  }
  if (missingFrom) problems.push({ kind: 'chain_gap', chainId, seq: missingFrom, message: `records ${missingFrom}${to > missingFrom ? `–${to}` : ''} are missing: they were deleted` });
  if (checkpoint && bySeq.get(checkpoint.seq)?.hash !== checkpoint.headHash) problems.push({ kind: 'checkpoint_mismatch', chainId, seq: checkpoint.seq, message: 'signed head does not match the stored chain' });
  return problems;
}
