// Verification reads a large trace a part at a time (SPANS_PER_READ spans per storage call): the verdicts must be
// the ones a whole read gives. Here the part size is made small so that ordinary traces are "large".
import { expect } from 'chai';
import { join } from 'node:path';
import { BACKENDS, cli, flushed, get, post, startTestServer } from '../support/server.ts';
import { MAX_LISTED_PROBLEMS, verifyTrace, verifyWorkspace } from '../../processors/verify-workspace.ts';
import { emptySpan } from '../../collector/record.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { publicKeys } from '../../processors/signing.ts';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const T0 = 1_763_787_000_000_000_000n;

function otlp(from: number, to: number) {
  const spans = [];
  for (let i = from; i < to; i++) {
    spans.push({
      traceId: TRACE, spanId: (0x1000 + i).toString(16).padStart(16, '0'), parentSpanId: i ? '0000000000001000' : '', name: `step ${i}`, kind: 1,
      startTimeUnixNano: String(T0 + BigInt(i) * 1_000_000n), endTimeUnixNano: String(T0 + BigInt(i + 1) * 1_000_000n),
      attributes: [{ key: 'input.value', value: { stringValue: `question ${i}` } }],
    });
  }
  return { resourceSpans: [{ scopeSpans: [{ scope: { name: 't' }, spans }] }] };
}

for (const backend of BACKENDS) {
  describe(`verification a part at a time (${backend})`, function () {
    this.timeout(120_000);

    it('gives the verdicts of a whole read: clean, a rewritten span, a span no record names, a trace with no record', async () => {
      const s = await startTestServer(backend);
      try {
        const k = JSON.parse((await cli(s, ['keys', 'create', '--workspace', 'parts-co', '--json'])).stdout); // audited, as the audit chain check wants
        const auth = { authorization: `Bearer ${k.key}` };
        for (const [a, b] of [[0, 10], [10, 20], [20, 27]]) expect((await post(`${s.url}/v1/traces`, otlp(a!, b!), auth)).status).to.equal(200);
        // one delivered again: its records are superseded, not broken
        expect((await post(`${s.url}/v1/traces`, otlp(20, 27), auth)).status).to.equal(200);
        expect((await post(`${s.url}/api/traces`, { requestId: 'native-1', prompt: 'p', response: 'r' }, auth)).status).to.equal(200);
        await flushed(s);
        const keys = publicKeys(join(s.dataDir, 'keys'));
        // The idle signer signs the chain heads about a second after the records: wait for it, so that reads taken
        // one after the other see the same checkpoints.
        for (let i = 0; i < 50 && (await verifyWorkspace(s.running.storage, k.workspaceId, keys)).unsignedTail > 0; i++) await sleep(200);
        const later = Date.now() + 60_000; // nothing is still settling
        const both = async () => {
          const [whole, parts] = [await verifyWorkspace(s.running.storage, k.workspaceId, keys, later), await verifyWorkspace(s.running.storage, k.workspaceId, keys, later, 4)];
          expect(parts).to.deep.equal(whole);
          // and the chains read two records (checkpoints, audit records) at a time: every page boundary crossed
          expect(await verifyWorkspace(s.running.storage, k.workspaceId, keys, later, 4, 2)).to.deep.equal(whole);
          const [one, oneInParts] = [await verifyTrace(s.running.storage, k.workspaceId, TRACE, keys), await verifyTrace(s.running.storage, k.workspaceId, TRACE, keys, 4)];
          expect(oneInParts).to.deep.equal(one);
          return { whole, one };
        };
        const clean = await both();
        expect(clean.whole.ok, JSON.stringify([clean.whole.problems, clean.whole.audit])).to.equal(true);
        expect(clean.whole.superseded).to.equal(1);
        expect(clean.one.ok).to.equal(true);

        // Behind the collector's back: a span rewritten (a newer version no record vouches for), a span added to
        // the trace, and a trace of its own.
        const [target] = await s.running.storage.getSpans(k.workspaceId, TRACE, ['000000000000100c']);
        const old = Date.now() - 120_000;
        await s.running.storage.insertSpans([
          { ...target!, response: 'tampered', ingestedAtMs: Date.now() + 600_000 },
          { ...target!, spanId: 'ffffffffffffff01', name: 'added', ingestedAtMs: old },
          ...Array.from({ length: 6 }, (_, i) => ({ ...target!, traceId: 'no-record', spanId: `00000000000000a${i}`, ingestedAtMs: old })),
          // a trace whose record names one span, six more written around the collector: read by its stored size
          ...Array.from({ length: 6 }, (_, i) => ({ ...target!, traceId: 'native-1', spanId: `00000000000000b${i}`, ingestedAtMs: old })),
        ]);
        const tampered = await both();
        expect(tampered.whole.problems.map((p) => [p.kind, p.traceId])).to.deep.equal([
          ['content_hash_mismatch', TRACE], ['unverified_span', TRACE], ...Array(6).fill(['unverified_span', 'native-1']), ['unverified_span', 'no-record'],
        ]);
        expect(tampered.one.problems.map((p) => p.kind)).to.deep.equal(['content_hash_mismatch', 'unverified_span']);
        expect((await get(`${s.url}/api/traces/${TRACE}/verification`, auth)).json.ok).to.equal(false);
      } finally {
        await s.close();
      }
    });

    it(`lists at most ${MAX_LISTED_PROBLEMS} problems and counts the rest`, async () => {
      const s = await startTestServer(backend);
      try {
        const k = JSON.parse((await cli(s, ['keys', 'create', '--workspace', 'many-co', '--json'])).stdout);
        // Written around the collector, long ago: a trace each with no verification record.
        const old = Date.now() - 600_000;
        const spans = Array.from({ length: MAX_LISTED_PROBLEMS + 5 }, (_, i) => ({
          ...emptySpan(k.workspaceId, 'native'), traceId: `forged-${String(i).padStart(5, '0')}`, spanId: 'a'.repeat(16), name: 'x',
          startTimeNs: '1763787000000000000', endTimeNs: '1763787000000000001', ingestedAtMs: old,
        }));
        await s.running.storage.insertSpans(spans);
        const r = await verifyWorkspace(s.running.storage, k.workspaceId, publicKeys(join(s.dataDir, 'keys')));
        expect(r.ok).to.equal(false);
        expect(r.problems).to.have.length(MAX_LISTED_PROBLEMS);
        expect(r.problems.every((p) => p.kind === 'unverified_span')).to.equal(true);
        expect(r.problemsOmitted).to.equal(5);
        expect(r.tracesChecked).to.equal(MAX_LISTED_PROBLEMS + 5);
        const out = await cli(s, ['verify', '--workspace', 'many-co']);
        expect(out.code).to.equal(1);
        expect(out.stdout, out.stdout.slice(-300)).to.include('5 more');
      } finally {
        await s.close();
      }
    });
  });
}
