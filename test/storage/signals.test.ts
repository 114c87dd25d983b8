// The signals contract (feedback votes, security alerts, webhook signing secrets, accepted deliveries, and how votes
// and alerts link to traces), run against every backend and layout: DuckDB (directly and behind the storage thread),
// ClickHouse 18.16, current ClickHouse through chDB, and the two-shard 18.16 cluster.
import { expect } from 'chai';
import type { FeedbackRecord, SecurityAlertRecord } from '../../core/enrichment-records.ts';
import { emptySpan, type SpanRecord } from '../../core/record.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { CONTRACT_BACKENDS, type StoreFactory, type StoreHarness } from './harness.ts';

const T0 = 1_763_787_000_000; // 2025-11-22T04:50:00Z, on an hour + 50 min
const HOUR = 3_600_000;
const NASTY = 'q\'uote "dq" \\back \n nl \t tab \u0000 nul 😀 «é» 世界';

function span(ws: string, traceId: string, spanId: string, over: Partial<SpanRecord> = {}): SpanRecord {
  return {
    ...emptySpan(ws, 'native'),
    traceId,
    spanId,
    name: 'chat',
    kind: 'llm',
    model: 'gpt-4o-mini',
    startTimeNs: `${T0}000000`,
    endTimeNs: `${T0 + 5}000000`,
    durationMs: 5,
    ingestedAtMs: T0,
    ...over,
  };
}

function vote(ws: string, over: Partial<FeedbackRecord> = {}): FeedbackRecord {
  return {
    recordType: 'feedback',
    workspaceId: ws,
    voteKey: 'id:v1',
    voteId: 'v1',
    traceId: 'trace-a',
    targetType: 'trace',
    targetId: 'trace-a',
    name: 'user_feedback',
    value: 'up',
    retracted: false,
    comment: '',
    userId: '',
    source: 'end_user',
    metadata: '{}',
    votedAtMs: T0,
    receivedAtMs: T0,
    ...over,
  };
}

function alert(ws: string, over: Partial<SecurityAlertRecord> = {}): SecurityAlertRecord {
  return {
    recordType: 'security_alert',
    workspaceId: ws,
    alertId: 'al-1',
    source: 'scanner',
    severity: 'high',
    rawSeverity: 'HIGH',
    title: 'prompt injection',
    category: 'prompt_injection',
    externalId: 'ext-1',
    detectedAtMs: T0,
    receivedAtMs: T0,
    traceId: '',
    spanId: '',
    requestId: '',
    responseId: '',
    sessionId: '',
    userId: '',
    signature: 'unsigned',
    secretId: '',
    correlation: '{}',
    body: '{"a":1}',
    ...over,
  };
}

const keys = (votes: FeedbackRecord[]) => votes.map((v) => v.voteKey).sort();

function signalsContract(name: string, factory: StoreFactory): void {
  describe(`signals contract: ${name}`, function () {
    let h: StoreHarness;
    let s: Storage;
    before(async function () {
      h = await factory();
      s = h.storage;
    });
    after(async function () {
      await h?.destroy();
    });

    it('keeps the newest version of a vote, across days; a retraction takes it away; isolation by workspace', async function () {
      const ws = 'ws-votes';
      await s.insertEnrichment([vote(ws, { value: 'up', comment: NASTY })]);
      // A re-vote a day later (another vote date) replaces it: the key holds no date.
      await s.insertEnrichment([vote(ws, { value: 'down', votedAtMs: T0 + 25 * HOUR, receivedAtMs: T0 + 25 * HOUR })]);
      // An older version arriving late (a spool replay) does not win.
      await s.insertEnrichment([vote(ws, { value: 'up', receivedAtMs: T0 + 1 })]);
      let votes = await s.traceFeedback(ws, 'trace-a');
      expect(votes).to.have.length(1);
      expect(votes[0]).to.include({ value: 'down', votedAtMs: T0 + 25 * HOUR, retracted: false });
      // Another user's vote on the same trace counts on its own; an anonymous one too.
      await s.insertEnrichment([
        vote(ws, { voteKey: 'user:u2', voteId: 'u2', userId: 'u2', comment: NASTY, receivedAtMs: T0 + 2 }),
        vote(ws, { voteKey: 'vote:x', voteId: 'x', receivedAtMs: T0 + 3 }),
      ]);
      votes = await s.traceFeedback(ws, 'trace-a');
      expect(keys(votes)).to.deep.equal(['id:v1', 'user:u2', 'vote:x']);
      expect(votes.find((v) => v.voteKey === 'user:u2')!.comment).to.equal(NASTY);
      // Retraction: a later version with retracted set.
      await s.insertEnrichment([
        vote(ws, { voteKey: 'user:u2', voteId: 'u2', userId: 'u2', value: '', retracted: true, receivedAtMs: T0 + 9 }),
      ]);
      expect(keys(await s.traceFeedback(ws, 'trace-a'))).to.deep.equal(['id:v1', 'vote:x']);
      expect(await s.voteCounts(ws, ['trace-a'])).to.deep.equal(new Map([['trace-a', { up: 1, down: 1 }]]));
      // A vote after its retraction stands again.
      await s.insertEnrichment([
        vote(ws, { voteKey: 'user:u2', voteId: 'u2', userId: 'u2', value: 'up', receivedAtMs: T0 + 10 }),
      ]);
      expect(keys(await s.traceFeedback(ws, 'trace-a'))).to.deep.equal(['id:v1', 'user:u2', 'vote:x']);
      expect(await s.traceFeedback('ws-other', 'trace-a')).to.deep.equal([]);
    });

    it('links a vote naming a span, response or request once the trace holding it is stored', async function () {
      const ws = 'ws-links';
      const pending = [
        vote(ws, { voteKey: 'k-span', traceId: '', targetType: 'span', targetId: 'sp-2' }),
        vote(ws, { voteKey: 'k-resp', traceId: '', targetType: 'response', targetId: 'resp_abc' }),
        vote(ws, { voteKey: 'k-req', traceId: '', targetType: 'request', targetId: 'req-77', value: 'down' }),
        vote(ws, { voteKey: 'k-other', traceId: '', targetType: 'span', targetId: 'sp-elsewhere' }),
      ];
      await s.insertEnrichment(pending);
      expect(await s.traceFeedback(ws, 'trace-l')).to.deep.equal([]); // the trace is not there yet
      await s.insertSpans([
        span(ws, 'trace-l', 'sp-1', { requestId: 'req-77' }),
        span(ws, 'trace-l', 'sp-2', { parentSpanId: 'sp-1', attributes: { 'gen_ai.response.id': 'resp_abc' } }),
        span(ws, 'trace-m', 'sp-elsewhere'),
      ]);
      expect(keys(await s.traceFeedback(ws, 'trace-l'))).to.deep.equal(['k-req', 'k-resp', 'k-span']);
      expect(keys(await s.traceFeedback(ws, 'trace-m'))).to.deep.equal(['k-other']);
      // Counted for a page of traces (the trace list) as the trace read lists them; a trace with none counts zero.
      const counts = await s.voteCounts(ws, ['trace-l', 'trace-m', 'trace-none']);
      expect(Object.fromEntries(counts)).to.deep.equal({
        'trace-l': { up: 2, down: 1 },
        'trace-m': { up: 1, down: 0 },
        'trace-none': { up: 0, down: 0 },
      });
      // The same spans in another workspace link nothing of this one.
      await s.insertSpans([
        span('ws-links-2', 'trace-l', 'sp-2', { attributes: { 'gen_ai.response.id': 'resp_abc' } }),
      ]);
      expect(await s.traceFeedback('ws-links-2', 'trace-l')).to.deep.equal([]);
      // The trace list's filter resolves the same links.
      const up = await s.listTraces(ws, { feedback: 'up', limit: 10 });
      expect(up.items.map((t) => t.traceId).sort()).to.deep.equal(['trace-l', 'trace-m']);
      const down = await s.listTraces(ws, { feedback: 'down', limit: 10 });
      expect(down.items.map((t) => t.traceId)).to.deep.equal(['trace-l']);
      expect((await s.listTraces('ws-links-2', { feedback: 'up', limit: 10 })).items).to.deep.equal([]);
      // A vote that moved (a re-vote by id naming another trace) counts only where its newest version points.
      await s.insertEnrichment([
        vote(ws, {
          voteKey: 'k-span',
          traceId: 'trace-m',
          targetType: 'trace',
          targetId: 'trace-m',
          receivedAtMs: T0 + 5,
        }),
      ]);
      expect(keys(await s.traceFeedback(ws, 'trace-l'))).to.deep.equal(['k-req', 'k-resp']);
      expect(keys(await s.traceFeedback(ws, 'trace-m'))).to.deep.equal(['k-other', 'k-span']);
      expect(Object.fromEntries(await s.voteCounts(ws, ['trace-l', 'trace-m']))).to.deep.equal({
        'trace-l': { up: 1, down: 1 },
        'trace-m': { up: 2, down: 0 },
      });
    });

    it('counts standing votes in usage, in the bucket of the vote under its trace group', async function () {
      const ws = 'ws-usage-votes';
      await s.insertSpans([
        span(ws, 'tu-1', 'a', { model: 'model-a' }),
        span(ws, 'tu-2', 'b', { model: 'model-b' }),
        span(ws, 'tu-2', 'b-tool', { model: '', kind: 'tool', parentSpanId: 'b' }),
      ]);
      await s.insertEnrichment([
        vote(ws, { voteKey: 'u1', traceId: 'tu-1', targetId: 'tu-1', value: 'up', votedAtMs: T0 + 1 }),
        vote(ws, { voteKey: 'u2', traceId: 'tu-1', targetId: 'tu-1', value: 'down', votedAtMs: T0 + 2 }),
        vote(ws, { voteKey: 'u3', traceId: '', targetType: 'span', targetId: 'b-tool', value: 'up', votedAtMs: T0 }),
        vote(ws, { voteKey: 'u4', traceId: 'tu-2', targetId: 'tu-2', value: 'up', votedAtMs: T0 + HOUR }),
        vote(ws, { voteKey: 'u5', traceId: 'nowhere', targetId: 'nowhere', value: 'down', votedAtMs: T0 }),
        vote(ws, { voteKey: 'u6', traceId: 'tu-1', value: '', retracted: true, votedAtMs: T0 }),
      ]);
      const rows = await s.usage(ws, { groupBy: 'model', bucket: 'hour' });
      const pick = (k: string, hourMs: number) =>
        rows.find((r) => r.key === k && Date.parse(r.bucketStart) === Math.floor(hourMs / HOUR) * HOUR);
      expect(pick('model-a', T0)).to.include({ requests: 1, feedbackUp: 1, feedbackDown: 1 });
      expect(pick('model-b', T0)).to.include({ requests: 1, feedbackUp: 1, feedbackDown: 0 });
      expect(pick('model-b', T0 + HOUR)).to.include({ requests: 0, feedbackUp: 1, feedbackDown: 0 });
      expect(pick('', T0)).to.include({ requests: 0, feedbackUp: 0, feedbackDown: 1 }); // its trace is not stored
      // The range is on the vote time; rows stay in (bucket, key) order.
      const later = await s.usage(ws, { groupBy: 'model', bucket: 'day', fromMs: T0 + HOUR - 1 });
      const votesLater = later.reduce((n, r) => n + r.feedbackUp + r.feedbackDown, 0);
      expect(votesLater).to.equal(1); // u4 only: the range starts at the hour after T0's
      expect(later.find((r) => r.key === 'model-b')).to.include({ requests: 0, feedbackUp: 1 });
      const order = rows.map((r) => `${r.bucketStart}|${r.key}`);
      expect(order).to.deep.equal([...order].sort());
    });

    it('stores security alerts once per id and links them to traces by id, span, request or response', async function () {
      const ws = 'ws-alerts';
      await s.insertSpans([
        span(ws, 'tr-x', 'sx-1', { requestId: 'req-x' }),
        span(ws, 'tr-x', 'sx-2', { attributes: { 'gen_ai.response.id': 'resp_x' } }),
      ]);
      const a = [
        alert(ws, { alertId: 'a1', traceId: 'tr-x', receivedAtMs: T0 + 1, body: NASTY }),
        alert(ws, { alertId: 'a2', spanId: 'sx-1', receivedAtMs: T0 + 2, severity: 'critical' }),
        alert(ws, {
          alertId: 'a3',
          requestId: 'req-x',
          receivedAtMs: T0 + 3,
          signature: 'verified',
          secretId: 'whs_1',
        }),
        alert(ws, { alertId: 'a4', responseId: 'resp_x', receivedAtMs: T0 + 4, source: 'other' }),
        alert(ws, { alertId: 'a5', traceId: 'tr-elsewhere', spanId: 'sx-1', receivedAtMs: T0 + 5 }),
      ];
      await s.insertEnrichment(a);
      await s.insertEnrichment([a[0]!]); // a replay
      const linked = await s.traceSecurityAlerts(ws, 'tr-x', 100);
      expect(linked.map((x) => x.alertId)).to.deep.equal(['a4', 'a3', 'a2', 'a1']);
      expect(linked.every((x) => x.body === '')).to.equal(true); // the trace read leaves bodies out
      expect((await s.traceSecurityAlerts(ws, 'tr-x', 2)).map((x) => x.alertId)).to.deep.equal(['a4', 'a3']);
      expect(await s.traceSecurityAlerts('ws-other', 'tr-x', 100)).to.deep.equal([]);

      const all = await s.listSecurityAlerts(ws, { limit: 100 });
      expect(all.items.map((x) => x.alertId)).to.deep.equal(['a5', 'a4', 'a3', 'a2', 'a1']);
      expect(all.items.at(-1)).to.deep.equal(a[0]);
      // Pages by cursor, newest first, each alert once.
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await s.listSecurityAlerts(ws, { limit: 2, ...(cursor ? { cursor } : {}) });
        seen.push(...page.items.map((x) => x.alertId));
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      expect(seen).to.deep.equal(['a5', 'a4', 'a3', 'a2', 'a1']);
      const only = async (q: object) =>
        (await s.listSecurityAlerts(ws, { limit: 10, ...q })).items.map((x) => x.alertId);
      expect(await only({ severity: 'critical' })).to.deep.equal(['a2']);
      expect(await only({ source: 'other' })).to.deep.equal(['a4']);
      expect(await only({ signature: 'verified' })).to.deep.equal(['a3']);
      expect(await only({ traceId: 'tr-x' })).to.deep.equal(['a1']);
      expect(await only({ fromMs: T0 + 2, toMs: T0 + 4 })).to.deep.equal(['a3', 'a2']);
      expect((await s.listSecurityAlerts('ws-other', { limit: 10 })).items).to.deep.equal([]);
    });

    it('finds the trace of a response id the proxy recorded, in the workspace only', async function () {
      const ws = 'ws-resp';
      const proxied = span(ws, 'tr-proxy', 'sp-p', {
        source: 'proxy',
        attributes: { 'gen_ai.response.id': 'resp_owned', 'server.address': '127.0.0.1', 'server.port': 9999 },
      });
      await s.insertSpans([proxied]);
      expect([...(await s.responseTraces(ws, ['resp_owned', 'resp_none']))]).to.deep.equal([
        ['resp_owned', 'tr-proxy'],
      ]);
      expect((await s.responseTraces('ws-other', ['resp_owned'])).size).to.equal(0);
      expect((await s.responseTraces(ws, [])).size).to.equal(0);
    });

    it('keeps webhook secrets, revocable once', async function () {
      await s.putWebhookSecret({
        secretId: 'whs_a',
        workspaceId: 'ws-s',
        sealed: 'v1.x',
        createdAtMs: T0,
        revokedAtMs: 0,
      });
      await s.putWebhookSecret({
        secretId: 'whs_b',
        workspaceId: 'ws-s',
        sealed: 'v1.y',
        createdAtMs: T0 + 1,
        revokedAtMs: 0,
      });
      await s.putWebhookSecret({
        secretId: 'whs_c',
        workspaceId: 'ws-t',
        sealed: 'v1.z',
        createdAtMs: T0,
        revokedAtMs: 0,
      });
      expect((await s.listWebhookSecrets('ws-s')).map((x) => x.secretId)).to.deep.equal(['whs_a', 'whs_b']);
      expect(await s.revokeWebhookSecret('whs_a', T0 + 5)).to.equal(true);
      expect(await s.revokeWebhookSecret('whs_a', T0 + 9)).to.equal(true);
      expect(await s.revokeWebhookSecret('whs_none', T0 + 9)).to.equal(false);
      expect(await s.getWebhookSecret('whs_a')).to.deep.equal({
        secretId: 'whs_a',
        workspaceId: 'ws-s',
        sealed: 'v1.x',
        createdAtMs: T0,
        revokedAtMs: T0 + 5,
      });
      expect(await s.getWebhookSecret('whs_none')).to.equal(null);
      const every = (await s.listWebhookSecrets()).map((x) => x.secretId);
      expect(every).to.include.members(['whs_a', 'whs_b', 'whs_c']);
    });

    it('lets one claim of a delivery win, racing claims included, many in one call', async function () {
      const one = async (ws: string, key: string) => (await s.claimDeliveries([{ workspaceId: ws, key }], T0))[0];
      const seen = async (ws: string, key: string) => (await s.claimedDeliveries([{ workspaceId: ws, key }]))[0];
      expect(await seen('ws-d', 'k1')).to.equal(false);
      expect(await one('ws-d', 'k1')).to.equal(true);
      expect(await one('ws-d', 'k1')).to.equal(false);
      expect(await seen('ws-d', 'k1')).to.equal(true);
      expect(await seen('ws-e', 'k1')).to.equal(false);
      expect(await one('ws-e', 'k1')).to.equal(true);
      for (let i = 0; i < 5; i++) {
        const won = await Promise.all([1, 2, 3, 4].map(() => one('ws-d', `race-${i}`)));
        expect(won.filter(Boolean).length).to.be.at.most(1);
        expect(await one('ws-d', `race-${i}`)).to.equal(false);
      }
      // Several in one call: a key claimed before loses, a key given twice wins once, each workspace on its own.
      const batch = [
        { workspaceId: 'ws-d', key: 'k1' },
        { workspaceId: 'ws-d', key: 'b1' },
        { workspaceId: 'ws-d', key: 'b1' },
        { workspaceId: 'ws-f', key: 'b1' },
        { workspaceId: 'ws-d', key: 'b2' },
      ];
      expect(await s.claimDeliveries(batch, T0)).to.deep.equal([false, true, false, true, true]);
      expect(await s.claimedDeliveries([...batch, { workspaceId: 'ws-g', key: 'b1' }])).to.deep.equal([
        true,
        true,
        true,
        true,
        true,
        false,
      ]);
      expect(await s.claimDeliveries([], T0)).to.deep.equal([]);
      expect(await s.claimedDeliveries([])).to.deep.equal([]);
    });
  });
}

for (const [name, factory] of CONTRACT_BACKENDS) signalsContract(name, factory);
