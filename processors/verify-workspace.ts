// Re-checks stored data against its verification records: used by the trace route and `tracegate verify`.
import type { ChainPos, SpanPage, Storage, TraceSize } from '../core/ports/storage.ts';
import type { CheckpointRecord, VerificationRecord } from '../core/enrichment-records.ts';
import type { SpanRecord } from '../core/record.ts';
import { AuditCheck, checkAuditCoverage, type ChainProblem } from './audit.ts';
import type { PublicKeyInfo } from './signing.ts';
import { GENESIS } from './canonical.ts';
import {
  ChainCheck,
  chainOrder,
  checkChainSegment,
  checkContent,
  ContentCheck,
  signatureProblem,
  UNSIGNED_GRACE_MS,
  type VerifyProblem,
  type VerifyReport,
} from './verification.ts';

/** Spans received this recently are not judged unverified: on a live collector their records may still be in flight. */
export const SETTLE_MS = 30_000;

/** Traces read per storage call while verifying a workspace. */
const READ_BATCH = 500;
/**
 * Spans read per storage call, about: more traces of a workspace are read together while their spans stay under
 * it, and a trace larger than it is checked a part at a time (read whole, a large trace exceeded the embedded store's
 * memory limit).
 */
export const SPANS_PER_READ = 5_000;
/**
 * Bytes of span text read per storage call, about: a chunk of traces, a part of a large trace or the spans of some
 * records stay under it (a span reaching it ends the read). Counting spans alone, a read of large spans took a
 * large share of the heap.
 */
export const BYTES_PER_READ = 64 * 1024 * 1024;

/** How much one storage call reads: spans (and bytes of their text) and chain records. */
export interface ReadLimits {
  spans: number;
  bytes: number;
  chainPage: number;
}
/** The defaults, with the positive limits given (another value would make every weight NaN and no chunk split). */
function limitsOf(l: Partial<ReadLimits>): ReadLimits {
  const out: ReadLimits = { spans: SPANS_PER_READ, bytes: BYTES_PER_READ, chainPage: CHAIN_PAGE };
  for (const k of ['spans', 'bytes', 'chainPage'] as const) {
    const v = l[k];
    if (v !== undefined && v > 0) out[k] = v;
  }
  return out;
}

const namedSpans = (records: VerificationRecord[]) => records.reduce((n, r) => n + r.spanIds.length, 0);

/**
 * Consecutive runs of `items` of at most `maxItems` items and, past the first item, `maxWeight` in all (an item
 * weighing more than maxWeight makes a run of its own).
 */
function runs<T>(items: readonly T[], weight: (t: T) => number, maxItems: number, maxWeight: number): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  let w = 0;
  for (const t of items) {
    if (cur.length && (cur.length === maxItems || w + weight(t) > maxWeight)) {
      out.push(cur);
      cur = [];
      w = 0;
    }
    cur.push(t);
    w += weight(t);
  }
  if (cur.length) out.push(cur);
  return out;
}

/** Every stored span of a trace, a part at a time (ids and versions are all `each` needs to keep). */
async function inParts(
  storage: Storage,
  workspaceId: string,
  traceId: string,
  lim: ReadLimits,
  each: (part: SpanRecord[]) => void,
): Promise<void> {
  for (let after: SpanPage['after']; ; ) {
    const { spans, more } = await storage.getTracePart(workspaceId, traceId, {
      limit: lim.spans,
      maxBytes: lim.bytes,
      ...(after ? { after } : {}),
    });
    each(spans);
    if (!more || spans.length === 0) return;
    after = { startNs: spans.at(-1)!.startTimeNs, spanId: spans.at(-1)!.spanId };
  }
}

/**
 * A large trace's content, a part at a time: its records in groups with the spans they name (a group's sizes first,
 * then runs of its records whose spans fit the byte budget), then its stored spans.
 */
async function checkInParts(
  storage: Storage,
  workspaceId: string,
  traceId: string,
  records: VerificationRecord[],
  settledBeforeMs: number,
  now: () => number,
  lim: ReadLimits,
) {
  const check = new ContentCheck(records, settledBeforeMs, now);
  const idsOf = (rs: VerificationRecord[]) => [...new Set(rs.flatMap((r) => r.spanIds))];
  for (const group of runs(records, (r) => r.spanIds.length, Infinity, lim.spans)) {
    const sizes = await storage.spanSizes(workspaceId, traceId, idsOf(group));
    for (const run of runs(
      group,
      (r) => r.spanIds.reduce((n, id) => n + (sizes.get(id) ?? 0), 0),
      Infinity,
      lim.bytes,
    )) {
      const spans = await storage.getSpans(workspaceId, traceId, idsOf(run));
      check.records(run, new Map(spans.map((s) => [s.spanId, s])));
    }
  }
  await inParts(storage, workspaceId, traceId, lim, (part) => check.stored(part));
  return check.finish();
}

/**
 * How much of one read a trace takes (1: all of it), by its spans (a chunk of traces reads up to four parts' worth)
 * and its bytes; Infinity for a trace read a part at a time.
 */
function share(lim: ReadLimits, spans: number, bytes: number): number {
  return spans > lim.spans || bytes > lim.bytes ? Infinity : Math.max(spans / (lim.spans * 4), bytes / lim.bytes);
}

/** Records, checkpoints and audit records read per storage call: the whole check holds about this many at once. */
export const CHAIN_PAGE = 5_000;
/** Problems listed in a report; past this many they are only counted (a workspace rewritten wholesale has millions). */
export const MAX_LISTED_PROBLEMS = 1_000;

/** A chain table, a page at a time in (chainId, seq) order. */
async function* chainPages<T extends ChainPos>(
  read: (after: ChainPos | null, limit: number) => Promise<T[]>,
  limit: number,
): AsyncGenerator<T[]> {
  for (let after: ChainPos | null = null; ; ) {
    const page = await read(after, limit);
    if (page.length) yield page;
    if (page.length < limit) return;
    after = { chainId: page.at(-1)!.chainId, seq: page.at(-1)!.seq };
  }
}

/** Problems of a report: the first MAX_LISTED_PROBLEMS listed, the rest counted. */
class ProblemList<P> {
  readonly listed: P[] = [];
  omitted = 0;
  add(ps: readonly P[]): void {
    for (const p of ps)
      if (this.listed.length < MAX_LISTED_PROBLEMS) this.listed.push(p);
      else this.omitted++;
  }
}

/**
 * Content of the traces whose first record (in chain order) is in `page`: each trace with every record it has (a
 * trace re-delivered later has records further on), read in chunks that fit a read (ReadLimits); a larger trace a part at a time.
 */
async function checkPageContent(
  storage: Storage,
  workspaceId: string,
  page: VerificationRecord[],
  settledBeforeMs: number,
  upTo: () => number,
  lim: ReadLimits,
  out: ProblemList<VerifyProblem>,
) {
  const ids = [...new Set(page.map((r) => r.traceId))];
  const all = await storage.verificationOfTraces(workspaceId, ids);
  // A trace whose first record lies before this page was checked with that page.
  const mine = ids.filter((t) => {
    const first = all.get(t)?.[0];
    return first !== undefined && chainOrder(first, page[0]!) >= 0;
  });
  const stored = await storage.traceSizes(workspaceId, mine);
  const weight = (t: string) =>
    share(lim, Math.max(namedSpans(all.get(t)!), stored.get(t)?.spans ?? 0), stored.get(t)?.bytes ?? 0);
  let superseded = 0;
  for (const chunk of runs(mine, weight, READ_BATCH, 1)) {
    if (weight(chunk[0]!) === Infinity) {
      const res = await checkInParts(storage, workspaceId, chunk[0]!, all.get(chunk[0]!)!, settledBeforeMs, upTo, lim);
      out.add(res.problems);
      superseded += res.superseded;
      continue;
    }
    const spans = await storage.getTraces(workspaceId, chunk);
    const until = upTo();
    for (const traceId of chunk) {
      const res = checkContent(all.get(traceId)!, spans.get(traceId) ?? [], settledBeforeMs, until);
      out.add(res.problems);
      superseded += res.superseded;
    }
  }
  return { traces: mine.length, superseded };
}

/** Traces stored with no verification record at all (inserted straight into storage, or stored with verification off). */
async function unnamedTraces(
  storage: Storage,
  workspaceId: string,
  settledBeforeMs: number,
  upTo: () => number,
  lim: ReadLimits,
  out: ProblemList<VerifyProblem>,
) {
  let unverified = 0;
  for (let after: string | null = null; ; ) {
    const page = await storage.unverifiedTraces(workspaceId, after, READ_BATCH * 2);
    const weight = (t: TraceSize) => share(lim, t.spans, t.bytes);
    for (const chunk of runs(page, weight, READ_BATCH, 1)) {
      const spans =
        weight(chunk[0]!) === Infinity
          ? null
          : await storage.getTraces(
              workspaceId,
              chunk.map((t) => t.traceId),
            );
      const until = upTo() + 5_000;
      for (const t of chunk) {
        const recent = (sp: SpanRecord) => sp.ingestedAtMs >= settledBeforeMs && sp.ingestedAtMs <= until;
        let allRecent = true;
        if (spans) allRecent = (spans.get(t.traceId) ?? []).every(recent);
        else
          await inParts(storage, workspaceId, t.traceId, lim, (part) => {
            allRecent &&= part.every(recent);
          });
        if (allRecent) continue;
        unverified++;
        out.add([
          {
            kind: 'unverified_span',
            chainId: '',
            seq: 0,
            traceId: t.traceId,
            message: `trace ${t.traceId} (${t.spans} span${t.spans === 1 ? '' : 's'}) has no verification record`,
          },
        ]);
      }
    }
    if (page.length < READ_BATCH * 2) return unverified;
    after = page.at(-1)!.traceId;
  }
}

/**
 * A workspace's verification and audit chains and its stored content, read a page at a time: memory stays about
 * CHAIN_PAGE records and a read's spans (SPANS_PER_READ, BYTES_PER_READ) whatever the workspace holds (read whole,
 * its heap grew with the workspace). `limits` makes reads smaller (tests).
 */
export async function verifyWorkspace(
  storage: Storage,
  workspaceId: string,
  keys: PublicKeyInfo[],
  now = Date.now(),
  limits: Partial<ReadLimits> = {},
): Promise<VerifyReport & { audit: ChainProblem[] }> {
  const lim = limitsOf(limits);
  const page = lim.chainPage;
  const settledBeforeMs = now - SETTLE_MS;
  // Spans ingested while a long run goes on are as new as the run: the upper bound follows the clock.
  const upTo = () => Math.max(now, Date.now());
  const chain = new ChainCheck(keys, settledBeforeMs);
  const content = new ProblemList<VerifyProblem>();
  let traces = 0;
  let superseded = 0;
  // Checkpoints are read ahead of the records: each page of records is checked with every checkpoint up to its end.
  const checkpoints = chainPages((after, limit) => storage.checkpointPage(workspaceId, after, limit), page);
  let ahead: CheckpointRecord[] = [];
  let more = true;
  for await (const records of chainPages((after, limit) => storage.verificationPage(workspaceId, after, limit), page)) {
    const end = records.at(-1)!;
    const given = ahead;
    while (more && (given.length === 0 || chainOrder(given.at(-1)!, end) <= 0)) {
      const next = await checkpoints.next();
      if (next.done) more = false;
      else given.push(...next.value);
    }
    const cut = given.findIndex((c) => chainOrder(c, end) > 0);
    ahead = cut < 0 ? [] : given.splice(cut);
    chain.records(records, given);
    const res = await checkPageContent(storage, workspaceId, records, settledBeforeMs, upTo, lim, content);
    traces += res.traces;
    superseded += res.superseded;
  }
  chain.trailing(ahead);
  for await (const rest of checkpoints) chain.trailing(rest);
  const unverified = await unnamedTraces(storage, workspaceId, settledBeforeMs, upTo, lim, content);
  const stored = new Set<string>();
  for (const h of chain.continued()) if (await storage.hasVerificationHash(workspaceId, h)) stored.add(h);
  const chainResult = chain.finish(stored);

  const audit = new AuditCheck();
  for await (const records of chainPages((after, limit) => storage.auditPage(workspaceId, after, limit), page))
    audit.records(records);
  const auditStored = new Set<string>();
  for (const h of audit.continued()) if (await storage.hasAuditHash(workspaceId, h)) auditStored.add(h);
  const settings = await storage.getSettings(workspaceId);
  const apiKeys = (await storage.listApiKeys(workspaceId)).map((k) => ({ keyId: k.keyId, revoked: k.revokedAtMs > 0 }));
  const auditProblems = new ProblemList<ChainProblem>();
  auditProblems.add(audit.finish(auditStored));
  auditProblems.add(checkAuditCoverage(audit.seen, { settingsVersion: settings?.version ?? 0, keys: apiKeys }));

  const problems = new ProblemList<VerifyProblem>();
  problems.add(chainResult.problems);
  problems.add(content.listed);
  const omitted = problems.omitted + content.omitted + auditProblems.omitted;
  return {
    ok: problems.listed.length === 0 && auditProblems.listed.length === 0,
    recordsChecked: chain.recordsChecked,
    tracesChecked: traces + unverified,
    checkpointsChecked: chain.checkpointsChecked,
    superseded,
    unsignedTail: chainResult.unsignedTail,
    problems: problems.listed,
    audit: auditProblems.listed,
    ...(omitted ? { problemsOmitted: omitted } : {}),
  };
}

/** One trace: its content against its records, and the chain those records sit in. */
/** Records of one trace this far apart in a chain are checked as separate stretches (each read whole). */
const STRETCH_GAP = 10_000;

/**
 * The chain around one trace's records, read a stretch at a time: from the record before them to the first
 * checkpoint at or after them (about a second of records), whose signature reaches them through the links, so
 * checking a trace costs the same in a workspace of a hundred traces or of millions. Any broken link in that
 * stretch is this trace's problem (it cuts the trace off from the signature), but the record before the
 * stretch is another trace's own business. `tracegate verify` checks whole chains.
 */
async function traceChain(
  storage: Storage,
  workspaceId: string,
  mine: VerificationRecord[],
  keys: PublicKeyInfo[],
  settledBeforeMs: number,
) {
  const problems = new Map<string, VerifyProblem>();
  const add = (p: VerifyProblem) => problems.set(`${p.kind}|${p.chainId}|${p.seq}`, p);
  let unsignedTail = 0;
  let checkpointsChecked = 0;
  const byChain = new Map<string, VerificationRecord[]>();
  for (const r of mine) (byChain.get(r.chainId) ?? byChain.set(r.chainId, []).get(r.chainId)!).push(r);
  for (const [chainId, recs] of byChain) {
    recs.sort((a, b) => a.seq - b.seq);
    const stretches: VerificationRecord[][] = [];
    for (const r of recs) {
      const cur = stretches.at(-1);
      if (cur && r.seq - cur.at(-1)!.seq <= STRETCH_GAP) cur.push(r);
      else stretches.push([r]);
    }
    let chainFacts = false;
    for (const group of stretches) {
      const last = group.at(-1)!;
      const state = await storage.chainState(workspaceId, chainId, last.seq);
      if (!chainFacts) {
        chainFacts = true;
        unsignedTail += Math.max(0, (state.last?.seq ?? 0) - (state.lastCheckpoint?.seq ?? 0));
        if (!state.lastCheckpoint) {
          // Every chain signs its first record when it is made: a settled chain with no signature at all was rebuilt.
          const [head] = await storage.verificationRange(workspaceId, chainId, 1, 1);
          if (head && head.createdAtMs < settledBeforeMs)
            add({
              kind: 'unsigned_chain',
              chainId,
              seq: 1,
              message:
                'no record of this chain carries a signature (its checkpoints were deleted, or the chain was rebuilt)',
            });
        }
      }
      // The signature first: a forged checkpoint must not set how far the stretch reaches.
      let cp = state.next;
      if (cp) {
        const bad =
          signatureProblem(cp, keys) ??
          (state.last && cp.seq > state.last.seq
            ? {
                kind: 'checkpoint_mismatch' as const,
                chainId,
                seq: cp.seq,
                message: 'the signed head is past the newest record of the chain',
              }
            : null);
        if (bad) {
          add(bad);
          cp = null;
        } else checkpointsChecked++;
      }
      const from = Math.max(1, group[0]!.seq - 1);
      const to = cp ? cp.seq : last.seq;
      const segment = await storage.verificationRange(workspaceId, chainId, from, to);
      const head = segment.find((x) => x.seq === 1);
      const earlier =
        head && head.prevHash !== GENESIS ? await storage.hasVerificationHash(workspaceId, head.prevHash) : true;
      const before = from < group[0]!.seq ? from : 0; // the record before the trace's: its own fields are its trace's
      for (const p of checkChainSegment(segment, from, to, cp, earlier))
        if (!(p.kind === 'link_hash_mismatch' && p.seq === before)) add(p);
      // No checkpoint covers them although the chain went on well after (one with signatures): they were deleted.
      if (!cp && state.lastCheckpoint && state.last && last.createdAtMs < state.last.createdAtMs - UNSIGNED_GRACE_MS) {
        add({
          kind: 'checkpoint_missing',
          chainId,
          seq: last.seq,
          traceId: last.traceId,
          message: `no checkpoint covers record ${last.seq} although the chain went on for ${Math.round((state.last.createdAtMs - last.createdAtMs) / 1000)} s after it (its checkpoints were deleted)`,
        });
      }
    }
  }
  return { problems: [...problems.values()], unsignedTail, checkpointsChecked };
}

export async function verifyTrace(
  storage: Storage,
  workspaceId: string,
  traceId: string,
  keys: PublicKeyInfo[],
  limits: Partial<Pick<ReadLimits, 'spans' | 'bytes'>> = {},
): Promise<VerifyReport & { records: VerificationRecord[] }> {
  const lim = limitsOf(limits);
  const mine = await storage.getVerification(workspaceId, traceId);
  const now = Date.now();
  const chain = await traceChain(storage, workspaceId, mine, keys, now - SETTLE_MS);
  // Read whole when it is small (one query); a large trace a part at a time.
  const first = await storage.getTracePart(workspaceId, traceId, { limit: lim.spans, maxBytes: lim.bytes });
  const content =
    !first.more && namedSpans(mine) <= lim.spans
      ? checkContent(mine, first.spans, now - SETTLE_MS, now)
      : await checkInParts(storage, workspaceId, traceId, mine, now - SETTLE_MS, () => Math.max(now, Date.now()), lim);
  const problems = [...content.problems, ...chain.problems];
  return {
    ok: problems.length === 0,
    recordsChecked: mine.length,
    tracesChecked: 1,
    checkpointsChecked: chain.checkpointsChecked,
    superseded: content.superseded,
    unsignedTail: chain.unsignedTail,
    problems,
    records: mine,
  };
}
