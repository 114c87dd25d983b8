// Verification reads a large trace a part at a time (SPANS_PER_READ spans per storage call): the verdicts must be
// the ones a whole read gives. Here the part size is made small so that ordinary traces are "large".
import { expect } from 'chai';
import { join } from 'node:path';
import { BACKENDS, cli, flushed, get, post, startTestServer } from '../support/server.ts';
import { MAX_LISTED_PROBLEMS, verifyTrace, verifyWorkspace } from '../../processors/verify-workspace.ts';
import { emptySpan, type SpanRecord } from '../../core/record.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { publicKeys } from '../../processors/signing.ts';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const T0 = 1_763_787_000_000_000_000n;

function otlp(from: number, to: number, traceId = TRACE, text = '') {
  const spans = [];
  for (let i = from; i < to; i++) {
    spans.push({
      traceId,
      spanId: (0x1000 + i).toString(16).padStart(16, '0'),
      parentSpanId: i ? '0000000000001000' : '',
      name: `step ${i}`,
      kind: 1,
      startTimeUnixNano: String(T0 + BigInt(i) * 1_000_000n),
      endTimeUnixNano: String(T0 + BigInt(i + 1) * 1_000_000n),
      attributes: [{ key: 'input.value', value: { stringValue: `question ${i}${text}` } }],
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
        for (const [a, b] of [
          [0, 10],
          [10, 20],
          [20, 27],
        ])
          expect((await post(`${s.url}/v1/traces`, otlp(a!, b!), auth)).status).to.equal(200);
        // one delivered again: its records are superseded, not broken
        expect((await post(`${s.url}/v1/traces`, otlp(20, 27), auth)).status).to.equal(200);
        expect(
          (await post(`${s.url}/api/traces`, { requestId: 'native-1', prompt: 'p', response: 'r' }, auth)).status,
        ).to.equal(200);
        await flushed(s);
        const keys = publicKeys(join(s.dataDir, 'keys'));
        // The idle signer signs the chain heads about a second after the records: wait for it, so that reads taken
        // one after the other see the same checkpoints.
        for (let i = 0; i < 50 && (await verifyWorkspace(s.running.storage, k.workspaceId, keys)).unsignedTail > 0; i++)
          await sleep(200);
        const later = Date.now() + 60_000; // nothing is still settling
        const both = async () => {
          const [whole, parts] = [
            await verifyWorkspace(s.running.storage, k.workspaceId, keys, later),
            await verifyWorkspace(s.running.storage, k.workspaceId, keys, later, { spans: 4 }),
          ];
          expect(parts).to.deep.equal(whole);
          // and the chains read two records (checkpoints, audit records) at a time: every page boundary crossed
          expect(
            await verifyWorkspace(s.running.storage, k.workspaceId, keys, later, { spans: 4, chainPage: 2 }),
          ).to.deep.equal(whole);
          const [one, oneInParts] = [
            await verifyTrace(s.running.storage, k.workspaceId, TRACE, keys),
            await verifyTrace(s.running.storage, k.workspaceId, TRACE, keys, { spans: 4 }),
          ];
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
          ...Array.from({ length: 6 }, (_, i) => ({
            ...target!,
            traceId: 'no-record',
            spanId: `00000000000000a${i}`,
            ingestedAtMs: old,
          })),
          // a trace whose record names one span, six more written around the collector: read by its stored size
          ...Array.from({ length: 6 }, (_, i) => ({
            ...target!,
            traceId: 'native-1',
            spanId: `00000000000000b${i}`,
            ingestedAtMs: old,
          })),
        ]);
        const tampered = await both();
        expect(tampered.whole.problems.map((p) => [p.kind, p.traceId])).to.deep.equal([
          ['content_hash_mismatch', TRACE],
          ['unverified_span', TRACE],
          ...Array(6).fill(['unverified_span', 'native-1']),
          ['unverified_span', 'no-record'],
        ]);
        expect(tampered.one.problems.map((p) => p.kind)).to.deep.equal(['content_hash_mismatch', 'unverified_span']);
        expect((await get(`${s.url}/api/traces/${TRACE}/verification`, auth)).json.ok).to.equal(false);
      } finally {
        await s.close();
      }
    });

    it('keeps each read within the byte budget, with the verdicts of a whole read', async () => {
      const s = await startTestServer(backend);
      try {
        const k = JSON.parse((await cli(s, ['keys', 'create', '--workspace', 'bytes-co', '--json'])).stdout);
        const auth = { authorization: `Bearer ${k.key}` };
        const big = 'q'.repeat(20_000);
        // A trace of 12 spans of 20 KB, sent four spans (one verification record) at a time, and small ones.
        for (const [a, b] of [
          [0, 4],
          [4, 8],
          [8, 12],
        ])
          expect((await post(`${s.url}/v1/traces`, otlp(a!, b!, TRACE, big), auth)).status).to.equal(200);
        for (let t = 0; t < 5; t++)
          expect((await post(`${s.url}/v1/traces`, otlp(0, 2, `${'ab'.repeat(15)}${t}${t}`), auth)).status).to.equal(
            200,
          );
        // Three traces of one such span: each under the budget, together over it (a chunk of traces is cut by bytes).
        for (let t = 0; t < 3; t++)
          expect(
            (await post(`${s.url}/v1/traces`, otlp(0, 1, `${'cd'.repeat(15)}${t}${t}`, big), auth)).status,
          ).to.equal(200);
        await flushed(s);
        // Written around the collector, long ago: two traces of six such spans, and a span added to the big trace.
        const [model] = await s.running.storage.getSpans(k.workspaceId, TRACE, ['0000000000001000']);
        const old = Date.now() - 600_000;
        await s.running.storage.insertSpans([
          ...[0, 1].flatMap((t) =>
            Array.from({ length: 6 }, (_, i) => ({
              ...model!,
              traceId: `forged-${t}`,
              spanId: `00000000000000c${i}`,
              ingestedAtMs: old,
            })),
          ),
          { ...model!, spanId: 'ffffffffffffff02', ingestedAtMs: old },
        ]);
        const keys = publicKeys(join(s.dataDir, 'keys'));
        for (let i = 0; i < 50 && (await verifyWorkspace(s.running.storage, k.workspaceId, keys)).unsignedTail > 0; i++)
          await sleep(200);
        // Bytes of text each read brings, per storage call (the prompt, and its copy in the attributes, are nearly
        // all of a span's stored size): reads of a part or of traces, and reads of the spans of some records.
        const reads: number[] = [];
        const recordReads: number[] = [];
        const text = (spans: SpanRecord[]) =>
          spans.reduce(
            (n, x) =>
              n +
              Buffer.byteLength(x.prompt) +
              Buffer.byteLength(x.response) +
              Buffer.byteLength(JSON.stringify(x.attributes)),
            0,
          );
        const storage = s.running.storage;
        const watched = new Proxy(storage, {
          get(target, name) {
            const v = Reflect.get(target, name) as unknown;
            if (typeof v !== 'function') return v;
            return async (...args: unknown[]) => {
              const r = await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
              if (name === 'getTraces') reads.push(text([...(r as Map<string, SpanRecord[]>).values()].flat()));
              if (name === 'getTracePart') reads.push(text((r as { spans: SpanRecord[] }).spans));
              if (name === 'getSpans') recordReads.push(text(r as SpanRecord[]));
              return r;
            };
          },
        }) as typeof storage;
        const later = Date.now() + 60_000;
        const whole = await verifyWorkspace(watched, k.workspaceId, keys, later);
        expect(Math.max(...reads)).to.be.above(500_000); // by default, the whole workspace in one read
        const span = 40_200; // one big span's text
        expect(whole.problems.map((p) => [p.kind, p.traceId])).to.deep.equal([
          ['unverified_span', TRACE],
          ['unverified_span', 'forged-0'],
          ['unverified_span', 'forged-1'],
        ]);
        reads.length = 0;
        recordReads.length = 0;
        const budget = 70_000;
        expect(await verifyWorkspace(watched, k.workspaceId, keys, later, { bytes: budget })).to.deep.equal(whole);
        expect(reads.length).to.be.above(8);
        expect(Math.max(...reads)).to.be.at.most(budget + span); // the span reaching the budget ends a read
        // a record's spans come in one read (four here: over the budget alone), never two records' together
        expect(recordReads.length).to.equal(3);
        expect(Math.max(...recordReads)).to.be.at.most(4 * span);
        reads.length = 0;
        const one = await verifyTrace(watched, k.workspaceId, TRACE, keys, { bytes: budget });
        expect(one).to.deep.equal(await verifyTrace(storage, k.workspaceId, TRACE, keys));
        expect(one.problems.map((p) => p.kind)).to.deep.equal(['unverified_span']);
        expect(Math.max(...reads)).to.be.at.most(budget + span);
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
          ...emptySpan(k.workspaceId, 'native'),
          traceId: `forged-${String(i).padStart(5, '0')}`,
          spanId: 'a'.repeat(16),
          name: 'x',
          startTimeNs: '1763787000000000000',
          endTimeNs: '1763787000000000001',
          ingestedAtMs: old,
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
