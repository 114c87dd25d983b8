// ClickHouseStorage.recordBatch, which the storage thread writes spool segments with (storage/spool-files.ts):
// records encoded as they are added store what insertSpans and insertEnrichment store. insertSpans itself goes
// through it, so the contract suite covers the spans; this covers the mix a segment holds.
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptySpan, type SpanRecord, type StoredRecord } from '../../core/record.ts';
import type {
  AuditRecord,
  CheckpointRecord,
  FindingRecord,
  PolicyRecord,
  VerificationRecord,
} from '../../core/enrichment-records.ts';
import { encodeFrame } from '../../spool/spool.ts';
import type { ClickHouseStorage } from '../../storage/clickhouse.ts';
import { insertSpoolFiles } from '../../storage/spool-files.ts';
import { auditChain, verificationChain } from '../support/chains.ts';
import { CLICKHOUSES, type StoreHarness } from './harness.ts';

const HOUR_MS = 3_600_000;
const T0 = 1_780_000_000_000;

function span(ws: string, traceId: string, spanId: string, over: Partial<SpanRecord> = {}): SpanRecord {
  const start = BigInt(T0) * 1_000_000n;
  return {
    ...emptySpan(ws, 'native'),
    traceId,
    spanId,
    name: 'call',
    kind: 'llm',
    model: 'gpt-4o',
    status: 'completed',
    startTimeNs: String(start),
    endTimeNs: String(start + 5_000_000n),
    durationMs: 5,
    promptTokens: 10,
    completionTokens: 5,
    totalTokens: 15,
    costUsd: 0.5,
    prompt: 'p\ttab',
    response: 'r\nline',
    ingestedAtMs: T0,
    ...over,
  };
}

function segmentRecords(ws: string): StoredRecord[] {
  const audit = (seq: number): AuditRecord => ({
    recordType: 'audit',
    workspaceId: ws,
    chainId: 'a1',
    seq,
    atMs: T0 + seq,
    actor: 'k_1',
    action: 'ingest',
    route: 'POST /api/traces',
    outcome: 'ok',
    accepted: 1,
    rejected: 0,
    details: '{"n":"tab\\there"}',
    prevHash: `p${seq}`,
    hash: `h${seq}`,
  });
  const verification: VerificationRecord = {
    recordType: 'verification',
    workspaceId: ws,
    traceId: 't1',
    spanIds: ['s1', "it's"],
    spanVersions: [T0 + 20, T0],
    contentHash: 'c1',
    chainId: 'v1',
    seq: 1,
    prevHash: '0'.repeat(64),
    hash: 'vh1',
    createdAtMs: T0,
  };
  const checkpoint: CheckpointRecord = {
    recordType: 'checkpoint',
    workspaceId: ws,
    chainId: 'v1',
    seq: 1,
    headHash: 'vh1',
    keyId: 'key1',
    signature: 'c2ln',
    atMs: T0,
  };
  const finding: FindingRecord = {
    recordType: 'finding',
    workspaceId: ws,
    traceId: 't1',
    spanId: 's1',
    detector: 'pii',
    rule: 'pii.email',
    category: 'email',
    severity: 'medium',
    field: 'prompt',
    start: 0,
    end: 5,
    preview: 'a***@b.c',
    score: 1,
    action: 'flag',
    createdAtMs: T0,
  };
  const policy: PolicyRecord = {
    recordType: 'policy',
    workspaceId: ws,
    traceId: 't1',
    spanId: 's1',
    policyVersion: 1,
    decision: 'flag',
    reasons: '[]',
    createdAtMs: T0,
  };
  return [
    span(ws, 't1', 's1', { name: 'first', totalTokens: 100 }),
    audit(1),
    verification,
    span(ws, 't1', "it's"), // quoted in the verification record's span list
    span(ws, 't1', 's1', { name: 'newest', ingestedAtMs: T0 + 20 }), // supersedes the first in the same batch
    span(ws, 't1', 's1', { name: 'older replay', ingestedAtMs: T0 + 10 }), // too old: left out
    audit(2),
    audit(2),
    checkpoint,
    finding,
    policy, // audit 2 replayed
    span(ws, 't2', 's1', {
      startTimeNs: String(BigInt(T0 + 30 * 24 * HOUR_MS) * 1_000_000n),
      endTimeNs: String(BigInt(T0 + 30 * 24 * HOUR_MS) * 1_000_000n + 1n),
    }),
  ];
}

async function readBack(s: ClickHouseStorage, ws: string) {
  return {
    t1: (await s.getTrace(ws, 't1')).map((r) => [r.spanId, r.name, r.ingestedAtMs, r.prompt, r.response]),
    t2: (await s.getTrace(ws, 't2')).map((r) => r.spanId),
    count: await s.countSpans(ws),
    usage: (await s.usage(ws, { groupBy: 'model', bucket: 'day' })).map((u) => [u.requests, u.totalTokens]),
    audit: (await auditChain(s, ws)).map((a) => [a.seq, a.details]),
    verification: await verificationChain(s, ws).then(({ records, checkpoints }) => ({
      records: records.map(({ workspaceId: _, ...v }) => v),
      checkpoints: checkpoints.map(({ workspaceId: _, ...c }) => c),
    })),
    findings: (await s.listFindings(ws, { limit: 10 })).items.map((f) => f.rule),
    policies: (await s.getPolicyRecords(ws, 't1')).map((p) => p.decision),
  };
}

for (const [name, factory] of CLICKHOUSES) {
  describe(`ClickHouse record batches (${name})`, function () {
    this.timeout(120_000);
    let h: StoreHarness;
    let s: ClickHouseStorage;
    before(async () => {
      h = await factory();
      s = h.storage as ClickHouseStorage;
    });
    after(async () => {
      await h?.destroy();
    });

    it('store what insertSpans and insertEnrichment store: newest span versions once, every chained record once', async function () {
      const batch = s.recordBatch();
      for (const r of segmentRecords('ws-batch')) batch.add(r);
      await batch.finish();
      const records = segmentRecords('ws-objects');
      await s.insertSpans(records.filter((r): r is SpanRecord => !('recordType' in r)));
      await s.insertEnrichment(
        records.filter((r) => 'recordType' in r) as Parameters<ClickHouseStorage['insertEnrichment']>[0],
      );
      const got = await readBack(s, 'ws-batch');
      expect(got).to.deep.equal(await readBack(s, 'ws-objects'));
      expect(got.t1).to.deep.equal([
        ["it's", 'call', T0, 'p\ttab', 'r\nline'],
        ['s1', 'newest', T0 + 20, 'p\ttab', 'r\nline'],
      ]);
      expect(got.count).to.equal(3);
      expect(got.usage.reduce((n, [requests]) => n + requests!, 0)).to.equal(3); // the superseded version is not counted
      expect(got.audit).to.deep.equal([
        [1, '{"n":"tab\\there"}'],
        [2, '{"n":"tab\\there"}'],
      ]);
      expect(got.verification.records.map((v) => v.spanIds)).to.deep.equal([['s1', "it's"]]);
      expect(got.verification.checkpoints.map((c) => c.signature)).to.deep.equal(['c2ln']);
      expect([got.findings, got.policies]).to.deep.equal([['pii.email'], ['flag']]);
    });

    it('a record that cannot be stored fails add() and leaves the batch as it was', async function () {
      const batch = s.recordBatch();
      batch.add(span('ws-bad', 't', 'a'));
      expect(() => batch.add(span('ws-bad', 't', 'b', { startTimeNs: '-5' }))).to.throw(RangeError);
      await batch.finish(); // no half-written line: the insert parses
      expect((await s.getTrace('ws-bad', 't')).map((x) => x.spanId)).to.deep.equal(['a']);
    });

    it('is finished once: adding to it or finishing it again throws', async function () {
      const batch = s.recordBatch();
      batch.add(span('ws-once', 't', 'a'));
      await batch.finish();
      expect(() => batch.add(span('ws-once', 't', 'b'))).to.throw('already finished');
      let err: unknown;
      await batch.finish().catch((e: unknown) => {
        err = e;
      });
      expect(String(err)).to.include('already finished');
      expect(await s.countSpans('ws-once')).to.equal(1);
    });

    it('spool segments go in through batches, in inserts of at most maxRows records', async function () {
      const dir = mkdtempSync(join(tmpdir(), 'tracegate-batch-'));
      try {
        const path = join(dir, 'segment');
        const records = segmentRecords('ws-spool');
        writeFileSync(path, Buffer.concat([encodeFrame(records.slice(0, 5)), encodeFrame(records.slice(5))]));
        const result = await insertSpoolFiles(s, [path], 4);
        expect(result.chunks.map((c) => c.rows)).to.deep.equal([4, 4, 4]);
        expect(await readBack(s, 'ws-spool')).to.deep.equal(await readBack(s, 'ws-objects'));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
