// Integrity verification: each trace's spans, as stored in a batch, get a content hash (RFC 8785 + SHA-256)
// linked into a per-workspace hash chain. By default the chain head is signed with Ed25519 at most once a
// second per chain (a signed checkpoint covers every record before it, as certificate-transparency tree heads
// do) and once more at shutdown; with TRACEGATE_SIGN_EACH_TRACE every record gets its own signed checkpoint,
// i.e. a signature per trace, at ~45 µs of signing and one more stored row each.
import { randomBytes } from 'node:crypto';
import type { CheckpointRecord, VerificationRecord } from '../core/enrichment-records.ts';
import type { Processor } from '../core/ports/ingest.ts';
import type { SpanRecord } from '../core/record.ts';
import { canonicalJson, GENESIS, sha256 } from './canonical.ts';
import { signText, verifyText, type PublicKeyInfo, type SigningKey } from './signing.ts';

const CLOCK_SKEW_MS = 5_000;

const bySpanId = (a: SpanRecord, b: SpanRecord) => (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0);

/** The spans' stored content, in span id order. */
export function contentHash(spans: SpanRecord[]): string {
  return sha256(canonicalJson([...spans].sort(bySpanId)));
}

/**
 * contentHash, putting each span's canonical JSON in `keep` for the spool frame, so it is serialized once.
 * JCS writes an array as its elements' JCS joined by commas, so the hash is contentHash's (a test checks).
 * Not when it holds U+FFFD, which may stand for a lone surrogate: attribute JSON keeps those as sent.
 */
export function contentHashKeepingJson(spans: SpanRecord[], keep: Map<object, string>): string {
  const parts = [...spans].sort(bySpanId).map((s) => {
    const json = canonicalJson(s);
    if (!json.includes('\ufffd')) keep.set(s, json);
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

interface Head {
  seq: number;
  hash: string;
  signedSeq: number;
  signedAt: number;
}

export interface VerificationMark {
  chainId: string;
  heads: Array<[string, Head | undefined]>;
  pending: number;
}

/** The newest record of a chain: what the next run links to. */
export interface ChainHead {
  chainId: string;
  seq: number;
  hash: string;
}

/** The newest record per workspace among `records` of one chained type (verification, or audit). */
export function headsOf(
  records: ReadonlyArray<object>,
  type: 'verification' | 'audit' = 'verification',
): Record<string, ChainHead> {
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
  constructor(
    key: SigningKey,
    checkpointEveryMs = 1000,
    chainId = newChainId(),
    signEach = false,
    previous: Readonly<Record<string, ChainHead>> = {},
  ) {
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
    this.pending = Object.entries(durable)
      .filter(([, h]) => this.runs.has(h.chainId))
      .map(([workspaceId, h]) =>
        this.checkpoint({ workspaceId, chainId: h.chainId, seq: h.seq, headHash: h.hash }, now),
      );
    this.runs.add(this.chainId);
  }

  /** Where these workspaces' chains stand now, and the checkpoints waiting (see restore). */
  mark(workspaceIds: Iterable<string>): VerificationMark {
    const heads: VerificationMark['heads'] = [];
    for (const ws of new Set(workspaceIds)) {
      const h = this.heads.get(ws);
      heads.push([ws, h ? { ...h } : undefined]);
    }
    return { chainId: this.chainId, heads, pending: this.pending.length };
  }

  /**
   * Back to `mark`: the records made since will not be written (an item failed later in the chain), so the next
   * one must not link to them, and checkpoints signed since (of those records) are dropped. Nothing when the chain
   * was rewound since (a new run).
   */
  restore(mark: VerificationMark): void {
    if (mark.chainId !== this.chainId) return;
    for (const [ws, head] of mark.heads) {
      const h = this.heads.get(ws);
      if (!head) this.heads.delete(ws);
      else if (h) Object.assign(h, head);
      else this.heads.set(ws, { ...head });
    }
    this.pending.length = Math.min(this.pending.length, mark.pending);
  }

  private checkpoint(
    base: Pick<CheckpointRecord, 'workspaceId' | 'chainId' | 'seq' | 'headHash'>,
    now: number,
  ): CheckpointRecord {
    return {
      recordType: 'checkpoint',
      ...base,
      keyId: this.key.keyId,
      signature: signText(this.key, checkpointText(base)),
      atMs: now,
    };
  }

  private sign(workspaceId: string, h: Head, now: number): CheckpointRecord {
    h.signedSeq = h.seq;
    h.signedAt = now;
    return this.checkpoint({ workspaceId, chainId: this.chainId, seq: h.seq, headHash: h.hash }, now);
  }

  /** Verification records for the spans of one batch, grouped by trace; each span's canonical JSON goes in `keep`. */
  records(spans: SpanRecord[], now: number, keep: Map<object, string> = new Map()): VerificationRecord[] {
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
        recordType: 'verification' as const,
        workspaceId,
        traceId,
        spanIds: group.map((s) => s.spanId),
        spanVersions: group.map((s) => s.ingestedAtMs),
        contentHash: contentHashKeepingJson(group, keep),
        chainId: this.chainId,
        seq: head.seq + 1,
        prevHash: head.hash,
        createdAtMs: now,
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
    batch.json ??= new Map();
    for (const r of chain.records(batch.spans, now, batch.json)) batch.extra.push(r);
    for (const c of chain.checkpoints(now)) batch.extra.push(c);
    return batch;
  };
}

// ---- re-checking ----

export interface VerifyProblem {
  kind:
    | 'content_hash_mismatch'
    | 'span_missing'
    | 'unverified_span'
    | 'chain_gap'
    | 'prev_hash_mismatch'
    | 'link_hash_mismatch'
    | 'bad_signature'
    | 'unknown_key'
    | 'checkpoint_mismatch'
    | 'unsigned_chain'
    | 'checkpoint_missing';
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
  superseded: number; // records whose spans were later replaced by a newer delivery (not tampering)
  unsignedTail: number; // records after the last checkpoint of their chain (signed about a second later, with a batch or by the idle signer, and at shutdown)
  problems: VerifyProblem[];
  /** Problems found past the listed ones (a workspace report lists at most MAX_LISTED_PROBLEMS, chain, content and audit together). */
  problemsOmitted?: number;
}

/**
 * Content: recompute each record's hash from the spans as stored now. `records` must be every record of the
 * trace: a stored span newer than a record is fine only when another record vouches for that newer version
 * (a later delivery), otherwise someone wrote it behind the collector's back.
 */
export function checkContent(
  records: VerificationRecord[],
  stored: SpanRecord[],
  settledBeforeMs = Infinity,
  nowMs = Infinity,
): { problems: VerifyProblem[]; superseded: number } {
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
    return {
      kind: 'content_hash_mismatch',
      chainId: r.chainId,
      seq: r.seq,
      traceId: r.traceId,
      message: `span ${id} of trace ${r.traceId} was rewritten outside the collector (version ${s.ingestedAtMs} has no verification record that matches it)`,
    };
  }

  /** Some records, in chain order, with (at least) the stored spans they name. */
  records(records: VerificationRecord[], byId: ReadonlyMap<string, SpanRecord>): void {
    for (const r of records) {
      if (r.spanIds.length === 0) {
        this.problems.push({
          kind: 'content_hash_mismatch',
          chainId: r.chainId,
          seq: r.seq,
          traceId: r.traceId,
          message: `the record of trace ${r.traceId} names no span (its span list was emptied)`,
        });
        continue;
      }
      const spans: SpanRecord[] = [];
      const later: SpanVersion[] = [];
      let problem: VerifyProblem | null = null;
      r.spanIds.forEach((id, i) => {
        const s = byId.get(id);
        if (!s)
          problem ??= {
            kind: 'span_missing',
            chainId: r.chainId,
            seq: r.seq,
            traceId: r.traceId,
            message: `span ${id} is no longer stored`,
          };
        else if (s.ingestedAtMs === r.spanVersions[i]) spans.push(s);
        else if (s.ingestedAtMs > r.spanVersions[i]!)
          later.push({ spanId: s.spanId, traceId: s.traceId, ingestedAtMs: s.ingestedAtMs });
        else problem ??= this.rewritten(r, id, s);
      });
      if (problem) this.problems.push(problem);
      else if (later.length) this.newer.push({ r, later });
      else if (contentHash(spans) !== r.contentHash) this.tied.push(r);
      else
        r.spanIds.forEach((id, i) => {
          this.matched.add(`${id}@${r.spanVersions[i]}`);
        });
    }
  }

  /** Stored spans of the trace (all of them, over one or more calls): a span no record names was written behind the collector's back (or with verification off). */
  stored(spans: readonly SpanVersion[]): void {
    for (const s of spans) {
      if (!this.named.has(s.spanId) && !this.settling(s))
        this.unverified.push({
          kind: 'unverified_span',
          chainId: '',
          seq: 0,
          traceId: s.traceId,
          message: `span ${s.spanId} of trace ${s.traceId} has no verification record`,
        });
    }
  }

  finish(): { problems: VerifyProblem[]; superseded: number } {
    let superseded = 0;
    const problems = [...this.problems];
    for (const r of this.tied) {
      if (r.spanIds.every((id, i) => this.matched.has(`${id}@${r.spanVersions[i]}`))) superseded++;
      else
        problems.push({
          kind: 'content_hash_mismatch',
          chainId: r.chainId,
          seq: r.seq,
          traceId: r.traceId,
          message: `stored content of trace ${r.traceId} does not match its hash`,
        });
    }
    // What records superseded in part still list (a span re-delivered alone, its siblings not): no hash covers those.
    const listedOnly = new Set(this.newer.flatMap(({ r }) => r.spanIds.map((id, i) => `${id}@${r.spanVersions[i]}`)));
    for (const { r, later } of this.newer) {
      const unvouched = later.find((s) => !this.matched.has(`${s.spanId}@${s.ingestedAtMs}`) && !this.settling(s));
      if (!unvouched) superseded++;
      else if (listedOnly.has(`${unvouched.spanId}@${unvouched.ingestedAtMs}`)) {
        problems.push({
          kind: 'content_hash_mismatch',
          chainId: r.chainId,
          seq: r.seq,
          traceId: r.traceId,
          message: `span ${unvouched.spanId} of trace ${r.traceId} cannot be checked: the only record of its stored version (${unvouched.ingestedAtMs}) was superseded in part by a later delivery of its sibling spans, and no hash covers it alone`,
        });
      } else problems.push(this.rewritten(r, unvouched.spanId, unvouched));
    }
    problems.push(...this.unverified);
    return { problems, superseded };
  }
}

/** Chain continuity, link hashes and checkpoint signatures, all in memory (tests; verifyWorkspace streams ChainCheck). Records must be in (chainId, seq) order. */
export function checkChain(
  records: VerificationRecord[],
  checkpoints: CheckpointRecord[],
  keys: PublicKeyInfo[],
  allHashes?: ReadonlySet<string>,
  settledBeforeMs = -Infinity,
): { problems: VerifyProblem[]; unsignedTail: number } {
  const check = new ChainCheck(keys, settledBeforeMs);
  check.records(records, checkpoints);
  return check.finish(allHashes ?? new Set(records.map((r) => r.hash)));
}

/** What a chain check keeps per chain (not its records). */
interface ChainFacts {
  lastSeq: number;
  newest: number;
  /** Seq of its newest checkpoint whose signature verifies (0: none). */
  lastSigned: number;
  /** Its record 1's creation time, when stored. */
  firstAt: number | null;
  /** After its newest valid checkpoint so far: the first record, and the oldest one. */
  tailFirst: VerificationRecord | null;
  tailOldest: VerificationRecord | null;
}

/**
 * (chainId, seq) order as storage sorts it: chain ids by their UTF-8 bytes (JavaScript compares UTF-16 code units,
 * which differ past the BMP), then seq.
 */
export function chainOrder(a: { chainId: string; seq: number }, b: { chainId: string; seq: number }): number {
  if (a.chainId === b.chainId) return a.seq - b.seq;
  return Buffer.compare(Buffer.from(a.chainId), Buffer.from(b.chainId));
}

/**
 * Chain continuity, link hashes and checkpoint signatures over a workspace's records and checkpoints, fed a page
 * at a time in (chainId, seq) order, so that memory is per chain, not per record. A checkpoint is matched against
 * the record at its position as the two streams are merged. Records continuing an earlier run's chain name its
 * head (`continued()`): finish() is told which of those the workspace still holds.
 */
export class ChainCheck {
  readonly problems: VerifyProblem[] = [];
  recordsChecked = 0;
  checkpointsChecked = 0;
  private readonly keyById: Map<string, PublicKeyInfo>;
  private readonly settledBeforeMs: number;
  /** Records 1 that continue an earlier run: that run's head must still be stored (one per chain). */
  private readonly continuing: VerificationRecord[] = [];
  private readonly chains = new Map<string, ChainFacts>();
  private prev: VerificationRecord | null = null;
  /** Checkpoints read but not yet merged (they lie after the records seen so far). */
  private queued: CheckpointRecord[] = [];

  constructor(keys: PublicKeyInfo[], settledBeforeMs = -Infinity) {
    this.keyById = new Map(keys.map((k) => [k.keyId, k]));
    this.settledBeforeMs = settledBeforeMs;
  }

  /** The earlier runs' heads that chains seen so far continue (finish needs to know which are still stored). */
  continued(): string[] {
    return this.continuing.map((r) => r.prevHash);
  }

  private facts(chainId: string): ChainFacts {
    let f = this.chains.get(chainId);
    if (!f)
      this.chains.set(
        chainId,
        (f = { lastSeq: 0, newest: -Infinity, lastSigned: 0, firstAt: null, tailFirst: null, tailOldest: null }),
      );
    return f;
  }

  /** A checkpoint, merged before the first record at or after its position; `at`: the record at its position, if any. */
  private checkpoint(c: CheckpointRecord, at: VerificationRecord | null): void {
    this.checkpointsChecked++;
    const key = this.keyById.get(c.keyId);
    if (!key) {
      this.problems.push({
        kind: 'unknown_key',
        chainId: c.chainId,
        seq: c.seq,
        message: `checkpoint signed by unknown key ${c.keyId}`,
      });
      return;
    }
    if (!verifyText(key.publicKeyPem, checkpointText(c), c.signature)) {
      this.problems.push({
        kind: 'bad_signature',
        chainId: c.chainId,
        seq: c.seq,
        message: 'checkpoint signature does not verify',
      });
      return;
    }
    if (!at || at.hash !== c.headHash)
      this.problems.push({
        kind: 'checkpoint_mismatch',
        chainId: c.chainId,
        seq: c.seq,
        message: 'signed head does not match the stored chain',
      });
    const f = this.facts(c.chainId);
    f.lastSigned = Math.max(f.lastSigned, c.seq);
    f.tailFirst = null;
    f.tailOldest = null;
  }

  /**
   * The next records in chain order, with the checkpoints read since the last call (in chain order too): every
   * checkpoint up to the last record's position must have been given by then.
   */
  records(records: VerificationRecord[], checkpoints: CheckpointRecord[] = []): void {
    if (checkpoints.length) this.queued = this.queued.length ? [...this.queued, ...checkpoints] : checkpoints;
    let q = 0;
    for (const r of records) {
      this.recordsChecked++;
      while (q < this.queued.length && chainOrder(this.queued[q]!, r) <= 0) {
        const c = this.queued[q++]!;
        this.checkpoint(c, chainOrder(c, r) === 0 ? r : null);
      }
      const prev = this.prev;
      const first = !prev || prev.chainId !== r.chainId;
      const expectSeq = first ? 1 : prev!.seq + 1;
      if (r.seq !== expectSeq)
        this.problems.push({
          kind: 'chain_gap',
          chainId: r.chainId,
          seq: r.seq,
          message: `expected seq ${expectSeq}, found ${r.seq}: records are missing`,
        });
      else if (first && r.prevHash !== GENESIS)
        this.continuing.push(r); // that record must still be there: see finish
      else if (r.prevHash !== (first ? GENESIS : prev!.hash))
        this.problems.push({
          kind: 'prev_hash_mismatch',
          chainId: r.chainId,
          seq: r.seq,
          traceId: r.traceId,
          message: 'prevHash does not match the previous record',
        });
      if (linkHash(r.prevHash, r) !== r.hash)
        this.problems.push({
          kind: 'link_hash_mismatch',
          chainId: r.chainId,
          seq: r.seq,
          traceId: r.traceId,
          message: 'record fields do not match its chain hash',
        });
      const f = this.facts(r.chainId);
      f.lastSeq = r.seq;
      f.newest = Math.max(f.newest, r.createdAtMs);
      if (r.seq === 1) f.firstAt = r.createdAtMs;
      if (r.seq > f.lastSigned) {
        f.tailFirst ??= r;
        if (!f.tailOldest || r.createdAtMs < f.tailOldest.createdAtMs) f.tailOldest = r;
      }
      this.prev = r;
    }
    this.queued = this.queued.slice(q);
  }

  /** Checkpoints past every record (read after the last page of records). */
  trailing(checkpoints: CheckpointRecord[]): void {
    for (const c of [...this.queued, ...checkpoints]) this.checkpoint(c, null);
    this.queued = [];
  }

  /** After the last page: what needs a whole chain. `stored`: which of continued() the workspace holds. */
  finish(stored: ReadonlySet<string>): { problems: VerifyProblem[]; unsignedTail: number } {
    this.trailing([]);
    for (const r of this.continuing) {
      if (!stored.has(r.prevHash))
        this.problems.push({
          kind: 'chain_gap',
          chainId: r.chainId,
          seq: r.seq,
          message: 'the earlier run this chain continues is missing (its records were deleted)',
        });
    }
    this.continuing.length = 0;
    let unsignedTail = 0;
    for (const [chainId, f] of this.chains) {
      if (f.newest === -Infinity) continue; // checkpoints only
      unsignedTail += Math.max(0, f.lastSeq - f.lastSigned);
      // Every chain signs its first record when it is made: a settled chain with no valid signature at all was rebuilt.
      if (f.lastSigned === 0) {
        if (f.firstAt !== null && f.firstAt < this.settledBeforeMs)
          this.problems.push({
            kind: 'unsigned_chain',
            chainId,
            seq: 1,
            message:
              'no record of this chain carries a signature (its checkpoints were deleted, or the chain was rebuilt)',
          });
        continue;
      }
      // While a chain grows, its head is signed with the next batch once the last signature is a second old: a record
      // that records made well after it follow, with no checkpoint at or after it, lost its checkpoints (deleted, so
      // that the records after the first one could be rewritten). A crashed run's unsigned tail is within a second.
      const late = [f.tailFirst, f.tailOldest].find((r) => r && r.createdAtMs < f.newest - UNSIGNED_GRACE_MS);
      if (late)
        this.problems.push({
          kind: 'checkpoint_missing',
          chainId,
          seq: late.seq,
          traceId: late.traceId,
          message: `no checkpoint covers record ${late.seq} although the chain went on for ${Math.round((f.newest - late.createdAtMs) / 1000)} s after it (its checkpoints were deleted)`,
        });
    }
    return { problems: this.problems, unsignedTail };
  }
}

/** How long records may follow an unsigned one before its missing checkpoint is a problem (the collector signs each second). */
export const UNSIGNED_GRACE_MS = 10_000;

/** A checkpoint's signature: signed by a known key over its own fields, or the problem. */
export function signatureProblem(c: CheckpointRecord, keys: PublicKeyInfo[]): VerifyProblem | null {
  const key = keys.find((k) => k.keyId === c.keyId);
  if (!key)
    return {
      kind: 'unknown_key',
      chainId: c.chainId,
      seq: c.seq,
      message: `checkpoint signed by unknown key ${c.keyId}`,
    };
  if (!verifyText(key.publicKeyPem, checkpointText(c), c.signature))
    return { kind: 'bad_signature', chainId: c.chainId, seq: c.seq, message: 'checkpoint signature does not verify' };
  return null;
}

/**
 * One stretch of a chain, seqs `from`..`to` as read (a run of missing seqs is one gap): every record's fields
 * against its hash, each linked to the one before it, the first one (seq 1) to genesis or to an earlier run's head
 * that still exists (`earlierRunExists`), and `checkpoint` (at `to`, its signature checked already, or null) over
 * the record stored there. The check of one trace's records: the stretch from the record before them to the first
 * checkpoint after them, whose signature reaches them through the links.
 */
export function checkChainSegment(
  segment: VerificationRecord[],
  from: number,
  to: number,
  checkpoint: CheckpointRecord | null,
  earlierRunExists: boolean,
): VerifyProblem[] {
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
      problems.push({
        kind: 'chain_gap',
        chainId,
        seq: missingFrom,
        message: `records ${missingFrom}${seq - 1 > missingFrom ? `–${seq - 1}` : ''} are missing: they were deleted`,
      });
      missingFrom = 0;
    }
    if (seq === 1 && r.prevHash !== GENESIS && !earlierRunExists)
      problems.push({
        kind: 'chain_gap',
        chainId,
        seq,
        message: 'the earlier run this chain continues is missing (its records were deleted)',
      });
    else if (prev && r.prevHash !== prev.hash)
      problems.push({
        kind: 'prev_hash_mismatch',
        chainId,
        seq,
        traceId: r.traceId,
        message: 'prevHash does not match the previous record',
      });
    if (linkHash(r.prevHash, r) !== r.hash)
      problems.push({
        kind: 'link_hash_mismatch',
        chainId,
        seq,
        traceId: r.traceId,
        message: 'record fields do not match its chain hash',
      });
    prev = r;
  }
  if (missingFrom)
    problems.push({
      kind: 'chain_gap',
      chainId,
      seq: missingFrom,
      message: `records ${missingFrom}${to > missingFrom ? `–${to}` : ''} are missing: they were deleted`,
    });
  if (checkpoint && bySeq.get(checkpoint.seq)?.hash !== checkpoint.headHash)
    problems.push({
      kind: 'checkpoint_mismatch',
      chainId,
      seq: checkpoint.seq,
      message: 'signed head does not match the stored chain',
    });
  return problems;
}
