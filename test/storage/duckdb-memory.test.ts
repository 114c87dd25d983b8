// Reads of the embedded store stay within DuckDB's memory limit however large the data they go over: the data is
// written with the default limit, then read by a store reopened with a small one (32 MB here, 256 MB in service).
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptySpan, type SpanRecord } from '../../collector/record.ts';
import { DuckDbStorage } from '../../storage/duckdb.ts';

const T0 = 1_763_787_000_000_000_000n;

function span(traceId: string, i: number, over: Partial<SpanRecord> = {}): SpanRecord {
  return {
    ...emptySpan('ws', 'otlp'), traceId, spanId: i.toString(16).padStart(16, '0'), name: 'chat', kind: 'llm',
    startTimeNs: String(T0 + BigInt(i) * 1000n), endTimeNs: String(T0 + BigInt(i) * 1000n + 500n), ingestedAtMs: 1, ...over,
  };
}

describe('embedded store: reads within a small memory limit', function () {
  this.timeout(120_000);
  let dir: string;
  let s: DuckDbStorage;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tracegate-duckmem-'));
    const writer = new DuckDbStorage(join(dir, 'db.duckdb'));
    await writer.init();
    // 25,000 spans of 2 KB (50 MB) in one trace: more than the reader's whole memory limit
    for (let i = 0; i < 25_000; i += 5_000) {
      await writer.insertSpans(Array.from({ length: 5_000 }, (_, j) => span('big', i + j, { prompt: randomBytes(1_500).toString('base64').slice(0, 2_000) })));
    }
    await writer.close();
    s = new DuckDbStorage(join(dir, 'db.duckdb'), { memoryLimit: '32MB' });
    await s.init();
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads a part of 6,000 spans of a trace larger than the limit (whole rows sorted by start: out of memory)', async () => {
    const first = await s.getTracePart('ws', 'big', { limit: 6_000 });
    expect([first.spans.length, first.more]).to.deep.equal([6_000, true]);
    expect(first.spans.map((x) => x.spanId)).to.deep.equal(Array.from({ length: 6_000 }, (_, i) => span('big', i).spanId));
    const last = first.spans.at(-1)!;
    const next = await s.getTracePart('ws', 'big', { limit: 6_000, after: { startNs: last.startTimeNs, spanId: last.spanId } });
    expect(next.spans[0]!.spanId).to.equal(span('big', 6_000).spanId);
    expect(next.spans.every((x) => x.prompt.length === 2_000)).to.equal(true);
  });
});
