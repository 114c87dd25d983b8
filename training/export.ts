/**
 * The training-data export: a workspace's trainable model calls, read from storage a page at a time in the index's
 * order (prompt hash, response hash, trace, span: TrainingStore), as lines of one format. Identical prompt/response
 * pairs come one after another, and so do the answers to one prompt, so the export holds one page and one such group
 * at a time however many calls it reads: its memory does not grow with the workspace.
 *
 * - A pair's standing votes are those of every trace holding it: `up` when it has up votes and no down vote, `down`
 *   the reverse, `mixed` with both. openai_chat leaves out down and mixed pairs (`feedback=up`: keeps up pairs only);
 *   hf_kto writes up pairs labelled true and down pairs labelled false; openai_dpo pairs up and down answers to one
 *   prompt, and each curated coach answer (coach_curated, trainingPreferred) with the draft of its coach session.
 * - Each identical prompt/response pair is written once, as its first call in scan order.
 * - The split deals conversations (coach session, agent group id, session attribute, else the trace) to train or eval
 *   by a hash of their key; a DPO pair of feedback goes by its prompt, so all pairs answering one prompt go together.
 */
import type { Storage, TrainingFilter, TrainingPage, TrainingTrace } from '../core/ports/storage.ts';
import type { SpanRecord } from '../core/record.ts';
import { coachSessionOf, HASH_SPACE } from '../storage/training.ts';
import { chatLine, dpoLine, type Format, ktoLine, splitOf } from './lines.ts';
import { conversationOf } from './messages.ts';

export type TrainingSource = Pick<Storage, 'trainingScope' | 'trainingPage' | 'coachDrafts'>;
type Line = Record<string, unknown>;

export interface ExportOptions {
  format: Format;
  filter: TrainingFilter;
  /** up: approved answers only (openai_chat, hf_kto); down: rejected answers only (hf_kto). */
  feedback?: 'up' | 'down';
  /** `only`: that side's lines alone, without the mark. */
  split?: { evalFraction: number; seed: string; only?: 'train' | 'eval' };
  /** Add `metadata` naming the trace and span of each answer. */
  provenance: boolean;
  /** Index rows a storage page reads at most. */
  pageRows: number;
  /** A storage page ends once its spans' stored text reaches this many bytes. */
  pageBytes: number;
  /** openai_dpo: pairs made from one prompt's votes at most (the answers held to make them). */
  maxPairsPerPrompt: number;
  /** Tool spans read per trace at most. */
  maxToolCalls: number;
  /** The current policy's redaction of a line (lineRedactor), null for none. */
  redactor: ((line: Line) => Line) | null;
  /** Called after each storage page with the index rows it read and the lines it made. */
  onPage?: (read: number, lines: number) => void;
}

/** A call read with what the export knows of its trace. */
interface Answer {
  span: SpanRecord;
  trace: TrainingTrace;
}

/** Identical prompt/response pairs, as the scan meets them: the first call, and the votes of all their traces. */
interface PairGroup {
  promptHash: string;
  responseHash: string;
  first: Answer;
  lastTrace: string;
  up: number;
  down: number;
}

type Verdict = 'up' | 'down' | 'mixed' | 'none';
const verdictOf = (g: PairGroup): Verdict => (g.up > 0 ? (g.down > 0 ? 'mixed' : 'up') : g.down > 0 ? 'down' : 'none');

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The conversation a call belongs to, for the split: coach session, agent group, session attribute, else its trace. */
export function conversationKey(a: Answer): string {
  const coach = coachSessionOf(a.span);
  if (coach) return coach;
  if (a.trace.groupId) return a.trace.groupId;
  const attrs = a.span.attributes;
  const session = str(attrs['gen_ai.conversation.id']) || str(attrs['session.id']);
  if (session) return session;
  const meta = attrs.metadata;
  if (meta && typeof meta === 'object' && !Array.isArray(meta)) {
    for (const k of ['sessionId', 'session_id', 'conversationId', 'conversation_id'])
      if (str(meta[k])) return str(meta[k]);
  }
  return `trace:${a.span.traceId}`;
}

/** What a pass's pages read: votes, tool spans; `onlyVoted`: it writes voted answers only (none without votes). */
interface Want {
  votes: boolean;
  tools: boolean;
  onlyVoted: boolean;
}

/** Pages of the scan over windows of the prompt-hash space sized to hold about 4/5 of a page each. */
async function* pages(
  store: TrainingSource,
  workspaceId: string,
  filter: TrainingFilter,
  opts: ExportOptions,
  want: Want,
): AsyncGenerator<TrainingPage> {
  const scope = await store.trainingScope(workspaceId, filter);
  if (scope.candidates === 0 || (want.onlyVoted && !scope.votes)) return;
  const windows = BigInt(Math.max(1, Math.ceil((scope.candidates * 5) / (opts.pageRows * 4))));
  for (let w = 0n; w < windows; w++) {
    const from = ((HASH_SPACE * w) / windows).toString();
    const below = w + 1n < windows ? ((HASH_SPACE * (w + 1n)) / windows).toString() : undefined;
    let after: TrainingPage['last'] = null;
    for (;;) {
      const page = await store.trainingPage(workspaceId, {
        filter,
        limit: opts.pageRows,
        maxBytes: opts.pageBytes,
        votes: want.votes && scope.votes,
        tools: want.tools && scope.tools ? opts.maxToolCalls : 0,
        ...(after ? { after } : { from }),
        ...(below !== undefined ? { below } : {}),
      });
      yield page;
      if (!page.more || !page.last) break;
      after = page.last;
    }
  }
}

/** Rows of the scan folded into pair groups; `done` gets each group once the scan has moved past it. */
class Pairs {
  private current: PairGroup | null = null;
  private readonly done: (g: PairGroup) => void;
  constructor(done: (g: PairGroup) => void) {
    this.done = done;
  }
  add(row: TrainingPage['rows'][number], trace: TrainingTrace): void {
    const g = this.current;
    if (g && g.promptHash === row.key.promptHash && g.responseHash === row.key.responseHash) {
      // A trace's calls with the same pair come together (the key's next part): its votes count once.
      if (g.lastTrace !== row.span.traceId) {
        g.up += trace.up;
        g.down += trace.down;
        g.lastTrace = row.span.traceId;
      }
      return;
    }
    this.flush();
    this.current = {
      promptHash: row.key.promptHash,
      responseHash: row.key.responseHash,
      first: { span: row.span, trace },
      lastTrace: row.span.traceId,
      up: trace.up,
      down: trace.down,
    };
  }
  flush(): void {
    if (this.current) this.done(this.current);
    this.current = null;
  }
}

/** The lines of the export, a storage page's worth at a time ('' for a page that made none). */
export async function* exportTraining(
  store: TrainingSource,
  workspaceId: string,
  opts: ExportOptions,
): AsyncGenerator<string> {
  const out: string[] = [];
  const emit = (line: Line, key: string, provenance: Record<string, unknown>) => {
    const side = opts.split && splitOf(key, opts.split.evalFraction, opts.split.seed);
    if (side && opts.split?.only && side !== opts.split.only) return;
    const body = opts.redactor ? opts.redactor(line) : line;
    if (side && !opts.split?.only) body.split = side;
    if (opts.provenance) body.metadata = provenance;
    out.push(`${JSON.stringify(body)}\n`);
  };
  const drain = (read: number) => {
    opts.onPage?.(read, out.length);
    const chunk = out.join('');
    out.length = 0;
    return chunk;
  };
  const runs = opts.format === 'openai_dpo' ? [feedbackPairs, curatedPairs] : [singles];
  for (const run of runs) {
    const { filter, want, pair } = run(opts, emit);
    if (!filter) continue;
    const scan = pages(store, workspaceId, filter, opts, want);
    for await (const page of scan) {
      await pair(page, store, workspaceId);
      yield drain(page.read);
    }
    await pair(null, store, workspaceId);
    if (out.length) yield drain(0);
  }
}

type Emit = (line: Line, key: string, provenance: Record<string, unknown>) => void;
/** One pass of the scan: its filter (null: none to make), what its pages read, and what it makes of each page. */
type Run = (
  opts: ExportOptions,
  emit: Emit,
) => {
  filter: TrainingFilter | null;
  want: Want;
  /** A page's rows into lines; null: the scan has ended. */
  pair: (page: TrainingPage | null, store: TrainingSource, workspaceId: string) => Promise<void>;
};

const where = (a: Answer) => ({ traceId: a.span.traceId, spanId: a.span.spanId });

/** openai_chat and hf_kto: one line per pair group. */
const singles: Run = (opts, emit) => {
  const kto = opts.format === 'hf_kto';
  const pairs = new Pairs((g) => {
    const v = verdictOf(g);
    if (kto) {
      if ((v !== 'up' && v !== 'down') || (opts.feedback && opts.feedback !== v)) return;
    } else if (v === 'down' || v === 'mixed' || (opts.feedback === 'up' && v !== 'up')) return;
    const c = conversationOf(g.first.span, g.first.trace.tools);
    emit(kto ? ktoLine(c, v === 'up') : chatLine(c), conversationKey(g.first), where(g.first));
  });
  return {
    filter: opts.filter,
    want: { votes: true, tools: true, onlyVoted: kto || opts.feedback !== undefined },
    pair: async (page) => {
      if (!page) return pairs.flush();
      for (const row of page.rows) pairs.add(row, page.traces.get(row.span.traceId)!);
    },
  };
};

/** openai_dpo from votes: the up and down answers to each prompt, zipped, at most maxPairsPerPrompt pairs. */
const feedbackPairs: Run = (opts, emit) => {
  const { curated, ...filter } = opts.filter;
  let prompt = '';
  let ups: Answer[] = [];
  let downs: Answer[] = [];
  const pairUp = () => {
    for (let i = 0; i < Math.min(ups.length, downs.length); i++) {
      const good = conversationOf(ups[i]!.span, ups[i]!.trace.tools);
      const bad = conversationOf(downs[i]!.span, downs[i]!.trace.tools);
      emit(dpoLine(good, good.answer, bad.answer), `prompt:${prompt}`, {
        preferred: where(ups[i]!),
        nonPreferred: where(downs[i]!),
      });
    }
    ups = [];
    downs = [];
  };
  const pairs = new Pairs((g) => {
    if (g.promptHash !== prompt) {
      pairUp();
      prompt = g.promptHash;
    }
    const v = verdictOf(g);
    // curated: the preferred side must be a curated pick; the other is whatever was voted down.
    if (v === 'up' && ups.length < opts.maxPairsPerPrompt && (!curated || g.first.span.trainingPreferred))
      ups.push(g.first);
    else if (v === 'down' && downs.length < opts.maxPairsPerPrompt) downs.push(g.first);
  });
  return {
    filter,
    want: { votes: true, tools: true, onlyVoted: true },
    pair: async (page) => {
      if (!page) {
        pairs.flush();
        return pairUp();
      }
      for (const row of page.rows) pairs.add(row, page.traces.get(row.span.traceId)!);
    },
  };
};

/** openai_dpo from curation: each curated coach answer against the coach session's draft it replaced. */
const curatedPairs: Run = (opts, emit) => {
  const f = opts.filter;
  const none =
    (f.source !== undefined && f.source !== 'coach') ||
    (f.actionName !== undefined && f.actionName !== 'coach_curated');
  let last = '';
  return {
    filter: none ? null : { ...f, source: 'coach', actionName: 'coach_curated', curated: true },
    want: { votes: false, tools: true, onlyVoted: false },
    pair: async (page, store, workspaceId) => {
      if (!page) return;
      const picks: Answer[] = [];
      for (const row of page.rows) {
        const pair = `${row.key.promptHash}/${row.key.responseHash}`;
        if (pair === last) continue; // an identical pick once
        last = pair;
        if (coachSessionOf(row.span)) picks.push({ span: row.span, trace: page.traces.get(row.span.traceId)! });
      }
      if (picks.length === 0) return;
      const drafts = await store.coachDrafts(workspaceId, [...new Set(picks.map((p) => coachSessionOf(p.span)))]);
      for (const pick of picks) {
        const draft = draftFor(pick.span, drafts.get(coachSessionOf(pick.span)) ?? []);
        if (!draft) continue;
        const good = conversationOf(pick.span, pick.trace.tools);
        emit(dpoLine(good, good.answer, conversationOf(draft).answer), coachSessionOf(pick.span), {
          preferred: where(pick),
          nonPreferred: { traceId: draft.traceId, spanId: draft.spanId },
        });
      }
    },
  };
};

/** The draft a curated answer replaced: the session's newest draft started before it (else its newest) that differs. */
function draftFor(pick: SpanRecord, drafts: readonly SpanRecord[]): SpanRecord | undefined {
  const start = BigInt(pick.startTimeNs);
  const newestFirst = drafts
    .filter((d) => d.response !== pick.response)
    .sort((a, b) =>
      BigInt(b.startTimeNs) > BigInt(a.startTimeNs) ? 1 : BigInt(b.startTimeNs) < BigInt(a.startTimeNs) ? -1 : 0,
    );
  return newestFirst.find((d) => BigInt(d.startTimeNs) <= start) ?? newestFirst[0];
}
