// Reads of the embedded store stay within DuckDB's memory limit however large the data they go over: the data is
// written with the default limit, then read by a store reopened with a small one (40 MB here, 256 MB in service).
// At 32 MB the part read failed now and then (2 runs in 22): DuckDB's two threads pinned 27 MB at times, then
// asked for 4 MB more. 40 MB is still less than the 50 MB trace.
import { expect } from 'chai';
import { DuckDBInstance } from '@duckdb/node-api';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptySpan, type SpanRecord } from '../../core/record.ts';
import { DuckDbStorage } from '../../storage/duckdb.ts';

const T0 = 1_763_787_000_000_000_000n;

function span(traceId: string, i: number, over: Partial<SpanRecord> = {}): SpanRecord {
  return {
    ...emptySpan('ws', 'otlp'),
    traceId,
    spanId: i.toString(16).padStart(16, '0'),
    name: 'chat',
    kind: 'llm',
    startTimeNs: String(T0 + BigInt(i) * 1000n),
    endTimeNs: String(T0 + BigInt(i) * 1000n + 500n),
    ingestedAtMs: 1,
    ...over,
  };
}

/**
 * A store written with the default limit (`fill`, then `bulk` on the closed file), then opened with a 40 MB one for
 * the tests of a describe block; removed after them.
 */
function smallMemoryStore(
  prefix: string,
  fill: (writer: DuckDbStorage) => Promise<void>,
  bulk?: (path: string) => Promise<void>,
): { s: DuckDbStorage } {
  const store = {} as { s: DuckDbStorage };
  let dir = '';
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), prefix));
    const path = join(dir, 'db.duckdb');
    const writer = new DuckDbStorage(path);
    await writer.init();
    await fill(writer);
    await writer.close();
    await bulk?.(path);
    store.s = new DuckDbStorage(path, { memoryLimit: '40MB' });
    await store.s.init();
  });
  after(async () => {
    await store.s?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

describe('embedded store: reads within a small memory limit', function () {
  this.timeout(120_000);
  const store = smallMemoryStore(
    'tracegate-duckmem-',
    async (writer) => {
      // 25,000 spans of 2 KB (50 MB) in one trace: more than the reader's whole memory limit
      for (let i = 0; i < 25_000; i += 5_000) {
        await writer.insertSpans(
          Array.from({ length: 5_000 }, (_, j) =>
            span('big', i + j, { prompt: randomBytes(1_500).toString('base64').slice(0, 2_000) }),
          ),
        );
      }
    },
    async (path) => {
      // 500,000 model calls, two models in one hour, durations 0 to 249,999 ms in each (in bulk: the appender is slow)
      const db = await DuckDBInstance.create(path);
      const c = await db.connect();
      await c.run(`INSERT INTO spans SELECT 'ws-usage', 't' || (i // 100), 's' || i, '', 'chat', 'llm', 'otlp', ${T0} + i, ${T0} + i, i // 2,
      'completed', '', 'm' || (i % 2), '', '', '', 10, 2, 12, 0.001, '', '', '', '', false, false, '{}', '{}', '[]', 1 FROM range(500000) r(i)`);
      c.closeSync();
      db.closeSync();
    },
  );

  it('reads a part of 6,000 spans of a trace larger than the limit (whole rows sorted by start: out of memory)', async () => {
    const first = await store.s.getTracePart('ws', 'big', { limit: 6_000 });
    expect([first.spans.length, first.more]).to.deep.equal([6_000, true]);
    expect(first.spans.map((x) => x.spanId)).to.deep.equal(
      Array.from({ length: 6_000 }, (_, i) => span('big', i).spanId),
    );
    const last = first.spans.at(-1)!;
    const next = await store.s.getTracePart('ws', 'big', {
      limit: 6_000,
      after: { startNs: last.startTimeNs, spanId: last.spanId },
    });
    expect(next.spans[0]!.spanId).to.equal(span('big', 6_000).spanId);
    expect(next.spans.every((x) => x.prompt.length === 2_000)).to.equal(true);
    // by bytes: the sizes of only the part's rows are read (not the 50 MB trace's)
    const bounded = await store.s.getTracePart('ws', 'big', {
      limit: 6_000,
      maxBytes: 1_000_000,
      after: { startNs: last.startTimeNs, spanId: last.spanId },
    });
    expect([bounded.spans.length, bounded.more, bounded.spans[0]!.spanId]).to.deep.equal([
      498,
      true,
      span('big', 6_000).spanId,
    ]); // 2,010 bytes each: the 498th reaches the budget
  });

  it('rolls 500,000 model calls up into usage, quantiles from a sample of about 8,192 per group (every duration held: out of memory)', async () => {
    const rows = await store.s.usage('ws-usage', { groupBy: 'model', bucket: 'hour' });
    expect(rows.map((r) => [r.key, r.requests, r.totalTokens])).to.deep.equal([
      ['m0', 250_000, 3_000_000],
      ['m1', 250_000, 3_000_000],
    ]);
    const n = 250_000;
    for (const r of rows) {
      for (const [field, q] of [
        ['p50Ms', 0.5],
        ['p95Ms', 0.95],
        ['p99Ms', 0.99],
      ] as const) {
        // the documented tolerance of a uniform sample of 8,192: 5 standard errors of the rank
        expect(Math.abs(r[field] / (n - 1) - q), `${r.key} ${field}`).to.be.at.most(
          5 * Math.sqrt((q * (1 - q)) / 8192),
        );
      }
    }
    expect(await store.s.usage('ws-usage', { groupBy: 'model', bucket: 'hour' })).to.deep.equal(rows); // the same sample each time
  });
});

describe('embedded store: whole rows of large spans within a small memory limit', function () {
  this.timeout(120_000);
  const store = smallMemoryStore('tracegate-duckwide-', async (writer) => {
    // 1,000 spans of 100 KB (100 MB) in 100 traces of ten
    for (let i = 0; i < 1_000; i += 100) {
      await writer.insertSpans(
        Array.from({ length: 100 }, (_, j) =>
          span(`wide-${Math.floor((i + j) / 10)}`, i + j, { prompt: randomBytes(75_000).toString('base64') }),
        ),
      );
    }
  });

  it('reads several traces, and spans by id, of a store of 100 KB spans (as IN ($t0, $t1, …): out of memory up to a 100 MB limit)', async () => {
    const ids = [7, 3, 12, 40, 41, 99].map((t) => `wide-${t}`);
    const got = await store.s.getTraces('ws', ids);
    expect([...got.keys()].sort()).to.deep.equal([...ids].sort());
    for (const [t, spans] of got) {
      const n = Number(t.slice(5));
      expect(
        spans.map((x) => x.spanId),
        t,
      ).to.deep.equal(Array.from({ length: 10 }, (_, i) => span(t, n * 10 + i).spanId)); // by start
      expect(spans.every((x) => x.prompt.length === 100_000)).to.equal(true);
    }
    const wanted = [95, 91, 99, 90].map((i) => span('wide-9', i).spanId);
    expect((await store.s.getSpans('ws', 'wide-9', wanted)).map((x) => x.spanId)).to.deep.equal([...wanted].sort());
  });
});

describe('embedded store: whole rows read by the process that wrote them, within a small memory limit', function () {
  this.timeout(120_000);
  // Written and read by one store at 40 MB, not reopened: there the semi-join's scan holds whole vectors (2,048 rows) of
  // the text columns, 40 MB of 20 KB spans, and reads of a trace ran out of memory (30 of 36 in a trial).
  let dir = '';
  let s: DuckDbStorage;
  const prompt = (i: number) => `${i}:${randomBytes(15_000).toString('base64')}`;
  const prompts = new Map<number, string>();
  const OTHER_TEXT = 'chat{}{}[]'.length; // the span's name, attributes, resource attributes and events as stored
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tracegate-ducklive-'));
    s = new DuckDbStorage(join(dir, 'db.duckdb'), { memoryLimit: '40MB' });
    await s.init();
    // 2,500 spans of 20 KB (50 MB) in 250 traces of ten, in batches small enough for the insert to fit 40 MB
    for (let i = 0; i < 2_500; i += 100) {
      await s.insertSpans(
        Array.from({ length: 100 }, (_, j) => {
          const n = i + j;
          prompts.set(n, prompt(n));
          return span(`live-${Math.floor(n / 10)}`, n, { prompt: prompts.get(n)! });
        }),
      );
    }
  });
  after(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const expectTrace = (t: number, spans: SpanRecord[]) => {
    expect(
      spans.map((x) => x.spanId),
      `live-${t}`,
    ).to.deep.equal(Array.from({ length: 10 }, (_, i) => span('', t * 10 + i).spanId));
    expect(
      spans.every((x, i) => x.prompt === prompts.get(t * 10 + i)),
      `live-${t} prompts`,
    ).to.equal(true);
  };

  it('reads traces one by one and several at once, their sizes, a part of one (by count and by bytes), and spans by id', async () => {
    for (const t of [0, 37, 120, 204, 249]) expectTrace(t, await s.getTrace('ws', `live-${t}`));
    const ids = [3, 99, 150, 201, 248];
    const got = await s.getTraces(
      'ws',
      ids.map((t) => `live-${t}`),
    );
    expect([...got.keys()].sort()).to.deep.equal(ids.map((t) => `live-${t}`).sort());
    for (const t of ids) expectTrace(t, got.get(`live-${t}`)!);
    const sizes = await s.traceSizes('ws', ['live-3', 'live-204']);
    expect(sizes.get('live-204')).to.deep.equal({
      spans: 10,
      bytes: [...Array(10).keys()].reduce((n, i) => n + prompts.get(2_040 + i)!.length + OTHER_TEXT, 0),
    });
    // spans are taken until the budget is reached (DuckDB read the sizes beside ORDER BY … LIMIT: out of memory)
    const bounded = await s.getTracePart('ws', 'live-206', { limit: 10, maxBytes: 50_000 });
    expect([bounded.spans.map((x) => parseInt(x.spanId, 16)), bounded.more]).to.deep.equal([
      [2_060, 2_061, 2_062],
      true,
    ]);
    expect(await s.spanSizes('ws', 'live-206', [span('', 2_061).spanId])).to.deep.equal(
      new Map([[span('', 2_061).spanId, prompts.get(2_061)!.length + OTHER_TEXT]]),
    );
    const part = await s.getTracePart('ws', 'live-205', { limit: 4 });
    expect([part.spans.map((x) => parseInt(x.spanId, 16)), part.more]).to.deep.equal([
      [2_050, 2_051, 2_052, 2_053],
      true,
    ]);
    expect(part.spans.every((x) => x.prompt === prompts.get(parseInt(x.spanId, 16)))).to.equal(true);
    const wanted = [2_053, 2_051, 2_059].map((i) => span('', i).spanId);
    const spans = await s.getSpans('ws', 'live-205', wanted);
    expect(spans.map((x) => x.spanId)).to.deep.equal([...wanted].sort());
    expect(spans.map((x) => x.prompt)).to.deep.equal([...wanted].sort().map((id) => prompts.get(parseInt(id, 16))));
    expect(s.outOfMemoryRetries, 'reads taken again by rowid').to.be.greaterThan(0); // the state this test is about
  });
});
