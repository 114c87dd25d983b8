// The enrichment contract (findings, policy records, audit log, alerts, verification, analytics),
// run against every backend, plus agreement of the analytics between the backends (ClickHouse
// answers from materialized rollups, DuckDB from plain SQL over the same spans/findings).
import { auditChain, verificationChain } from '../support/chains.ts';
import { expect } from 'chai';
import { emptySpan, MAX_TOKENS, type SpanRecord } from '../../core/record.ts';
import type {
  AlertRecord,
  AuditRecord,
  CheckpointRecord,
  FindingRecord,
  PolicyRecord,
  VerificationRecord,
} from '../../core/enrichment-records.ts';
import { statusOf } from '../../collector/http/errors.ts';
import { TracegateError } from '../../core/errors.ts';
import type { Page, Storage, UsageQuery, UsageRow } from '../../core/ports/storage.ts';
import { CLICKHOUSE_MIGRATIONS } from '../../storage/clickhouse-migrations.ts';
import { ClickHouseStorage, runStatement } from '../../storage/clickhouse.ts';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import {
  keyChunks,
  lookupChunks,
  spanKey,
  spanVersionsOf,
  storedFindings,
  storedSpans,
} from '../../storage/clickhouse-rollup.ts';
import { clickhouseUrl, useSharedClickHouse } from '../support/shared.ts';
import { interpolatedQuantile } from '../../storage/enrichment.ts';
import { BACKENDS, CLICKHOUSES, CONTRACT_BACKENDS, type StoreFactory, type StoreHarness } from './harness.ts';

const T0 = 1_763_787_000_123; // 2025-11-22T04:50:00.123Z
const HOUR = 3_600_000;
const DAY = 86_400_000;
// Strings that have broken naive literal escaping or UTF-8 handling before.
const NASTY = 'q\'uote "dq" \\back \n nl \t tab \u0000 nul \u007f del 😀 «é» 世界 \u2028';

function finding(ws: string, over: Partial<FindingRecord> = {}): FindingRecord {
  return {
    recordType: 'finding',
    workspaceId: ws,
    traceId: 't1',
    spanId: 's1',
    detector: 'pii',
    rule: 'pii.email',
    category: 'email',
    severity: 'medium',
    field: 'prompt',
    start: 10,
    end: 25,
    preview: 'j***@example.com',
    score: 1,
    action: 'redact',
    createdAtMs: T0,
    ...over,
  };
}

function policy(ws: string, over: Partial<PolicyRecord> = {}): PolicyRecord {
  return {
    recordType: 'policy',
    workspaceId: ws,
    traceId: 't1',
    spanId: 's1',
    policyVersion: 3,
    decision: 'redact',
    reasons: '[{"code":"pii","message":"email"}]',
    createdAtMs: T0,
    ...over,
  };
}

function audit(ws: string, over: Partial<AuditRecord> = {}): AuditRecord {
  return {
    recordType: 'audit',
    workspaceId: ws,
    chainId: 'c1',
    seq: 1,
    atMs: T0,
    actor: 'k_abc',
    action: 'ingest',
    route: 'POST /v1/traces',
    outcome: 'ok',
    accepted: 10,
    rejected: 0,
    details: '{"spans":10}',
    prevHash: '0'.repeat(64),
    hash: 'a'.repeat(64),
    ...over,
  };
}

function alert(ws: string, over: Partial<AlertRecord> = {}): AlertRecord {
  return {
    recordType: 'alert',
    workspaceId: ws,
    alertId: 'al1',
    ruleId: 'r-latency',
    kind: 'latency',
    severity: 'high',
    message: 'p95 latency above 2000 ms',
    traceId: 't1',
    value: 2345.5,
    threshold: 2000,
    windowStartMs: T0 - 300_000,
    atMs: T0,
    delivered: '',
    ...over,
  };
}

function verification(ws: string, over: Partial<VerificationRecord> = {}): VerificationRecord {
  return {
    recordType: 'verification',
    workspaceId: ws,
    traceId: 't1',
    spanIds: ['s1', 's2'],
    spanVersions: [T0, T0 + 1],
    contentHash: 'c'.repeat(64),
    chainId: 'vc1',
    seq: 1,
    prevHash: '0'.repeat(64),
    hash: 'd'.repeat(64),
    createdAtMs: T0,
    ...over,
  };
}

function checkpoint(ws: string, over: Partial<CheckpointRecord> = {}): CheckpointRecord {
  return {
    recordType: 'checkpoint',
    workspaceId: ws,
    chainId: 'vc1',
    seq: 1,
    headHash: 'd'.repeat(64),
    keyId: 'sk_1',
    signature: 'c2lnbmF0dXJl',
    atMs: T0,
    ...over,
  };
}

function llmSpan(ws: string, spanId: string, startMs: number, over: Partial<SpanRecord> = {}): SpanRecord {
  return {
    ...emptySpan(ws, 'native'),
    traceId: `tr-${spanId}`,
    spanId,
    kind: 'llm',
    name: 'chat',
    startTimeNs: (BigInt(startMs) * 1_000_000n + 123n).toString(),
    endTimeNs: (BigInt(startMs + 100) * 1_000_000n).toString(),
    durationMs: 100,
    model: 'gpt-4o',
    ingestedAtMs: startMs + 5,
    ...over,
  };
}

type Lister<T> = (cursor?: string) => Promise<Page<T>>;

async function allPages<T>(list: Lister<T>, limit: number): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | undefined;
  for (let guard = 0; guard < 1000; guard++) {
    const page = await list(cursor);
    expect(page.items.length).to.be.at.most(limit);
    out.push(...page.items);
    if (!page.nextCursor) return out;
    cursor = page.nextCursor;
  }
  throw new Error('pagination did not end');
}

async function rejects400(p: Promise<unknown>): Promise<void> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(TracegateError);
  expect(statusOf(err as TracegateError)).to.equal(400);
}

function enrichmentContract(name: string, factory: StoreFactory): void {
  describe(`enrichment contract: ${name}`, function () {
    let h: StoreHarness;
    let s: Storage;

    before(async function () {
      h = await factory();
      s = h.storage;
    });
    after(async function () {
      await h?.destroy();
    });

    it('round-trips every field of every record type exactly', async function () {
      const ws = 'ws-rt';
      const f = finding(ws, {
        traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
        spanId: '00f067aa0ba902b7',
        detector: 'injection',
        rule: 'injection.ignore_previous',
        category: 'prompt_injection',
        severity: 'critical',
        field: 'attribute:gen_ai.prompt',
        start: 2 ** 40 + 3,
        end: 2 ** 40 + 99,
        preview: NASTY,
        score: 0.1 + 0.2,
        action: 'block',
        createdAtMs: 2 ** 52 + 1,
      });
      const p = policy(ws, {
        traceId: f.traceId,
        spanId: f.spanId,
        policyVersion: 2 ** 33,
        decision: 'block',
        reasons: `[{"message":${JSON.stringify(NASTY)}}]`,
        createdAtMs: T0 + 7,
      });
      const a = audit(ws, {
        chainId: 'chain-😀',
        seq: 2 ** 45,
        atMs: T0 + 9,
        actor: NASTY,
        action: 'policy.update',
        route: 'PUT /api/settings',
        outcome: 'partial',
        accepted: 2 ** 35,
        rejected: 7,
        details: JSON.stringify({ note: NASTY }),
        prevHash: 'p'.repeat(64),
        hash: 'h'.repeat(64),
      });
      const al = alert(ws, {
        alertId: "alert-'x'",
        ruleId: NASTY,
        kind: 'cost',
        severity: 'low',
        message: NASTY,
        traceId: '',
        value: 2.0846316870860149e-7,
        threshold: 1e21,
        windowStartMs: 1,
        atMs: T0 + 11,
        delivered: 'HTTP 500: "boom"',
      });
      const v = verification(ws, {
        traceId: f.traceId,
        spanIds: ['a', NASTY, ''],
        spanVersions: [0, 2 ** 53 - 1, T0],
        contentHash: 'x'.repeat(64),
        chainId: 'vc-😀',
        seq: 2 ** 40,
        prevHash: 'y'.repeat(64),
        hash: 'z'.repeat(64),
        createdAtMs: T0 + 13,
      });
      const empty = verification(ws, {
        traceId: 'no-spans',
        spanIds: [],
        spanVersions: [],
        chainId: 'vc-😀',
        seq: 2 ** 40 + 1,
      });
      const cp = checkpoint(ws, {
        chainId: 'vc-😀',
        seq: 2 ** 40 + 1,
        headHash: NASTY,
        keyId: 'key 1',
        signature: 'AAEC/+==',
        atMs: T0 + 17,
      });
      await s.insertEnrichment([f, p, a, al, v, empty, cp]);

      expect((await s.listFindings(ws, { limit: 10 })).items).to.deep.equal([f]);
      // Counted per trace for a page of the trace list: a replayed finding counts once, a trace with none is left out.
      await s.insertEnrichment([f]);
      expect(await s.findingCounts(ws, [f.traceId, 'no-such-trace'])).to.deep.equal(new Map([[f.traceId, 1]]));
      expect(await s.findingCounts('ws-other', [f.traceId])).to.deep.equal(new Map());
      expect(await s.getPolicyRecords(ws, p.traceId)).to.deep.equal([p]);
      // those of some spans only (a part of a large trace)
      expect(await s.getPolicyRecords(ws, p.traceId, ['other', p.spanId])).to.deep.equal([p]);
      expect(await s.getPolicyRecords(ws, p.traceId, ['other'])).to.deep.equal([]);
      expect(await s.getPolicyRecords(ws, p.traceId, [])).to.deep.equal([]);
      expect((await s.listAudit(ws, { limit: 10 })).items).to.deep.equal([a]);
      expect(await auditChain(s, ws)).to.deep.equal([a]);
      expect((await s.listAlerts(ws, { limit: 10 })).items).to.deep.equal([al]);
      expect(await s.getVerification(ws, v.traceId)).to.deep.equal([v]);
      expect(await verificationChain(s, ws)).to.deep.equal({ records: [v, empty], checkpoints: [cp] });
      const [got] = (await s.listAlerts(ws, { limit: 1 })).items;
      expect(Object.is(got?.value, 2.0846316870860149e-7)).to.equal(true);
      expect((await s.listFindings(ws, { limit: 1 })).items[0]?.score).to.equal(0.30000000000000004);
      // survives a restart
      s = await h.reopen();
      expect((await s.listFindings(ws, { limit: 10 })).items).to.deep.equal([f]);
    });

    it('replaces lone surrogates and normalizes non-finite numbers instead of failing the batch', async function () {
      const ws = 'ws-norm';
      await s.insertEnrichment([
        finding(ws, { preview: 'a\ud800b', score: Number.NaN }),
        alert(ws, { message: 'x\udc00', value: Number.POSITIVE_INFINITY, threshold: -0.5 }),
      ]);
      const [f] = (await s.listFindings(ws, { limit: 10 })).items;
      expect([f?.preview, f?.score]).to.deep.equal(['a\ufffdb', 0]);
      const [a] = (await s.listAlerts(ws, { limit: 10 })).items;
      expect([a?.message, a?.value, a?.threshold]).to.deep.equal(['x\ufffd', 0, -0.5]);
    });

    // A count beyond Int64 failed the whole insert, and the spool retried that batch forever.
    // ... and sums of counts near 2^53 wrapped ClickHouse's UInt64 after ~2,000 spans: counts stop at MAX_TOKENS (10^12).
    it('caps absurd token counts instead of failing the batch or wrapping sums', async function () {
      const ws = 'ws-huge-tokens';
      await s.insertSpans([
        llmSpan(ws, 'h1', T0, {
          promptTokens: 1e300,
          completionTokens: 9223372036854775807,
          totalTokens: Number.MAX_SAFE_INTEGER + 2,
        }),
      ]);
      const [sp] = await s.getTrace(ws, 'tr-h1');
      expect([sp?.promptTokens, sp?.completionTokens, sp?.totalTokens]).to.deep.equal([
        MAX_TOKENS,
        MAX_TOKENS,
        MAX_TOKENS,
      ]);
      const many = Array.from({ length: 3000 }, (_, i) => ({
        ...llmSpan(ws, `m${i}`, T0),
        traceId: 'tr-many',
        promptTokens: Number.MAX_SAFE_INTEGER,
      }));
      await s.insertSpans(many);
      const listed = (await s.listTraces(ws, { limit: 10 })).items.find((t) => t.traceId === 'tr-many');
      expect(listed?.promptTokens).to.equal(3000 * MAX_TOKENS);
      const usage = await s.usage(ws, { groupBy: 'model', bucket: 'day' });
      expect(usage.map((r) => r.promptTokens)).to.deep.equal([3001 * MAX_TOKENS]);
    });

    it('is idempotent per natural key: re-inserting a batch changes nothing', async function () {
      const ws = 'ws-idem';
      const batch = [
        finding(ws),
        finding(ws, { start: 30, end: 40 }),
        finding(ws, { rule: 'pii.phone', category: 'phone' }),
        policy(ws),
        policy(ws, { spanId: 's2' }),
        audit(ws),
        audit(ws, { seq: 2, atMs: T0 + 1 }),
        alert(ws),
        alert(ws, { alertId: 'al2' }),
        verification(ws),
        verification(ws, { seq: 2, traceId: 't2' }),
        checkpoint(ws),
        checkpoint(ws, { seq: 2 }),
      ];
      const snapshot = async () => ({
        findings: (await s.listFindings(ws, { limit: 100 })).items,
        policies: await s.getPolicyRecords(ws, 't1'),
        audit: await auditChain(s, ws),
        alerts: (await s.listAlerts(ws, { limit: 100 })).items,
        chain: await verificationChain(s, ws),
      });
      await s.insertEnrichment(batch);
      const first = await snapshot();
      expect(first.findings).to.have.length(3);
      expect(first.policies).to.have.length(2);
      expect(first.audit).to.have.length(2);
      expect(first.alerts).to.have.length(2);
      expect(first.chain.records).to.have.length(2);
      expect(first.chain.checkpoints).to.have.length(2);
      await s.insertEnrichment(batch);
      await s.insertEnrichment([...batch, ...batch]); // duplicates within one batch too
      expect(await snapshot()).to.deep.equal(first);
    });

    it('keeps the newest version of versioned records (findings, policy, alerts), also against older replays', async function () {
      const ws = 'ws-ver';
      await s.insertEnrichment([policy(ws, { decision: 'flag', createdAtMs: T0 + 10 })]);
      await s.insertEnrichment([policy(ws, { decision: 'allow', createdAtMs: T0 + 5 })]); // older replay
      expect((await s.getPolicyRecords(ws, 't1')).map((r) => r.decision)).to.deep.equal(['flag']);
      // newer, and a month later: another ClickHouse partition
      await s.insertEnrichment([policy(ws, { decision: 'block', createdAtMs: T0 + 40 * DAY })]);
      expect((await s.getPolicyRecords(ws, 't1')).map((r) => [r.decision, r.createdAtMs])).to.deep.equal([
        ['block', T0 + 40 * DAY],
      ]);
      // within one batch: highest version, the later one on a tie
      await s.insertEnrichment([
        alert(ws, { delivered: 'first', atMs: T0 }),
        alert(ws, { delivered: 'second', atMs: T0 }),
        alert(ws, { delivered: 'old', atMs: T0 - 1 }),
      ]);
      expect((await s.listAlerts(ws, { limit: 10 })).items.map((a) => a.delivered)).to.deep.equal(['second']);
      // a later write with the same version wins (delivery status updated)
      await s.insertEnrichment([alert(ws, { delivered: 'ok', atMs: T0 })]);
      expect((await s.listAlerts(ws, { limit: 10 })).items.map((a) => a.delivered)).to.deep.equal(['ok']);
      // a finding reprocessed a month later moves, once
      await s.insertEnrichment([finding(ws, { createdAtMs: T0 })]);
      await s.insertEnrichment([finding(ws, { createdAtMs: T0 + 40 * DAY, action: 'block' })]);
      const items = (await s.listFindings(ws, { limit: 10 })).items;
      expect(items.map((f) => [f.createdAtMs, f.action])).to.deep.equal([[T0 + 40 * DAY, 'block']]);
      // the old version is not found through a time filter on its old time either
      expect((await s.listFindings(ws, { limit: 10, toMs: T0 + DAY })).items).to.deep.equal([]);
    });

    it('isolates workspaces sharing ids', async function () {
      for (const ws of ['ws-iso-a', 'ws-iso-b']) {
        await s.insertEnrichment([
          finding(ws, { preview: ws }),
          policy(ws, { reasons: ws }),
          audit(ws, { details: ws }),
          alert(ws, { message: ws }),
          verification(ws, { contentHash: ws }),
          checkpoint(ws, { headHash: ws }),
        ]);
      }
      for (const ws of ['ws-iso-a', 'ws-iso-b']) {
        expect((await s.listFindings(ws, { limit: 10 })).items.map((r) => r.preview)).to.deep.equal([ws]);
        expect((await s.getPolicyRecords(ws, 't1')).map((r) => r.reasons)).to.deep.equal([ws]);
        expect((await s.listAudit(ws, { limit: 10 })).items.map((r) => r.details)).to.deep.equal([ws]);
        expect((await auditChain(s, ws)).map((r) => r.details)).to.deep.equal([ws]);
        expect((await s.listAlerts(ws, { limit: 10 })).items.map((r) => r.message)).to.deep.equal([ws]);
        expect((await s.getVerification(ws, 't1')).map((r) => r.contentHash)).to.deep.equal([ws]);
        const chain = await verificationChain(s, ws);
        expect([chain.records.map((r) => r.contentHash), chain.checkpoints.map((r) => r.headHash)]).to.deep.equal([
          [ws],
          [ws],
        ]);
      }
      const none = 'ws-iso-none';
      expect(await s.listFindings(none, { limit: 10 })).to.deep.equal({ items: [], nextCursor: null });
      expect(await s.listAudit(none, { limit: 10 })).to.deep.equal({ items: [], nextCursor: null });
      expect(await s.listAlerts(none, { limit: 10 })).to.deep.equal({ items: [], nextCursor: null });
      expect(await s.getPolicyRecords(none, 't1')).to.deep.equal([]);
      expect(await auditChain(s, none)).to.deep.equal([]);
      expect(await s.getVerification(none, 't1')).to.deep.equal([]);
      expect(await verificationChain(s, none)).to.deep.equal({ records: [], checkpoints: [] });
      expect(await s.usage(none, { groupBy: 'model', bucket: 'hour' })).to.deep.equal([]);
      expect(await s.findingsDaily(none, {})).to.deep.equal([]);
      // Every workspace with something to check, not only those with verification records: spans written around
      // the pipeline and a workspace's audit chain must not escape an unfiltered `tracegate verify`.
      await s.createWorkspace({ id: 'ws-iso-registered', name: 'ws-iso-registered', createdAtMs: T0 });
      await s.insertSpans([
        {
          ...emptySpan('ws-iso-spans', 'native'),
          traceId: 'iso-t',
          spanId: 'a0a0a0a0a0a0a0a0',
          startTimeNs: `${T0}000000`,
          endTimeNs: `${T0}000000`,
          ingestedAtMs: T0,
        },
      ]);
      const wss = await s.verificationWorkspaces();
      expect(wss).to.include.members(['ws-iso-a', 'ws-iso-b', 'ws-iso-registered', 'ws-iso-spans']);
      expect(wss).to.not.include(none);
      expect(wss).to.deep.equal([...new Set(wss)].sort());
    });

    it('returns policy records of one trace, newest per span, in (createdAtMs, spanId) order', async function () {
      const ws = 'ws-pol';
      await s.insertEnrichment([
        policy(ws, { spanId: 'b', createdAtMs: T0 + 2 }),
        policy(ws, { spanId: 'a', createdAtMs: T0 + 2 }),
        policy(ws, { spanId: 'c', createdAtMs: T0 + 1 }),
        policy(ws, { traceId: 'other', spanId: 'z' }),
      ]);
      expect((await s.getPolicyRecords(ws, 't1')).map((r) => r.spanId)).to.deep.equal(['c', 'a', 'b']);
      expect(await s.getPolicyRecords(ws, 'missing')).to.deep.equal([]);
    });

    describe('listFindings', function () {
      const ws = 'ws-find';
      const all: FindingRecord[] = [];
      before(async function () {
        // 3 traces × 2 spans × 2 rules × 2 offsets; createdAtMs repeats so ties need the full key
        let i = 0;
        for (const traceId of ['ta', 'tb', 'tc']) {
          for (const spanId of ['s1', 's2']) {
            for (const [detector, rule, category] of [
              ['pii', 'pii.email', 'email'],
              ['secret', 'secret.aws', 'api_key'],
            ] as const) {
              for (const start of [5, 100]) {
                all.push(
                  finding(ws, {
                    traceId,
                    spanId,
                    detector,
                    rule,
                    category,
                    start,
                    end: start + 3,
                    createdAtMs: T0 + (i++ % 5) * 1000,
                  }),
                );
              }
            }
          }
        }
        await s.insertEnrichment(all.slice(0, 10));
        await s.insertEnrichment(all.slice(10));
      });

      const sorted = (rows: FindingRecord[]) =>
        [...rows].sort(
          (a, b) =>
            b.createdAtMs - a.createdAtMs ||
            cmp(b.traceId, a.traceId) ||
            cmp(b.spanId, a.spanId) ||
            cmp(b.field, a.field) ||
            cmp(b.rule, a.rule) ||
            b.start - a.start,
        );

      it('lists newest first with the full key as tie-break', async function () {
        const page = await s.listFindings(ws, { limit: 1000 });
        expect(page.items).to.deep.equal(sorted(all));
        expect(page.nextCursor).to.equal(null);
      });

      it('filters by traceId, category, detector and time (from inclusive, to exclusive)', async function () {
        const q = async (f: Omit<Parameters<Storage['listFindings']>[1], 'limit'>) =>
          (await s.listFindings(ws, { limit: 1000, ...f })).items;
        expect(await q({ traceId: 'tb' })).to.deep.equal(sorted(all.filter((f) => f.traceId === 'tb')));
        expect(await q({ category: 'api_key' })).to.deep.equal(sorted(all.filter((f) => f.category === 'api_key')));
        expect(await q({ detector: 'pii', traceId: 'tc' })).to.deep.equal(
          sorted(all.filter((f) => f.detector === 'pii' && f.traceId === 'tc')),
        );
        expect(await q({ fromMs: T0 + 1000, toMs: T0 + 3000 })).to.deep.equal(
          sorted(all.filter((f) => f.createdAtMs >= T0 + 1000 && f.createdAtMs < T0 + 3000)),
        );
        expect(await q({ category: 'nope' })).to.deep.equal([]);
      });

      it('paginates with a keyset cursor: no duplicates, no gaps', async function () {
        for (const limit of [1, 2, 5, 7, 24, 50]) {
          expect(
            await allPages((cursor) => s.listFindings(ws, { limit, ...(cursor ? { cursor } : {}) }), limit),
          ).to.deep.equal(sorted(all), `limit ${limit}`);
        }
        const filtered = sorted(all.filter((f) => f.detector === 'secret' && f.createdAtMs >= T0 + 1000));
        expect(
          await allPages(
            (cursor) =>
              s.listFindings(ws, { limit: 3, detector: 'secret', fromMs: T0 + 1000, ...(cursor ? { cursor } : {}) }),
            3,
          ),
        ).to.deep.equal(filtered);
        expect((await s.listFindings(ws, { limit: 24 })).nextCursor).to.equal(null);
      });

      it('lists newest first across records of seconds, days and decades ago; a re-written key shows its newest version only', async function () {
        // ClickHouse reads a listing in windows of time growing back from the cursor or the newest match.
        const w = 'ws-find-windows';
        const now = Date.now();
        const ages = [5_000, 59_000, 61_000, 3_600_000, 3 * 86_400_000, 400 * 86_400_000];
        const recs = ages.map((age, i) => finding(w, { traceId: `t${i}`, createdAtMs: now - age }));
        const rewritten = finding(w, { traceId: 'tr', createdAtMs: now - 500 * 86_400_000 });
        await s.insertEnrichment([...recs, rewritten]);
        await s.insertEnrichment([{ ...rewritten, createdAtMs: now - 10_000, preview: 'newer' }]);
        const expected = sorted([...recs, { ...rewritten, createdAtMs: now - 10_000, preview: 'newer' }]);
        for (const limit of [1, 2, 100]) {
          expect(
            await allPages((cursor) => s.listFindings(w, { limit, ...(cursor ? { cursor } : {}) }), limit),
          ).to.deep.equal(expected, `limit ${limit}`);
        }
        // before the re-write's time: neither version (the key's newest is after toMs)
        expect(
          await allPages(
            (cursor) => s.listFindings(w, { limit: 2, toMs: now - 86_400_000, ...(cursor ? { cursor } : {}) }),
            2,
          ),
        ).to.deep.equal(sorted(recs.filter((r) => r.createdAtMs < now - 86_400_000)));
      });

      it('rejects a malformed cursor with a 400', async function () {
        const auditShaped = Buffer.from(JSON.stringify({ s: '1', t: '["c",1]' })).toString('base64url');
        for (const cursor of [
          'garbage',
          auditShaped,
          Buffer.from('{"s":"1","t":"[1,2,3,4,5]"}').toString('base64url'),
        ]) {
          await rejects400(s.listFindings(ws, { limit: 2, cursor }));
        }
      });
    });

    describe('listAudit and auditChain', function () {
      const ws = 'ws-audit';
      const all: AuditRecord[] = [];
      before(async function () {
        for (const chainId of ['chain-b', 'chain-a']) {
          for (let seq = 1; seq <= 12; seq++) {
            all.push(
              audit(ws, {
                chainId,
                seq,
                atMs: T0 + Math.floor(seq / 3) * 1000, // equal times within and across chains
                action: seq % 4 === 0 ? 'key.create' : 'ingest',
                actor: seq % 2 ? 'k_1' : 'cli',
                outcome: seq % 5 === 0 ? 'rejected' : 'ok',
                prevHash: `${chainId}-${seq - 1}`,
                hash: `${chainId}-${seq}`,
              }),
            );
          }
        }
        // out of order, across batches
        await s.insertEnrichment([...all].reverse().slice(0, 7));
        await s.insertEnrichment([...all].reverse().slice(7));
      });
      const newest = (rows: AuditRecord[]) =>
        [...rows].sort((a, b) => b.atMs - a.atMs || cmp(b.chainId, a.chainId) || b.seq - a.seq);

      it('returns the chain in (chainId, seq) order', async function () {
        const chain = await auditChain(s, ws);
        expect(chain).to.deep.equal([...all].sort((a, b) => cmp(a.chainId, b.chainId) || a.seq - b.seq));
        expect(chain.slice(0, 3).map((r) => [r.chainId, r.seq])).to.deep.equal([
          ['chain-a', 1],
          ['chain-a', 2],
          ['chain-a', 3],
        ]);
      });

      it('lists newest first by (atMs, chainId, seq), filters, and paginates', async function () {
        expect((await s.listAudit(ws, { limit: 1000 })).items).to.deep.equal(newest(all));
        expect((await s.listAudit(ws, { limit: 1000, action: 'key.create' })).items).to.deep.equal(
          newest(all.filter((r) => r.action === 'key.create')),
        );
        expect((await s.listAudit(ws, { limit: 1000, actor: 'cli', outcome: 'ok' })).items).to.deep.equal(
          newest(all.filter((r) => r.actor === 'cli' && r.outcome === 'ok')),
        );
        expect((await s.listAudit(ws, { limit: 1000, fromMs: T0 + 1000, toMs: T0 + 3000 })).items).to.deep.equal(
          newest(all.filter((r) => r.atMs >= T0 + 1000 && r.atMs < T0 + 3000)),
        );
        for (const limit of [1, 4, 5, 24]) {
          expect(
            await allPages((cursor) => s.listAudit(ws, { limit, ...(cursor ? { cursor } : {}) }), limit),
          ).to.deep.equal(newest(all), `limit ${limit}`);
        }
        expect(
          await allPages((cursor) => s.listAudit(ws, { limit: 2, actor: 'k_1', ...(cursor ? { cursor } : {}) }), 2),
        ).to.deep.equal(newest(all.filter((r) => r.actor === 'k_1')));
        await rejects400(s.listAudit(ws, { limit: 2, cursor: 'x' }));
      });

      it('lists newest first across records of seconds, hours, months and decades ago, and of the future', async function () {
        // ClickHouse reads a listing in windows of time growing back from the cursor or now: a page must not stop
        // at a window's edge, nor miss what lies after now.
        const w = 'ws-audit-windows';
        const now = Date.now();
        const ages = [
          -600_000,
          5_000,
          30_000,
          59_999,
          60_001,
          300_000,
          3 * 3_600_000,
          2 * 86_400_000,
          40 * 86_400_000,
          400 * 86_400_000,
        ];
        const recs = ages.map((age, i) =>
          audit(w, { chainId: 'chain-w', seq: i + 1, atMs: now - age, prevHash: `w-${i}`, hash: `w-${i + 1}` }),
        );
        recs.push(audit(w, { chainId: 'chain-old', seq: 1, atMs: 1, hash: 'old-1' }));
        await s.insertEnrichment(recs);
        for (const limit of [1, 2, 3, 100]) {
          expect(
            await allPages((cursor) => s.listAudit(w, { limit, ...(cursor ? { cursor } : {}) }), limit),
          ).to.deep.equal(newest(recs), `limit ${limit}`);
        }
        const span = { fromMs: now - 3 * 86_400_000, toMs: now - 10_000 };
        expect(
          await allPages((cursor) => s.listAudit(w, { limit: 2, ...span, ...(cursor ? { cursor } : {}) }), 2),
        ).to.deep.equal(newest(recs.filter((r) => r.atMs >= span.fromMs && r.atMs < span.toMs)));
        expect((await s.listAudit(w, { limit: 1, fromMs: now + 1 })).items.map((r) => r.seq)).to.deep.equal([1]);
      });
    });

    describe('listAlerts', function () {
      const ws = 'ws-alerts';
      const all: AlertRecord[] = [];
      before(async function () {
        for (let i = 0; i < 17; i++) {
          all.push(
            alert(ws, {
              alertId: `al-${String(i).padStart(2, '0')}`,
              ruleId: i % 3 ? 'r-cost' : 'r-latency',
              kind: i % 3 ? 'cost' : 'latency',
              atMs: T0 + Math.floor(i / 4) * 1000,
              value: i * 1.5,
            }),
          );
        }
        await s.insertEnrichment(all);
      });
      const newest = (rows: AlertRecord[]) => [...rows].sort((a, b) => b.atMs - a.atMs || cmp(b.alertId, a.alertId));

      it('lists newest first, filters by kind, ruleId and time, and paginates', async function () {
        expect((await s.listAlerts(ws, { limit: 1000 })).items).to.deep.equal(newest(all));
        expect((await s.listAlerts(ws, { limit: 1000, kind: 'latency' })).items).to.deep.equal(
          newest(all.filter((a) => a.kind === 'latency')),
        );
        expect((await s.listAlerts(ws, { limit: 1000, ruleId: 'r-cost', fromMs: T0 + 2000 })).items).to.deep.equal(
          newest(all.filter((a) => a.ruleId === 'r-cost' && a.atMs >= T0 + 2000)),
        );
        expect((await s.listAlerts(ws, { limit: 1000, toMs: T0 + 1000 })).items).to.deep.equal(
          newest(all.filter((a) => a.atMs < T0 + 1000)),
        );
        for (const limit of [1, 3, 4, 16, 17]) {
          expect(
            await allPages((cursor) => s.listAlerts(ws, { limit, ...(cursor ? { cursor } : {}) }), limit),
          ).to.deep.equal(newest(all), `limit ${limit}`);
        }
        await rejects400(
          s.listAlerts(ws, { limit: 2, cursor: Buffer.from('{"s":"1","t":"[1]"}').toString('base64url') }),
        );
      });
    });

    it("returns verification records and checkpoints in chain order; a trace's records across chains", async function () {
      const ws = 'ws-verif';
      const recs: VerificationRecord[] = [];
      for (const chainId of ['v-2', 'v-1']) {
        for (let seq = 1; seq <= 6; seq++) {
          recs.push(
            verification(ws, {
              chainId,
              seq,
              traceId: seq % 3 === 0 ? 'shared' : `${chainId}-t${seq}`,
              hash: `${chainId}-${seq}`,
            }),
          );
        }
      }
      const cps = [
        checkpoint(ws, { chainId: 'v-2', seq: 6 }),
        checkpoint(ws, { chainId: 'v-1', seq: 3 }),
        checkpoint(ws, { chainId: 'v-1', seq: 6 }),
      ];
      await s.insertEnrichment([...recs, ...cps].reverse());
      const byChain = <T extends { chainId: string; seq: number }>(xs: T[]) =>
        [...xs].sort((a, b) => cmp(a.chainId, b.chainId) || a.seq - b.seq);
      expect(await verificationChain(s, ws)).to.deep.equal({ records: byChain(recs), checkpoints: byChain(cps) });
      expect((await s.getVerification(ws, 'shared')).map((r) => [r.chainId, r.seq])).to.deep.equal([
        ['v-1', 3],
        ['v-1', 6],
        ['v-2', 3],
        ['v-2', 6],
      ]);
      expect(await s.getVerification(ws, 'v-1-t1')).to.deep.equal([recs.find((r) => r.traceId === 'v-1-t1')]);
      expect(await s.getVerification(ws, 'missing')).to.deep.equal([]);
      expect(await s.verificationWorkspaces()).to.include(ws);

      // around one trace's records only: a stretch of a chain, its next and newest checkpoints, its newest record
      expect(await s.verificationRange(ws, 'v-1', 2, 4)).to.deep.equal(
        byChain(recs).filter((r) => r.chainId === 'v-1' && r.seq >= 2 && r.seq <= 4),
      );
      expect(await s.verificationRange(ws, 'v-1', 7, 9)).to.deep.equal([]);
      expect(await s.chainState(ws, 'v-1', 2)).to.deep.equal({
        next: cps[1],
        lastCheckpoint: cps[2],
        last: { seq: 6, createdAtMs: T0 },
      });
      expect(await s.chainState(ws, 'v-1', 4)).to.deep.equal({
        next: cps[2],
        lastCheckpoint: cps[2],
        last: { seq: 6, createdAtMs: T0 },
      });
      expect(await s.chainState(ws, 'v-1', 7)).to.deep.equal({
        next: null,
        lastCheckpoint: cps[2],
        last: { seq: 6, createdAtMs: T0 },
      });
      expect(await s.chainState(ws, 'nope', 1)).to.deep.equal({ next: null, lastCheckpoint: null, last: null });
      expect(await s.chainState('ws-other', 'v-1', 1)).to.deep.equal({ next: null, lastCheckpoint: null, last: null });
      expect(await s.hasVerificationHash(ws, 'v-2-4')).to.equal(true);
      expect(await s.hasVerificationHash(ws, 'v-2-7')).to.equal(false);
      expect(await s.hasVerificationHash('ws-other', 'v-2-4')).to.equal(false);

      // a page of traces with every record each has (verify checks a trace with all of them)
      const of = await s.verificationOfTraces(ws, ['shared', 'v-1-t1', 'missing']);
      expect([...of.keys()].sort()).to.deep.equal(['shared', 'v-1-t1']);
      expect(of.get('shared')!.map((r) => [r.chainId, r.seq])).to.deep.equal([
        ['v-1', 3],
        ['v-1', 6],
        ['v-2', 3],
        ['v-2', 6],
      ]);
      expect((await s.verificationOfTraces('ws-other', ['shared'])).size).to.equal(0);
      expect((await s.verificationOfTraces(ws, [])).size).to.equal(0);
    });

    it('sizes stored traces and spans, and lists traces no verification record names, by trace id, in pages', async function () {
      const ws = 'ws-unverified';
      // 'named' has a record; the others have none. A span stored twice (a replay on another day, with a shorter
      // prompt) counts once, at its newest version's size.
      const spans = [
        llmSpan(ws, 's1', T0, { traceId: 'named' }),
        llmSpan(ws, 's2', T0, { traceId: 'named' }),
        llmSpan(ws, 's3', T0, { traceId: 'b-plain', prompt: 'x'.repeat(5000) }),
        llmSpan(ws, 's3', T0 + 3 * DAY, {
          traceId: 'b-plain',
          prompt: 'y'.repeat(100),
          ingestedAtMs: T0 + 3 * DAY + 9,
        }),
        llmSpan(ws, 's4', T0, { traceId: 'b-plain', prompt: 'y'.repeat(100) }),
        llmSpan(ws, 's5', T0, { traceId: 'a-first' }),
        llmSpan(ws, 's6', T0, { traceId: 'c-last' }),
        llmSpan('ws-other', 's7', T0, { traceId: 'other' }),
      ];
      await s.insertSpans(spans);
      await s.insertEnrichment([
        verification(ws, { chainId: 'u-1', seq: 1, traceId: 'named' }),
        verification(ws, { chainId: 'u-1', seq: 2, traceId: 'not-stored' }),
      ]);
      const sizes = await s.spanSizes(ws, 'b-plain', ['s3', 's4', 's1', 'unknown']);
      expect([...sizes.keys()].sort()).to.deep.equal(['s3', 's4']);
      expect(sizes.get('s3')).to.equal(sizes.get('s4')); // the newest s3 (the shorter): the two alike but for their ids
      expect(sizes.get('s4')).to.be.above(100);
      expect((await s.spanSizes(ws, 'not-stored', ['s3'])).size).to.equal(0);
      expect((await s.spanSizes(ws, 'b-plain', [])).size).to.equal(0);
      const plain = { spans: 2, bytes: sizes.get('s3')! + sizes.get('s4')! };
      const named = (await s.traceSizes(ws, ['named'])).get('named')!;
      expect(named.spans).to.equal(2);
      expect([...(await s.traceSizes(ws, ['named', 'b-plain', 'not-stored', 'other']))].sort()).to.deep.equal([
        ['b-plain', plain],
        ['named', named],
      ]);
      expect((await s.traceSizes(ws, [])).size).to.equal(0);
      const one = (await s.traceSizes(ws, ['a-first'])).get('a-first')!;
      expect(one.spans).to.equal(1);
      const all = [
        { traceId: 'a-first', ...one },
        { traceId: 'b-plain', ...plain },
        { traceId: 'c-last', ...(await s.traceSizes(ws, ['c-last'])).get('c-last')! },
      ];
      expect(await s.unverifiedTraces(ws, null, 10)).to.deep.equal(all);
      expect(await s.unverifiedTraces(ws, null, 2)).to.deep.equal(all.slice(0, 2));
      expect(await s.unverifiedTraces(ws, 'b-plain', 2)).to.deep.equal(all.slice(2));
      expect(await s.unverifiedTraces('ws-none', null, 10)).to.deep.equal([]);
    });

    describe('analytics', function () {
      const ws = 'ws-usage';
      const h0 = Math.floor(T0 / DAY) * DAY + 22 * HOUR; // 22:00 UTC: the day changes two hours later
      before(async function () {
        await s.insertSpans([
          llmSpan(ws, 'a1', h0 + 1000, {
            durationMs: 100,
            promptTokens: 10,
            completionTokens: 5,
            totalTokens: 15,
            costUsd: 0.001,
          }),
          llmSpan(ws, 'a2', h0 + 2000, {
            durationMs: 300,
            status: 'error',
            promptTokens: 20,
            completionTokens: 0,
            totalTokens: 20,
            costUsd: 0.002,
          }),
          llmSpan(ws, 'a3', h0 + 3000, {
            durationMs: 200,
            model: 'claude',
            environment: 'prod',
            promptTokens: 1,
            completionTokens: 1,
            totalTokens: 2,
            costUsd: 0.5,
          }),
          llmSpan(ws, 'b1', h0 + HOUR + 5, { durationMs: 50, actionName: 'triage', source: 'otlp' }),
          llmSpan(ws, 'c1', h0 + 2 * HOUR + 5, { durationMs: 70, costUsd: 0.25 }), // next UTC day
          llmSpan(ws, 'e1', h0 + 1500, {
            kind: 'embedding',
            model: 'text-embedding-3-small',
            durationMs: 30,
            promptTokens: 1000,
            totalTokens: 1000,
            costUsd: 0.00002,
          }),
          // not counted: other kinds, other workspaces
          llmSpan(ws, 'x1', h0 + 1000, { kind: 'tool', durationMs: 9999, promptTokens: 999 }),
          llmSpan('ws-usage-other', 'y1', h0 + 1000, { durationMs: 1 }),
        ]);
        // a second batch into the same hour: the rollup merges states of several inserts
        await s.insertSpans([
          llmSpan(ws, 'a4', h0 + 4000, {
            durationMs: 400,
            promptTokens: 1,
            completionTokens: 2,
            totalTokens: 3,
            costUsd: 0.004,
          }),
        ]);
        await s.insertEnrichment([
          finding(ws, { createdAtMs: h0 + 5 }),
          finding(ws, { start: 1, createdAtMs: h0 + 6 }),
          finding(ws, { rule: 'secret.aws', category: 'api_key', severity: 'critical', createdAtMs: h0 + 7 }),
          finding(ws, { spanId: 's9', createdAtMs: h0 + 2 * HOUR + 1 }),
          finding('ws-usage-other', { createdAtMs: h0 }),
        ]);
      });

      const iso = (ms: number) => new Date(ms).toISOString();
      const row = (bucketMs: number, key: string, durations: number[], over: Partial<UsageRow>): UsageRow => {
        const d = [...durations].sort((a, b) => a - b);
        return {
          bucketStart: iso(bucketMs),
          key,
          requests: d.length,
          errors: 0,
          errorRate: 0,
          promptTokens: 0,
          completionTokens: 0,
          totalTokens: 0,
          costUsd: 0,
          p50Ms: interpolatedQuantile(d, 0.5),
          p95Ms: interpolatedQuantile(d, 0.95),
          p99Ms: interpolatedQuantile(d, 0.99),
          feedbackUp: 0,
          feedbackDown: 0,
          ...over,
        };
      };

      it('rolls model calls (LLM and embedding spans) up per hour and group', async function () {
        expect(await s.usage(ws, { groupBy: 'model', bucket: 'hour' })).to.deep.equal([
          row(h0, 'claude', [200], { promptTokens: 1, completionTokens: 1, totalTokens: 2, costUsd: 0.5 }),
          row(h0, 'gpt-4o', [100, 300, 400], {
            errors: 1,
            errorRate: 1 / 3,
            promptTokens: 31,
            completionTokens: 7,
            totalTokens: 38,
            costUsd: 0.007,
          }),
          row(h0, 'text-embedding-3-small', [30], { promptTokens: 1000, totalTokens: 1000, costUsd: 0.00002 }),
          row(h0 + HOUR, 'gpt-4o', [50], {}),
          row(h0 + 2 * HOUR, 'gpt-4o', [70], { costUsd: 0.25 }),
        ]);
        const bySource = await s.usage(ws, { groupBy: 'source', bucket: 'hour' });
        expect(bySource.map((r) => [r.bucketStart, r.key, r.requests])).to.deep.equal([
          [iso(h0), 'native', 5],
          [iso(h0 + HOUR), 'otlp', 1],
          [iso(h0 + 2 * HOUR), 'native', 1],
        ]);
        const byAction = await s.usage(ws, { groupBy: 'actionName', bucket: 'hour' });
        expect(byAction.map((r) => [r.key, r.requests])).to.deep.equal([
          ['', 5],
          ['triage', 1],
          ['', 1],
        ]);
      });

      it('rolls hours up into UTC days', async function () {
        const day0 = Math.floor(h0 / DAY) * DAY;
        expect(await s.usage(ws, { groupBy: 'environment', bucket: 'day' })).to.deep.equal([
          row(day0, '', [30, 100, 300, 400, 50], {
            errors: 1,
            errorRate: 0.2,
            promptTokens: 1031,
            completionTokens: 7,
            totalTokens: 1038,
            costUsd: 0.00702,
          }),
          row(day0, 'prod', [200], { promptTokens: 1, completionTokens: 1, totalTokens: 2, costUsd: 0.5 }),
          row(day0 + DAY, '', [70], { costUsd: 0.25 }),
        ]);
      });

      it('keeps days after 2105 apart from 1970 (ClickHouse 18.16 cannot name them as dates)', async function () {
        const far = 'ws-usage-2106';
        await s.insertSpans([llmSpan(far, 'z1', 4_294_967_290_000), llmSpan(far, 'z0', 1_000)]);
        expect(
          (await s.usage(far, { groupBy: 'model', bucket: 'day' })).map((r) => [r.bucketStart, r.requests]),
        ).to.deep.equal([
          ['1970-01-01T00:00:00.000Z', 1],
          ['2106-02-07T00:00:00.000Z', 1],
        ]);
      });

      it('filters on the hour bucket: an hour is included when it overlaps [fromMs, toMs)', async function () {
        const keys = async (q: Partial<UsageQuery>) =>
          (await s.usage(ws, { groupBy: 'model', bucket: 'hour', ...q })).map(
            (r) => `${r.bucketStart.slice(11, 13)}:${r.key}:${r.requests}`,
          );
        expect(await keys({ fromMs: h0 + HOUR })).to.deep.equal(['23:gpt-4o:1', '00:gpt-4o:1']);
        // mid-hour bounds: the whole 22:00 hour is in, the 00:00 hour starts at toMs and is out
        expect(await keys({ fromMs: h0 + 3500, toMs: h0 + 2 * HOUR })).to.deep.equal([
          '22:claude:1',
          '22:gpt-4o:3',
          '22:text-embedding-3-small:1',
          '23:gpt-4o:1',
        ]);
        expect(await keys({ toMs: h0 + 2 * HOUR + 1 })).to.have.length(5);
        expect(await keys({ fromMs: h0 + 3 * HOUR })).to.deep.equal([]);
        // a day bucket at the edge holds only the hours in range
        const days = await s.usage(ws, { groupBy: 'model', bucket: 'day', fromMs: h0 + HOUR });
        expect(days.map((r) => [r.bucketStart.slice(0, 10), r.requests])).to.deep.equal([
          [iso(h0).slice(0, 10), 1],
          [iso(h0 + DAY).slice(0, 10), 1],
        ]);
      });

      it('rejects an unknown groupBy or bucket with a 400', async function () {
        await rejects400(s.usage(ws, { groupBy: 'nope' as UsageQuery['groupBy'], bucket: 'hour' }));
        await rejects400(s.usage(ws, { groupBy: 'model', bucket: 'week' as UsageQuery['bucket'] }));
      });

      it('counts findings per UTC day, category and severity', async function () {
        const d0 = iso(h0).slice(0, 10);
        const d1 = iso(h0 + DAY).slice(0, 10);
        expect(await s.findingsDaily(ws, {})).to.deep.equal([
          { day: d0, category: 'api_key', severity: 'critical', count: 1 },
          { day: d0, category: 'email', severity: 'medium', count: 2 },
          { day: d1, category: 'email', severity: 'medium', count: 1 },
        ]);
        expect((await s.findingsDaily(ws, { fromMs: h0 + 2 * HOUR })).map((r) => r.day)).to.deep.equal([d1]);
        expect((await s.findingsDaily(ws, { toMs: h0 + 2 * HOUR })).map((r) => r.day)).to.deep.equal([d0, d0]);
        expect(await s.findingsDaily(ws, { toMs: h0 + 2 * HOUR + 1 })).to.have.length(3);
      });
    });
  });
}

function cmp(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

for (const [name, factory] of CONTRACT_BACKENDS) enrichmentContract(name, factory);

for (const [chName, chFactory] of CLICKHOUSES)
  describe(`enrichment schema: ${chName}`, function () {
    let h: StoreHarness;
    before(async function () {
      h = await chFactory();
    });
    after(async function () {
      await h?.destroy();
    });

    type Store = { db: string; client: ClickHouseClient; opts: ConstructorParameters<typeof ClickHouseStorage>[0] };
    /**
     * A fresh database `<db>_<suffix>` migrated by hand: `run(client, db)` on every node (a cluster migrates the local
     * tables of each), then a store over it, which init()s it as a collector starting there would.
     */
    async function migratedByHand(
      suffix: string,
      run: (client: ClickHouseClient, db: string) => Promise<void>,
    ): Promise<ClickHouseStorage> {
      const store = h.storage as unknown as Store;
      const fresh = `${store.db}_${suffix}`;
      const nodes = store.opts.cluster?.nodeUrls;
      const targets = nodes
        ? nodes.map((url) => ({
            client: createClient({ url, log: { level: ClickHouseLogLevel.OFF } }),
            db: `${fresh}_local`,
            own: true,
          }))
        : [{ client: store.client, db: fresh, own: false }];
      for (const { client, db, own } of targets) {
        await client.command({ query: `CREATE DATABASE IF NOT EXISTS ${db}` });
        await client.command({
          query: `CREATE TABLE IF NOT EXISTS ${db}.schema_migrations (version UInt32, applied_at DateTime) ENGINE = ReplacingMergeTree() ORDER BY version`,
        });
        await run(client, db);
        if (own) await client.close();
      }
      const s2 = new ClickHouseStorage({ ...store.opts, database: fresh });
      await s2.init();
      return s2;
    }
    const applied = (client: ClickHouseClient, db: string, version: number) =>
      client.command({ query: `INSERT INTO ${db}.schema_migrations VALUES (${version}, now())` });

    it('every migration statement can run again (two collectors migrating at once)', async function () {
      // On a fresh database, each migration run twice where it stands in the sequence (a second collector
      // running it too), then a store over it: one view per rollup, or every span would count twice.
      const s2 = await migratedByHand('twice', async (client, db) => {
        for (const m of CLICKHOUSE_MIGRATIONS) {
          for (let twice = 0; twice < 2; twice++) for (const st of m.statements(db)) await runStatement(client, st);
          await applied(client, db, m.version);
        }
      });
      try {
        await s2.insertSpans([llmSpan('ws-mig', 's', T0, { costUsd: 0.5 })]);
        expect(
          (await s2.usage('ws-mig', { groupBy: 'model', bucket: 'hour' })).map((r) => [r.requests, r.costUsd]),
        ).to.deep.equal([[1, 0.5]]);
      } finally {
        await s2.close();
      }
    });

    it('an old migration run again after the newest (a slower collector still migrating) is undone at the next start', async function () {
      const s2 = await migratedByHand('late', async (client, db) => {
        for (const m of CLICKHOUSE_MIGRATIONS) {
          for (const st of m.statements(db)) await runStatement(client, st);
          await applied(client, db, m.version);
        }
        // the late collector: v4 to v6 once more, after v7 dropped what they made (then it dies). Current releases
        // refuse to create a view writing a column that is gone; 18.16 creates it, and every span insert then fails.
        // v15 once more after v16 dropped its training index: a second index of every trainable call, kept by a view.
        for (const m of CLICKHOUSE_MIGRATIONS.filter((x) => (x.version >= 4 && x.version <= 6) || x.version === 15)) {
          for (const st of m.statements(db)) await runStatement(client, st).catch(() => {});
        }
      });
      try {
        await s2.insertSpans([llmSpan('ws-late', 's', T0, { costUsd: 0.5 })]);
        expect(
          (await s2.usage('ws-late', { groupBy: 'model', bucket: 'hour' })).map((r) => [r.requests, r.costUsd]),
        ).to.deep.equal([[1, 0.5]]);
        const { client, db } = s2 as unknown as Store;
        const left = await client.query({
          query: `SELECT name FROM system.tables WHERE database LIKE '${db}%' AND name LIKE 'training_spans%'`,
          format: 'JSONEachRow',
        });
        expect(await left.json()).to.deep.equal([]);
      } finally {
        await s2.close();
      }
    });

    it('v10 carries the trace index over (trace_index → trace_days): a trace stored before it is found, read and looked up', async function () {
      const s2 = await migratedByHand('v9', async (client, db) => {
        for (const m of CLICKHOUSE_MIGRATIONS.filter((x) => x.version <= 9)) {
          for (const st of m.statements(db)) await runStatement(client, st);
          await applied(client, db, m.version);
        }
        // what a v9 collector wrote for one span: its row and its index entry
        await client.command({
          query: `INSERT INTO ${db}.spans (workspace_id, trace_id, span_id, start_date, start_ns, kind, model, events_json, rollup, ingested_at_ms) VALUES ('ws-v9', 't-old', 's-old', toDate('2025-11-22'), 1763787000123000000, 'llm', 'gpt-4o', '[]', 1, 7)`,
        });
        await client.command({
          query: `INSERT INTO ${db}.trace_index VALUES ('ws-v9', 't-old', toDate('2025-11-22'))`,
        });
      });
      try {
        const [old] = await s2.getTrace('ws-v9', 't-old');
        expect([old?.spanId, old?.model, old?.ingestedAtMs]).to.deep.equal(['s-old', 'gpt-4o', 7]);
        expect(
          await s2.spanVersions('ws-v9', [
            { traceId: 't-old', spanId: 's-old' },
            { traceId: 't-new', spanId: 's-old' },
          ]),
        ).to.deep.equal([{ traceId: 't-old', spanId: 's-old', ingestedAtMs: 7 }]);
        // trace_index is gone (on a cluster: from the shards' databases, and no Distributed table was made for it)
        const { db, client } = s2 as unknown as Store;
        const tables = await (
          await client.query({
            query: `SELECT name FROM system.tables WHERE database IN ('${db}', '${db}_local') AND name IN ('trace_index', 'trace_days')`,
            format: 'JSONEachRow',
          })
        ).json<{ name: string }>();
        expect(tables.map((t) => t.name)).to.deep.equal(
          (s2 as unknown as Store).opts.cluster ? ['trace_days', 'trace_days'] : ['trace_days'],
        );
      } finally {
        await s2.close();
      }
    });

    it('v11 indexes the verification records stored before it (and those written behind the collector): found by trace id', async function () {
      const s2 = await migratedByHand('v10', async (client, db) => {
        for (const m of CLICKHOUSE_MIGRATIONS.filter((x) => x.version <= 10)) {
          for (const st of m.statements(db)) await runStatement(client, st);
          await applied(client, db, m.version);
        }
        await client.command({
          query: `INSERT INTO ${db}.verification VALUES ('ws-v10', 'vc-old', 1, 't-old', ['s1'], [7], '${'c'.repeat(64)}', '${'0'.repeat(64)}', '${'d'.repeat(64)}', ${T0})`,
        });
      });
      try {
        const old = verification('ws-v10', { chainId: 'vc-old', traceId: 't-old', spanIds: ['s1'], spanVersions: [7] });
        expect(await s2.getVerification('ws-v10', 't-old')).to.deep.equal([old]);
        // a row inserted straight into the table now: the view indexes it too
        const { db, client } = s2 as unknown as Store;
        await client.command({
          query: `INSERT INTO ${db}.verification VALUES ('ws-v10', 'vc-old', 2, 't-old', ['s1'], [8], '${'c'.repeat(64)}', '${'d'.repeat(64)}', '${'e'.repeat(64)}', ${T0})`,
        });
        expect((await s2.getVerification('ws-v10', 't-old')).map((r) => r.seq)).to.deep.equal([1, 2]);
      } finally {
        await s2.close();
      }
    });

    it("finds a trace's verification records without reading the workspace's (max_rows_to_read below the table's rows)", async function () {
      this.timeout(120_000);
      const ws = 'ws-many-records';
      const n = 60_000;
      const recs = Array.from({ length: n }, (_, i) =>
        verification(ws, { chainId: 'vc-many', seq: i + 1, traceId: `t-${i + 1}` }),
      );
      recs[n - 10] = { ...recs[n - 10]!, traceId: 't-5' }; // a trace delivered again much later in the chain
      await h.storage.insertEnrichment(recs);
      const store = h.storage as unknown as Store;
      // Every query of this store may read at most 20,000 rows (per shard, on one thread): a scan of the workspace's
      // records cannot. A single 18.16 server does not count the rows of a FINAL read (the answers are checked there);
      // through the cluster's Distributed tables it does. Not on chDB: its one in-process session would keep the limit
      // for the tests after this one (the answers are checked there too).
      const url = new URL(store.opts.url);
      url.searchParams.set('clickhouse_setting_max_rows_to_read', '20000');
      url.searchParams.set('clickhouse_setting_max_threads', '1');
      const limited = store.opts.connection ? null : new ClickHouseStorage({ ...store.opts, url: url.toString() });
      const s = limited ?? h.storage;
      try {
        // not init(): the database is migrated, and the cluster's checks read system tables whole
        expect((await s.getVerification(ws, 't-5')).map((r) => r.seq)).to.deep.equal([5, n - 9]);
        const ids = Array.from({ length: 500 }, (_, i) => `t-${30_001 + i}`);
        const of = await s.verificationOfTraces(ws, ids);
        expect([...of.keys()].sort()).to.deep.equal([...ids].sort());
        expect(of.get('t-30001')!.map((r) => r.seq)).to.deep.equal([30_001]);
      } finally {
        await limited?.close();
      }
    });

    it('v8 carries the settings written before it over (settings → settings_versions)', async function () {
      const s2 = await migratedByHand('v7', async (client, db) => {
        for (const m of CLICKHOUSE_MIGRATIONS.filter((x) => x.version <= 7)) {
          for (const st of m.statements(db)) await runStatement(client, st);
          await applied(client, db, m.version);
        }
        // what a v7 collector wrote: two versions of one workspace's settings
        await client.command({
          query: `INSERT INTO ${db}.settings VALUES ('ws-old', 1, '{"alertRules":[]}', 1000), ('ws-old', 2, '{"policy":{"version":1,"defaultAction":"redact","actions":{}}}', 2000)`,
        });
      });
      try {
        expect(await s2.getSettings('ws-old')).to.deep.equal({
          version: 2,
          doc: '{"policy":{"version":1,"defaultAction":"redact","actions":{}}}',
        });
        expect(await s2.putSettings('ws-old', '{}', 3, 3000)).to.equal(true);
        expect(await s2.putSettings('ws-old', '{"alertRules":[]}', 2, 4000)).to.equal(false); // version 2 is taken
        expect((await s2.getSettings('ws-old'))?.version).to.equal(3);
      } finally {
        await s2.close();
      }
    });

    it('the lookup finds the stored spans of a trace on two days among new traces, over two queries, and no span of the same id elsewhere', async function () {
      const ws = 'ws-lookup-days';
      const store = h.storage as unknown as Store;
      const day = 86_400_000;
      await h.storage.insertSpans([
        llmSpan(ws, 'd1', T0, { traceId: 'two-days' }),
        llmSpan(ws, 'd2', T0 + 3 * day, { traceId: 'two-days' }),
      ]);
      // 6,000 new traces (two lookup queries), each asking for a span id the stored trace has
      const keys = [
        ...Array.from({ length: 6_000 }, (_, i) => ({ traceId: `new-${i}`, spanId: i % 2 ? 'd1' : 'd2' })),
        { traceId: 'two-days', spanId: 'd1' },
        { traceId: 'two-days', spanId: 'd2' },
        { traceId: 'two-days', spanId: 'd3' },
      ];
      expect(
        [...(await storedSpans(store.client, store.db, ws, keys)).values()].map((f) => [f.traceId, f.spanId]).sort(),
      ).to.deep.equal([
        ['two-days', 'd1'],
        ['two-days', 'd2'],
      ]);
      expect(
        (await spanVersionsOf(store.client, store.db, ws, keys))
          .map((v) => [v.traceId, v.spanId, v.ingestedAtMs])
          .sort(),
      ).to.deep.equal([
        ['two-days', 'd1', T0 + 5],
        ['two-days', 'd2', T0 + 3 * day + 5],
      ]);
    });

    it('a replayed batch larger than one lookup query (5,000 trace ids) is counted once', async function () {
      const ws = 'ws-big-replay';
      const spans = Array.from({ length: 12_000 }, (_, i) => llmSpan(ws, `b${i}`, T0 + i, { totalTokens: 1 }));
      await h.storage.insertSpans(spans.slice(0, 7_000));
      await h.storage.insertSpans(spans); // the first 7,000 again, across two lookup queries, plus 5,000 new
      const usage = await h.storage.usage(ws, { groupBy: 'model', bucket: 'day' });
      expect(usage.map((r) => [r.requests, r.totalTokens])).to.deep.equal([[12_000, 12_000]]);
    });

    it("the lookup before an insert reads the stored versions of the batch's spans and findings, not every one of their traces", async function () {
      const ws = 'ws-wide';
      const store = h.storage as unknown as Store;
      const spans = Array.from({ length: 3_000 }, (_, i) => ({
        ...llmSpan(ws, `w${i}`, T0 + i, { totalTokens: 1 }),
        traceId: 'wide',
      }));
      await h.storage.insertSpans(spans);
      await h.storage.insertEnrichment(
        spans.slice(0, 100).map((x, i) => finding(ws, { traceId: 'wide', spanId: x.spanId, start: i })),
      );
      const keys = [
        { traceId: 'wide', spanId: 'w7' },
        { traceId: 'wide', spanId: 'w2999' },
        { traceId: 'wide', spanId: 'new' },
        { traceId: 'tr-w8', spanId: 'w8' },
      ];
      expect([...(await storedSpans(store.client, store.db, ws, keys)).keys()].sort()).to.deep.equal([
        spanKey('wide', 'w2999'),
        spanKey('wide', 'w7'),
      ]);
      expect(
        [...(await storedFindings(store.client, store.db, ws, keys)).values()].map((f) => [f.traceId, f.spanId]),
      ).to.deep.equal([['wide', 'w7']]);
      // a re-delivery of some of them, with new ones, is still counted once
      await h.storage.insertSpans([
        ...spans.slice(5, 10).map((x) => ({ ...x, ingestedAtMs: x.ingestedAtMs + 1 })),
        { ...spans[0]!, spanId: 'w-new' },
      ]);
      expect(
        (await h.storage.usage(ws, { groupBy: 'model', bucket: 'day' })).map((r) => [r.requests, r.totalTokens]),
      ).to.deep.equal([[3_001, 3_001]]);
      // chunks stay within the query size, a large trace's span ids split over several
      const many = Array.from({ length: 60_000 }, (_, i) => ({ traceId: 'wide', spanId: `${'\\'.repeat(10)}${i}` }));
      const all = [...many, { traceId: 'tr-1', spanId: 'a' }];
      const chunks = keyChunks(all);
      expect(chunks.length).to.be.greaterThan(1);
      const named = new Set(chunks.flatMap((c) => c.spanIds.flatMap((x) => c.traceIds.map((t) => spanKey(t, x)))));
      expect(all.filter((k) => !named.has(spanKey(k.traceId, k.spanId)))).to.deep.equal([]);
      for (const c of chunks) expect(Buffer.byteLength(JSON.stringify(c))).to.be.below(1.1 * (1 << 20));
    });

    // 5,000 ids of 250 backslashes each escape to over 2.5 MB per IN list: one query would exceed
    // max_query_size and fail as a syntax error on every retry, stalling the writer for everyone.
    it('a lookup of long, escape-heavy trace ids is split by size and still counts a replay once', async function () {
      const ws = 'ws-escape-heavy';
      const spans = Array.from({ length: 5_000 }, (_, i) => ({
        ...llmSpan(ws, `e${i}`, T0 + i, { totalTokens: 1 }),
        traceId: '\\'.repeat(250) + i,
      }));
      for (const ids of lookupChunks(spans.map((s) => s.traceId))) expect(ids.length).to.be.below(5_000);
      await h.storage.insertSpans(spans);
      await h.storage.insertSpans(spans);
      const usage = await h.storage.usage(ws, { groupBy: 'model', bucket: 'day' });
      expect(usage.map((r) => [r.requests, r.totalTokens])).to.deep.equal([[5_000, 5_000]]);
      expect(await h.storage.getTrace(ws, '\\'.repeat(250) + 42)).to.have.length(1);
    });
  });

describe('enrichment schema: clickhouse, TRACEGATE_CLICKHOUSE_EXACT_ROLLUPS=false', function () {
  useSharedClickHouse();
  it('skips the stored-version lookup: a replay is counted again (the documented trade-off)', async function () {
    const db = `t_nolookup_${Date.now()}`;
    const s = new ClickHouseStorage({ url: clickhouseUrl(), database: db, exactRollups: false });
    await s.init();
    try {
      const span = llmSpan('ws-nolookup', 's', T0, { totalTokens: 5 });
      await s.insertSpans([span]);
      await s.insertSpans([span]);
      expect(
        (await s.usage('ws-nolookup', { groupBy: 'model', bucket: 'hour' })).map((r) => [r.requests, r.totalTokens]),
      ).to.deep.equal([[2, 10]]);
      expect(await s.countSpans('ws-nolookup')).to.equal(1); // the spans table still collapses it
    } finally {
      await (s as unknown as { client: { command(o: { query: string }): Promise<unknown> } }).client.command({
        query: `DROP DATABASE IF EXISTS ${db}`,
      });
      await s.close();
    }
  });
});

// ---- both backends, same data, same answers ----

function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function usageDataset(ws: string): { spans: SpanRecord[]; findings: FindingRecord[] } {
  const r = rng(7);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const base = Math.floor(T0 / HOUR) * HOUR - 20 * HOUR; // spans over ~30 hours, across a UTC day boundary
  const spans: SpanRecord[] = [];
  for (let i = 0; i < 400; i++) {
    const start = base + Math.floor(r() * 30 * HOUR);
    spans.push(
      llmSpan(ws, `s${i}`, start, {
        kind: r() < 0.85 ? 'llm' : pick(['tool', 'agent', 'chain'] as const),
        model: pick(['gpt-4o', 'gpt-4o-mini', 'claude-sonnet', '']),
        actionName: pick(['', 'triage', 'summarize', 'extract']),
        environment: pick(['prod', 'staging', '']),
        source: pick(['native', 'otlp', 'proxy', 'agents'] as const),
        status: pick(['completed', 'completed', 'completed', 'error', 'blocked']),
        // a mix of whole, fractional, tiny and heavy-tailed latencies, with ties
        durationMs: pick([
          () => Math.floor(r() * 2000),
          () => r() * 5000,
          () => r() * 1e-3,
          () => (1 / (r() + 1e-3)) * 100,
          () => 250,
        ])(),
        promptTokens: Math.floor(r() * 8000),
        completionTokens: Math.floor(r() * 1000),
        totalTokens: Math.floor(r() * 9000),
        costUsd: r() * 0.05,
      }),
    );
  }
  const findings: FindingRecord[] = [];
  for (let i = 0; i < 150; i++) {
    findings.push(
      finding(ws, {
        traceId: `t${i % 40}`,
        spanId: `s${i}`,
        start: i,
        createdAtMs: base + Math.floor(r() * 50 * HOUR),
        ...pick([
          { category: 'email', rule: 'pii.email' },
          { category: 'api_key', rule: 'secret.aws' },
          { category: 'prompt_injection', rule: 'inj' },
        ]),
        severity: pick(['low', 'medium', 'high', 'critical'] as const),
      }),
    );
  }
  return { spans, findings };
}

describe('enrichment analytics: backends agree (ClickHouse 18.16, ClickHouse 26 on chDB, DuckDB)', function () {
  const harnesses: StoreHarness[] = [];
  const ws = 'ws-agree-usage';
  const { spans: first, findings: firstFindings } = usageDataset(ws);
  // Re-deliveries that must not be counted twice: a crash replay (identical rows), an exporter
  // retry (same content, later ingestedAtMs), updates (same span, new status/tokens/cost), and an
  // old version arriving after the update (ignored: the newest version wins).
  const retried = first.slice(100, 200).map((x) => ({ ...x, ingestedAtMs: x.ingestedAtMs + 1000 }));
  const updated = first.slice(200, 260).map((x, i) => ({
    ...x,
    ingestedAtMs: x.ingestedAtMs + 2000,
    status: i % 2 ? 'error' : 'completed',
    promptTokens: x.promptTokens + 7,
    totalTokens: x.totalTokens + 7,
    costUsd: x.costUsd * 2,
  }));
  const spans = [...first.slice(0, 200), ...updated, ...first.slice(260)];
  // Findings: a replay, a retry on the same day, and a re-detection moved to a later day.
  const movedFindings = firstFindings.slice(20, 40).map((f) => ({ ...f, createdAtMs: f.createdAtMs + DAY }));
  const findings = [...firstFindings.slice(0, 20), ...movedFindings, ...firstFindings.slice(40)];

  before(async function () {
    for (const [, factory] of [...BACKENDS, ...CLICKHOUSES.slice(1)]) {
      const h = await factory();
      harnesses.push(h);
      // several inserts: the rollup merges partial states written by each
      for (let i = 0; i < first.length; i += 90) await h.storage.insertSpans(first.slice(i, i + 90));
      await h.storage.insertEnrichment(firstFindings.slice(0, 70));
      await h.storage.insertEnrichment(firstFindings.slice(70));
      await h.storage.insertSpans(first.slice(0, 120));
      await h.storage.insertSpans(retried);
      await h.storage.insertSpans(updated);
      await h.storage.insertSpans(first.slice(200, 230));
      await h.storage.insertEnrichment(firstFindings.slice(0, 50));
      await h.storage.insertEnrichment(
        firstFindings.slice(50, 60).map((f) => ({ ...f, createdAtMs: f.createdAtMs + 1 })),
      );
      await h.storage.insertEnrichment(movedFindings);
    }
  });
  after(async function () {
    for (const h of harnesses) await h.destroy();
  });

  // Counts and tokens are integers: exact. Cost is a float sum whose rounding depends on the
  // summation order, which differs between engines: within 1e-9 (both Kahan-sum and round to
  // 15 significant digits, so in practice equal). Quantiles: exact — ClickHouse's `quantiles`
  // reservoir holds every value while a merged group has <= 8192 spans, and DuckDB reproduces
  // its interpolation with the same float operations (see enrichment.ts).
  function expectAgree(a: UsageRow[], b: UsageRow[], label: string): void {
    expect(a.length, label).to.equal(b.length);
    for (let i = 0; i < a.length; i++) {
      const x = a[i]!;
      const y = b[i]!;
      expect(Math.abs(x.costUsd - y.costUsd), `${label} cost row ${i}`).to.be.at.most(1e-9);
      expect({ ...x, costUsd: 0 }, `${label} row ${i}`).to.deep.equal({ ...y, costUsd: 0 });
    }
  }

  for (const groupBy of ['model', 'actionName', 'environment', 'source'] as const) {
    for (const bucket of ['hour', 'day'] as const) {
      it(`usage by ${groupBy} per ${bucket}`, async function () {
        const ranges: Array<Partial<UsageQuery>> = [{}, { fromMs: T0 - 7.5 * HOUR, toMs: T0 + 2.25 * HOUR }];
        for (const range of ranges) {
          const [ch, duck] = await Promise.all(
            harnesses.map((h) => h.storage.usage(ws, { groupBy, bucket, ...range })),
          );
          expectAgree(ch!, duck!, `${groupBy}/${bucket} ${JSON.stringify(range)}`);
          expect(ch!.length).to.be.greaterThan(2);
        }
        // the whole range adds up to the LLM spans of the data set
        const whole = await harnesses[0]!.storage.usage(ws, { groupBy, bucket });
        const llm = spans.filter((s) => s.kind === 'llm');
        expect(whole.reduce((n, r) => n + r.requests, 0)).to.equal(llm.length);
        expect(whole.reduce((n, r) => n + r.errors, 0)).to.equal(llm.filter((s) => s.status === 'error').length);
        expect(whole.reduce((n, r) => n + r.totalTokens, 0)).to.equal(llm.reduce((n, s) => n + s.totalTokens, 0));
      });
    }
  }

  // Beyond 8192 spans in one (bucket, key) group ClickHouse's reservoir holds a uniform sample
  // of 8192 durations, so its quantiles are estimates: the documented tolerance is 5 standard
  // errors of the rank, 5·sqrt(q(1-q)/8192) (±2.8% of the rank at p50, ±0.55% at p99). DuckDB
  // samples about as many (by row hash: the same answer on every read), within the same tolerance.
  it('quantiles of a group larger than the reservoir stay within the documented rank tolerance', async function () {
    this.timeout(240_000);
    const big = 'ws-agree-big';
    const n = 12_000;
    const r = rng(99);
    const order = Array.from({ length: n }, (_, i) => i);
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    const start = Math.floor(T0 / HOUR) * HOUR;
    const rows = order.map((v, i) =>
      llmSpan(big, `b${i}`, start + (i % 3_000_000), { durationMs: v * 0.5, totalTokens: 1 }),
    );
    for (const h of harnesses) for (let i = 0; i < n; i += 4000) await h.storage.insertSpans(rows.slice(i, i + 4000));
    const [ch, duck] = await Promise.all(
      harnesses.map((h) => h.storage.usage(big, { groupBy: 'model', bucket: 'hour' })),
    );
    expect(ch!.map((x) => [x.requests, x.totalTokens])).to.deep.equal([[n, n]]);
    expect(duck!.map((x) => [x.requests, x.totalTokens])).to.deep.equal([[n, n]]);
    const levels = [
      ['p50Ms', 0.5],
      ['p95Ms', 0.95],
      ['p99Ms', 0.99],
    ] as const;
    for (const [field, q] of levels) {
      for (const [name, rows] of [
        ['clickhouse', ch!],
        ['duckdb', duck!],
      ] as const) {
        const rank = rows[0]![field] / 0.5 / (n - 1);
        expect(Math.abs(rank - q), `${name} ${field}`).to.be.at.most(5 * Math.sqrt((q * (1 - q)) / 8192));
      }
    }
    expect(await harnesses[1]!.storage.usage(big, { groupBy: 'model', bucket: 'hour' })).to.deep.equal(duck);
  });

  it('findingsDaily', async function () {
    for (const q of [{}, { fromMs: T0 - 5 * HOUR }, { fromMs: T0 - 30 * HOUR, toMs: T0 + 1 }]) {
      const [ch, duck] = await Promise.all(harnesses.map((h) => h.storage.findingsDaily(ws, q)));
      expect(ch).to.deep.equal(duck);
      expect(ch!.length).to.be.greaterThan(3);
    }
    const all = await harnesses[0]!.storage.findingsDaily(ws, {});
    expect(all.reduce((n, r) => n + r.count, 0)).to.equal(findings.length);
  });

  // A span re-sent with another model, hour or kind leaves its old group. Counts, tokens and cost
  // follow exactly; ClickHouse's quantile states cannot drop a value, so quantiles are not compared.
  it('a span that moves to another group leaves the old one', async function () {
    const moveWs = 'ws-agree-move';
    const h0 = Math.floor(T0 / HOUR) * HOUR;
    const a = llmSpan(moveWs, 'm1', h0 + 10, { model: 'gpt-4o', totalTokens: 10, costUsd: 0.5 });
    const b = llmSpan(moveWs, 'm2', h0 + 20, { model: 'gpt-4o', totalTokens: 20, costUsd: 0.25 });
    const c = llmSpan(moveWs, 'm3', h0 + 30, { model: 'gpt-4o', totalTokens: 40, costUsd: 0.125 });
    for (const h of harnesses) {
      await h.storage.insertSpans([a, b, c]);
      await h.storage.insertSpans([
        { ...a, model: 'claude', ingestedAtMs: a.ingestedAtMs + 1 },
        { ...b, kind: 'tool', ingestedAtMs: b.ingestedAtMs + 1 },
        { ...c, startTimeNs: (BigInt(h0 + HOUR + 30) * 1_000_000n).toString(), ingestedAtMs: c.ingestedAtMs + 1 },
      ]);
    }
    const strip = (rows: UsageRow[]) => rows.map((r) => [r.bucketStart, r.key, r.requests, r.totalTokens, r.costUsd]);
    const [ch, duck] = await Promise.all(
      harnesses.map((h) => h.storage.usage(moveWs, { groupBy: 'model', bucket: 'hour' })),
    );
    expect(strip(ch!)).to.deep.equal(strip(duck!));
    expect(strip(duck!)).to.deep.equal([
      [new Date(h0).toISOString(), 'claude', 1, 10, 0.5],
      [new Date(h0 + HOUR).toISOString(), 'gpt-4o', 1, 40, 0.125],
    ]);
  });
});
