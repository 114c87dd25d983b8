// Checking one trace reads its chain a stretch at a time (from the record before each of its records to the next
// checkpoint), not the workspace's whole chain: the same verdicts about that trace, at a cost that does not grow
// with the workspace. A real embedded store; chains made by the collector's own VerificationChain.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptySpan, type SpanRecord } from '../../../core/record.ts';
import type { CheckpointRecord, VerificationRecord } from '../../../core/enrichment-records.ts';
import { contentHash as contentHashOf, linkHash, VerificationChain } from '../../../processors/verification.ts';
import { loadSigningKey, publicKeys } from '../../../processors/signing.ts';
import { verifyTrace } from '../../../processors/verify-workspace.ts';
import { openDuckDb } from '../../support/spool.ts';
import type { DuckDbStorage } from '../../../storage/duckdb.ts';

describe('verifying one trace reads its chain around its records only', function () {
  this.timeout(60_000);
  let dir: string;
  let store: DuckDbStorage;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'trace-chain-'));
    store = await openDuckDb(dir);
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A chain of 60 traces, one every 0.5 s, checkpointed as the collector does; `edit` changes what is stored. */
  async function workspace(
    ws: string,
    edit: (r: VerificationRecord[], c: CheckpointRecord[]) => [VerificationRecord[], CheckpointRecord[]] = (r, c) => [
      r,
      c,
    ],
  ) {
    const chain = new VerificationChain(loadSigningKey(join(dir, 'keys')), 1000, `chain-${ws}`);
    const spans: SpanRecord[] = [];
    const records: VerificationRecord[] = [];
    const cps: CheckpointRecord[] = [];
    const t0 = Date.now() - 600_000;
    for (let i = 0; i < 60; i++) {
      const s = {
        ...emptySpan(ws, 'native'),
        traceId: `t${i}`,
        spanId: `s${i}`,
        startTimeNs: '1000',
        endTimeNs: '2000',
        prompt: `p${i}`,
        ingestedAtMs: t0 + i * 500,
      };
      spans.push(s);
      records.push(...chain.records([s], t0 + i * 500));
      cps.push(...chain.checkpoints(t0 + i * 500));
    }
    cps.push(...chain.checkpoints(t0 + 60 * 500 + 1000)); // as at shutdown: the tail signed too
    const [r, c] = edit(records, cps);
    await store.insertSpans(spans);
    await store.insertEnrichment([...r, ...c]);
    return { records, cps };
  }
  const check = (ws: string, trace: string) => verifyTrace(store, ws, trace, publicKeys(join(dir, 'keys')));

  it('a clean chain: every trace verifies against one checkpoint', async () => {
    await workspace('clean');
    for (const t of ['t0', 't1', 't30', 't59']) {
      const v = await check('clean', t);
      expect(v.problems, t).to.deep.equal([]);
      expect([v.ok, v.recordsChecked, v.checkpointsChecked], t).to.deep.equal([true, 1, 1]);
    }
  });

  it("an edited record of the trace, the record before it deleted, another record's link broken before the checkpoint", async () => {
    await workspace('edited', (r, c) => [
      r.map((x) => (x.traceId === 't20' ? { ...x, contentHash: 'f'.repeat(64) } : x)),
      c,
    ]);
    expect((await check('edited', 't20')).problems.map((p) => [p.kind, p.traceId])).to.deep.equal([
      ['content_hash_mismatch', 't20'],
      ['link_hash_mismatch', 't20'],
    ]);
    expect((await check('edited', 't21')).ok).to.equal(true); // another trace's record changed: not this trace's problem

    await workspace('gap', (r, c) => [r.filter((x) => x.traceId !== 't19'), c]);
    expect((await check('gap', 't20')).problems.map((p) => p.kind)).to.deep.equal(['chain_gap']);
    expect((await check('gap', 't40')).ok).to.equal(true);

    // a record after the trace's and before its checkpoint (another trace's) relinked: the signature no longer reaches it
    let victim = '';
    await workspace('relinked', (r, c) => {
      const signed = new Set(c.map((x) => x.seq));
      const mine = r.find((x) => x.seq > 10 && !signed.has(x.seq))!; // a record awaiting the next checkpoint
      victim = mine.traceId;
      const next = c.filter((x) => x.seq > mine.seq).sort((a, b) => a.seq - b.seq)[0]!;
      return [r.map((x) => (x.seq === next.seq ? { ...x, prevHash: '0'.repeat(64) } : x)), c];
    });
    const relinked = await check('relinked', victim);
    // the broken link cuts this trace off from the signature: its problem, whoever's record holds the link
    expect(relinked.problems.map((p) => p.kind)).to.deep.equal(['prev_hash_mismatch', 'link_hash_mismatch']);
  });

  it('checkpoints deleted after the first, and a forged signature', async () => {
    await workspace('unsigned', (r, c) => [r, c.filter((x) => x.seq === 1)]);
    const v = await check('unsigned', 't30');
    expect(v.problems.map((p) => p.kind)).to.deep.equal(['checkpoint_missing']);
    expect(v.unsignedTail).to.equal(59);
    expect((await check('unsigned', 't59')).problems).to.deep.equal([]); // the newest: may still be awaiting its checkpoint
    expect((await check('unsigned', 't0')).ok).to.equal(true); // signed by the one left

    await workspace('forged', (r, c) => [r, c.map((x) => ({ ...x, signature: Buffer.alloc(64).toString('base64') }))]);
    expect((await check('forged', 't30')).problems.map((p) => p.kind)).to.deep.equal([
      'bad_signature',
      'checkpoint_missing',
    ]);
  });

  it('a trace rewritten with its record re-hashed and the next link moved to it; a chain rebuilt without signatures; a forged far checkpoint', async () => {
    // The writer has the database, not the signing key: content, content hash and record hash recomputed, and the
    // next record pointed at the new hash. Its own hash no longer matches: the signature does not reach the trace.
    let target = '';
    let forged: SpanRecord | null = null;
    await workspace('rehashed', (r, c) => {
      const signed = new Set(c.map((x) => x.seq));
      const mine = r.find((x) => x.seq > 10 && !signed.has(x.seq) && signed.has(x.seq + 1))!;
      target = mine.traceId;
      const forgedSpan = {
        ...emptySpan('rehashed', 'native'),
        traceId: mine.traceId,
        spanId: mine.spanIds[0]!,
        startTimeNs: '1000',
        endTimeNs: '2000',
        prompt: 'forged',
        ingestedAtMs: mine.spanVersions[0]!,
      };
      forged = forgedSpan;
      const contentHash = contentHashOf([forgedSpan]);
      const hash = linkHash(mine.prevHash, { ...mine, contentHash });
      return [
        r.map((x) =>
          x === mine ? { ...x, contentHash, hash } : x.seq === mine.seq + 1 ? { ...x, prevHash: hash } : x,
        ),
        c,
      ];
    });
    await store.insertSpans([forged!]); // over the stored span, at the same version
    expect((await store.getTrace('rehashed', target))[0]!.prompt).to.equal('forged');
    const v = await check('rehashed', target);
    expect(v.ok).to.equal(false);
    expect(v.problems.map((p) => [p.kind, p.seq - v.records[0]!.seq])).to.deep.equal([['link_hash_mismatch', 1]]);

    // every hash rebuilt after an edit, and every checkpoint deleted: no signature anywhere
    await workspace('rebuilt', (r) => [r, []]);
    expect((await check('rebuilt', 't30')).problems.map((p) => p.kind)).to.deep.equal(['unsigned_chain']);

    // a junk checkpoint a million records ahead: refused before it decides how far to read
    await workspace('far', (r, c) => [r, [...c.filter((x) => x.seq < 10), { ...c.at(-1)!, seq: 1_000_060 }]]);
    const far = await check('far', 't30');
    expect(far.problems.map((p) => p.kind)).to.deep.equal(['bad_signature', 'checkpoint_missing']);
  });

  it('a chain continuing an earlier run: fine while that run is stored, a gap once it is deleted', async () => {
    const key = loadSigningKey(join(dir, 'keys'));
    const a = new VerificationChain(key, 1000, 'run-a');
    const s1 = {
      ...emptySpan('runs', 'native'),
      traceId: 'ta',
      spanId: 'a',
      startTimeNs: '1000',
      endTimeNs: '2000',
      ingestedAtMs: 1,
    };
    const ra = a.records([s1], 1);
    const b = new VerificationChain(key, 1000, 'run-b', false, {
      runs: { seq: ra[0]!.seq, hash: ra[0]!.hash, signedSeq: 1, signedAt: 1 },
    } as never);
    const s2 = { ...s1, traceId: 'tb', spanId: 'b' };
    const rb = b.records([s2], 2);
    await store.insertSpans([s1, s2]);
    await store.insertEnrichment([...rb, ...b.checkpoints(2)]);
    expect((await check('runs', 'tb')).problems.map((p) => p.kind)).to.deep.equal(['chain_gap']);
    await store.insertEnrichment([...ra, ...a.checkpoints(1)]);
    expect((await check('runs', 'tb')).problems).to.deep.equal([]);
  });
});
