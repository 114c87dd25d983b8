// The TrainingStore contract (the training export's scan), on every backend and layout: ClickHouse 18.16, current
// ClickHouse through chDB, the two-shard cluster, DuckDB directly and behind the storage thread. The index in key
// order, a page at a time; stored versions only (a span changed, made untrainable or replayed); filters; windows;
// votes, groups and tool spans of a page's traces; coach drafts; workspace isolation; the writer's record batch.
import { expect } from 'chai';
import type { FeedbackRecord, TraceMetaRecord } from '../../core/enrichment-records.ts';
import type { Storage, TrainingFilter, TrainingKey, TrainingPage, TrainingScan } from '../../core/ports/storage.ts';
import { emptySpan, isTrainable, type SpanRecord } from '../../core/record.ts';
import { compareKeys, HASH_SPACE, textHash } from '../../storage/training.ts';
import { CONTRACT_BACKENDS, type StoreHarness } from './harness.ts';

const NASTY = 'q\'uote "dq" \\back \n nl \t tab \u007f del 😀 «é» 世界';
const T0 = 1_795_900_000_000_000_000n; // 2026-11-29

interface SpanOpts {
  prompt?: string;
  response?: string;
  kind?: SpanRecord['kind'];
  status?: string;
  model?: string;
  actionName?: string;
  environment?: string;
  source?: SpanRecord['source'];
  preferred?: boolean;
  startNs?: bigint;
  at?: number;
  parameters?: Record<string, string | boolean>;
  attributes?: SpanRecord['attributes'];
  spanId?: string;
}

function span(ws: string, traceId: string, o: SpanOpts = {}): SpanRecord {
  const start = o.startNs ?? T0;
  const r: SpanRecord = {
    ...emptySpan(ws, o.source ?? 'native'),
    traceId,
    spanId: o.spanId ?? `s-${traceId}`,
    name: 'call',
    kind: o.kind ?? 'llm',
    status: o.status ?? 'completed',
    startTimeNs: start.toString(),
    endTimeNs: (start + 1_000_000n).toString(),
    model: o.model ?? 'gpt-4o-mini',
    actionName: o.actionName ?? 'reply',
    environment: o.environment ?? 'prod',
    prompt: o.prompt ?? `prompt of ${traceId}`,
    response: o.response ?? `answer of ${traceId}`,
    trainingPreferred: o.preferred ?? false,
    ingestedAtMs: o.at ?? 1_000,
    attributes: { ...(o.parameters ? { parameters: o.parameters } : {}), ...(o.attributes ?? {}) },
  };
  r.trainable = isTrainable(r);
  return r;
}

function vote(ws: string, key: string, value: 'up' | 'down', target: Partial<FeedbackRecord>): FeedbackRecord {
  return {
    recordType: 'feedback',
    workspaceId: ws,
    voteKey: key,
    voteId: key,
    traceId: '',
    targetType: 'trace',
    targetId: '',
    name: 'user_feedback',
    value,
    retracted: false,
    comment: '',
    userId: '',
    source: 'api',
    metadata: '{}',
    votedAtMs: 1_000,
    receivedAtMs: 1_000,
    ...target,
  };
}

/** Every row of the scan, `limit` index rows a page, over the whole hash space or windows of it. */
async function scanAll(
  s: Storage,
  ws: string,
  filter: TrainingFilter = {},
  opts: { limit?: number; windows?: number; votes?: boolean; tools?: number; maxBytes?: number } = {},
): Promise<{ rows: TrainingPage['rows']; traces: TrainingPage['traces']; pages: number }> {
  const rows: TrainingPage['rows'] = [];
  const traces: TrainingPage['traces'] = new Map();
  let pages = 0;
  const windows = BigInt(opts.windows ?? 1);
  for (let w = 0n; w < windows; w++) {
    const from = ((HASH_SPACE * w) / windows).toString();
    const below = w + 1n < windows ? ((HASH_SPACE * (w + 1n)) / windows).toString() : undefined;
    let after: TrainingKey | undefined;
    for (;;) {
      const scan: TrainingScan = {
        filter,
        limit: opts.limit ?? 3,
        votes: opts.votes ?? false,
        tools: opts.tools ?? 0,
        ...(opts.maxBytes ? { maxBytes: opts.maxBytes } : {}),
        ...(after ? { after } : { from }),
        ...(below ? { below } : {}),
      };
      const page = await s.trainingPage(ws, scan);
      pages++;
      rows.push(...page.rows);
      for (const [t, v] of page.traces) traces.set(t, v);
      if (!page.more || !page.last) break;
      after = page.last;
    }
  }
  return { rows, traces, pages };
}

const ids = (rows: TrainingPage['rows']) => rows.map((r) => r.span.traceId).sort();

async function viaBatch(storage: Storage, records: Array<SpanRecord | FeedbackRecord>): Promise<void> {
  const batch = (
    storage as Storage & { recordBatch?: () => { add(r: unknown): void; finish(): Promise<void> } }
  ).recordBatch?.();
  if (!batch) {
    await storage.insertSpans(records.filter((r): r is SpanRecord => !('recordType' in r)));
    return;
  }
  for (const r of records) batch.add(r);
  await batch.finish();
}

for (const [name, factory] of CONTRACT_BACKENDS) {
  describe(`training export contract (${name})`, function () {
    this.timeout(180_000);
    let h: StoreHarness;
    let s: Storage;
    before(async () => {
      h = await factory();
      s = h.storage;
    });
    after(async () => {
      await h?.destroy();
    });

    it('indexes trainable model calls only, scanned in key order a page at a time, each once', async () => {
      const ws = 'ws-order';
      const spans = [
        ...Array.from({ length: 11 }, (_, i) => span(ws, `t${i}`, { prompt: `${NASTY} ${i}` })),
        span(ws, 'tool', { kind: 'tool' }), // trainable, but not a model call
        span(ws, 'err', { status: 'error' }),
        span(ws, 'empty', { response: '' }),
        span(ws, 'chain', { kind: 'chain' }),
      ];
      await s.insertSpans(spans);
      await s.insertSpans([span(ws, 't0', { prompt: `${NASTY} 0` })]); // a replay: the same version again
      await s.insertSpans([span('ws-order-other', 'x1'), span('ws-order-other', 'x2')]);
      expect(await s.trainingScope(ws, {})).to.deep.include({ votes: false, tools: true });
      expect((await s.trainingScope(ws, {})).candidates).to.be.within(11, 12); // the replay's row until it collapses
      const { rows, pages } = await scanAll(s, ws);
      expect(ids(rows)).to.deep.equal(Array.from({ length: 11 }, (_, i) => `t${i}`).sort());
      expect(pages).to.be.at.least(4);
      for (let i = 1; i < rows.length; i++) expect(compareKeys(rows[i - 1]!.key, rows[i]!.key)).to.be.below(0);
      for (const r of rows) {
        expect(r.key.promptHash).to.equal(textHash(r.span.prompt));
        expect(r.key.responseHash).to.equal(textHash(r.span.response));
        expect(r.span.prompt.startsWith(NASTY)).to.equal(true);
      }
      // Windows over the hash space read the same rows, in the same order.
      const windowed = await scanAll(s, ws, {}, { windows: 4, limit: 2 });
      expect(windowed.rows.map((r) => r.key)).to.deep.equal(rows.map((r) => r.key));
      // A page stops at its byte budget (each of these spans is over it: a page of one).
      const cut = await scanAll(s, ws, {}, { limit: 5, maxBytes: 10 });
      expect(cut.rows.map((r) => r.key)).to.deep.equal(rows.map((r) => r.key));
      expect(cut.pages).to.be.at.least(11);
      expect((await scanAll(s, 'ws-nobody')).rows).to.deep.equal([]);
    });

    it('identical prompt/response pairs and answers to one prompt come one after another', async () => {
      const ws = 'ws-adjacent';
      const spans = [];
      for (let i = 0; i < 6; i++)
        spans.push(span(ws, `same-${i}`, { prompt: 'Where is my order?', response: 'Today.' }));
      for (let i = 0; i < 4; i++) spans.push(span(ws, `other-${i}`, { prompt: 'Where is my order?' }));
      for (let i = 0; i < 6; i++) spans.push(span(ws, `noise-${i}`));
      await s.insertSpans(spans);
      const { rows } = await scanAll(s, ws, {}, { limit: 4 });
      const prompts = rows.map((r) => r.span.prompt);
      const first = prompts.indexOf('Where is my order?');
      expect(prompts.slice(first, first + 10).every((p) => p === 'Where is my order?')).to.equal(true);
      const pairs = rows.map((r) => `${r.span.prompt}|${r.span.response}`);
      const same = pairs.indexOf('Where is my order?|Today.');
      expect(pairs.slice(same, same + 6).every((p) => p === 'Where is my order?|Today.')).to.equal(true);
    });

    it('reads the stored version: a changed span once, at its new text; an untrainable one not at all', async () => {
      const ws = 'ws-versions';
      await s.insertSpans([span(ws, 'v1'), span(ws, 'v2'), span(ws, 'v3', { model: 'old-model' })]);
      await s.insertSpans([
        span(ws, 'v1', { response: 'a better answer', at: 2_000 }),
        span(ws, 'v2', { status: 'error', at: 2_000 }),
        // an older version arriving late changes nothing
        span(ws, 'v3', { response: 'stale', model: 'stale-model', at: 500 }),
      ]);
      // A native re-post takes the receipt time: the new version starts a day later.
      await s.insertSpans([span(ws, 'v4', { startNs: T0 - 86_400_000_000_000n }), span(ws, 'v4', { at: 3_000 })]);
      const { rows } = await scanAll(s, ws);
      expect(rows.map((r) => [r.span.traceId, r.span.response]).sort()).to.deep.equal([
        ['v1', 'a better answer'],
        ['v3', 'answer of v3'],
        ['v4', 'answer of v4'],
      ]);
      expect(rows.find((r) => r.span.traceId === 'v4')!.span.startTimeNs).to.equal(T0.toString());
      expect((await scanAll(s, ws, { model: 'stale-model' })).rows).to.deep.equal([]);
      expect(ids((await scanAll(s, ws, { model: 'old-model' })).rows)).to.deep.equal(['v3']);
    });

    it('two versions stored in the same millisecond: one line, at the text a trace read gives', async () => {
      const ws = 'ws-ties';
      // One key of the stored spans (collapsed), and two days (two stored rows of one ingested_at_ms).
      await s.insertSpans([span(ws, 't1', { response: 'first', at: 5_000 })]);
      await s.insertSpans([span(ws, 't1', { response: 'second', at: 5_000 })]);
      await s.insertSpans([span(ws, 't2', { response: 'first', at: 5_000 })]);
      await s.insertSpans([span(ws, 't2', { response: 'second', at: 5_000, startNs: T0 + 86_400_000_000_000n })]);
      const { rows } = await scanAll(s, ws, {}, { limit: 10 });
      expect(ids(rows)).to.deep.equal(['t1', 't2']);
      for (const r of rows) {
        expect(['first', 'second']).to.include(r.span.response);
        if (r.span.traceId === 't1') expect(r.span.response).to.equal((await s.getTrace(ws, 't1'))[0]!.response);
      }
    });

    it('filters: time, model, action, environment, source, curated picks', async () => {
      const ws = 'ws-filters';
      const day = 86_400_000_000_000n;
      await s.insertSpans([
        span(ws, 'a', { model: 'm1', actionName: 'act1', environment: 'prod', startNs: T0 }),
        span(ws, 'b', { model: 'm2', actionName: 'act2', environment: 'dev', startNs: T0 + day }),
        span(ws, 'c', { source: 'sdk', startNs: T0 + 2n * day, preferred: true }),
        span(ws, 'd', { source: 'coach', actionName: 'coach_curated', preferred: true, startNs: T0 + 40n * day }),
      ]);
      const q = async (f: TrainingFilter) => ids((await scanAll(s, ws, f)).rows);
      expect(await q({})).to.deep.equal(['a', 'b', 'c', 'd']);
      expect(await q({ fromNs: T0 + day })).to.deep.equal(['b', 'c', 'd']);
      expect(await q({ toNs: T0 + day })).to.deep.equal(['a']);
      expect(await q({ fromNs: T0 + day, toNs: T0 + day + 1n })).to.deep.equal(['b']);
      expect(await q({ model: 'm2' })).to.deep.equal(['b']);
      expect(await q({ actionName: 'act1' })).to.deep.equal(['a']);
      expect(await q({ environment: 'dev' })).to.deep.equal(['b']);
      expect(await q({ source: 'sdk' })).to.deep.equal(['c']);
      expect(await q({ curated: true })).to.deep.equal(['c', 'd']);
      expect(await q({ curated: true, source: 'coach', actionName: 'coach_curated' })).to.deep.equal(['d']);
      expect(await q({ model: NASTY })).to.deep.equal([]);
      expect((await s.trainingScope(ws, { curated: true })).candidates).to.equal(2);
    });

    it("a page's traces: standing votes however they name the trace, the group id, tool spans in order", async () => {
      const ws = 'ws-page-traces';
      const tool = (traceId: string, spanId: string, startNs: bigint) =>
        span(ws, traceId, {
          kind: 'tool',
          spanId,
          startNs,
          attributes: { 'gen_ai.tool.name': 'lookup', 'gen_ai.tool.call.id': spanId },
        });
      await s.insertSpans([
        span(ws, 'voted'),
        { ...span(ws, 'by-request'), requestId: 'req-9' },
        span(ws, 'agent'),
        tool('agent', 'tool-2', T0 + 2n),
        tool('agent', 'tool-1', T0 + 1n),
        span(ws, 'quiet'),
      ]);
      await s.insertEnrichment([
        vote(ws, 'v1', 'up', { traceId: 'voted', targetId: 'voted' }),
        vote(ws, 'v2', 'down', { traceId: 'voted', targetId: 'voted' }),
        vote(ws, 'v3', 'up', { traceId: 'voted', targetId: 'voted' }),
        vote(ws, 'v4', 'down', { targetType: 'span', targetId: 's-voted' }),
        vote(ws, 'v5', 'up', { targetType: 'request', targetId: 'req-9' }),
        { ...vote(ws, 'v6', 'up', { traceId: 'quiet', targetId: 'quiet' }), value: '', retracted: true },
        vote('ws-page-traces-other', 'v7', 'down', { traceId: 'quiet', targetId: 'quiet' }),
        {
          recordType: 'trace_meta',
          workspaceId: ws,
          traceId: 'agent',
          workflowName: 'bot',
          groupId: 'conv-7',
          metadata: '',
          organization: '',
          project: '',
          source: 'agents',
          updatedAtMs: 1_000,
        } satisfies TraceMetaRecord,
      ]);
      expect(await s.trainingScope(ws, {})).to.deep.include({ votes: true, tools: true });
      const { traces } = await scanAll(s, ws, {}, { votes: true, tools: 8 });
      expect(traces.get('voted')).to.deep.include({ up: 2, down: 2, groupId: '' });
      expect(traces.get('by-request')).to.deep.include({ up: 1, down: 0 });
      expect(traces.get('quiet')).to.deep.include({ up: 0, down: 0 });
      const agent = traces.get('agent')!;
      expect(agent.groupId).to.equal('conv-7');
      expect(agent.tools.map((t) => t.spanId)).to.deep.equal(['tool-1', 'tool-2']);
      expect(agent.tools[0]!.attributes['gen_ai.tool.name']).to.equal('lookup');
      // Asked for neither, a page reads neither.
      const plain = await scanAll(s, ws);
      expect(plain.traces.get('voted')).to.deep.include({ up: 0, down: 0 });
      expect(plain.traces.get('agent')!.tools).to.deep.equal([]);
      expect((await scanAll(s, ws, {}, { tools: 1 })).traces.get('agent')!.tools.map((t) => t.spanId)).to.deep.equal([
        'tool-1',
      ]);
    });

    it('coach drafts by session, from the parameters the native route stores', async () => {
      const ws = 'ws-coach';
      const coach = (traceId: string, actionName: string, session: string, o: SpanOpts = {}) =>
        span(ws, traceId, {
          source: 'coach',
          actionName,
          parameters: { source: 'coach', coachSessionId: session, trainingPreferred: actionName === 'coach_curated' },
          preferred: actionName === 'coach_curated',
          ...o,
        });
      await s.insertSpans([
        coach('d1', 'coach_local_draft', 'sess-1', { startNs: T0 }),
        coach('d2', 'coach_local_draft', 'sess-1', { startNs: T0 + 5n }),
        coach('d3', 'coach_local_draft', `sess-${NASTY}`),
        coach('d4', 'coach_local_draft', 'sess-2', { status: 'error' }),
        coach('c1', 'coach_curated', 'sess-1'),
      ]);
      const drafts = await s.coachDrafts(ws, ['sess-1', `sess-${NASTY}`, 'sess-2', 'sess-none']);
      expect([...drafts.keys()].sort()).to.deep.equal(['sess-1', `sess-${NASTY}`].sort());
      expect(
        drafts
          .get('sess-1')!
          .map((d) => d.traceId)
          .sort(),
      ).to.deep.equal(['d1', 'd2']);
      expect(drafts.get(`sess-${NASTY}`)![0]!.traceId).to.equal('d3');
      expect((await s.coachDrafts('ws-coach-other', ['sess-1'])).size).to.equal(0);
      expect((await s.coachDrafts(ws, [])).size).to.equal(0);
    });

    it("the writer's record batch indexes what it stores", async () => {
      const ws = 'ws-batch';
      await viaBatch(s, [span(ws, 'b1'), span(ws, 'b2'), span(ws, 'b1', { response: 'newer', at: 2_000 })]);
      const { rows } = await scanAll(s, ws);
      expect(rows.map((r) => [r.span.traceId, r.span.response]).sort()).to.deep.equal([
        ['b1', 'newer'],
        ['b2', 'answer of b2'],
      ]);
    });

    it('keeps its index across a restart', async () => {
      const ws = 'ws-restart';
      await s.insertSpans([span(ws, 'r1'), span(ws, 'r2')]);
      s = await h.reopen();
      expect(ids((await scanAll(s, ws)).rows)).to.deep.equal(['r1', 'r2']);
    });
  });
}
