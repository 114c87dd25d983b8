// The key writer cases against the real DuckDB storage (storage/duckdb.ts).
// A child process SIGKILLed while flushing into it: test/spool/duckdb-crash.test.ts.
import { expect } from 'chai';
import { WS, duckDbPipelines, span } from '../../support/spool.ts';

describe('pipeline on DuckDbStorage', function () {
  this.timeout(120_000);
  const f = duckDbPipelines();
  const pipeline = f.pipeline;

  it('one insertSpans per flush for many concurrent ingests; readable after flush()', async () => {
    const calls: number[] = [];
    const insert = f.storage.insertSpans.bind(f.storage);
    f.storage.insertSpans = async (rows) => {
      calls.push(rows.length);
      await insert(rows);
    };
    const p = await pipeline(f.storage);
    await Promise.all(Array.from({ length: 500 }, (_, i) => p.ingest([span(i)])));
    await p.flush();
    expect(calls).to.deep.equal([500]);
    expect(await f.storage.countSpans(WS)).to.equal(500);
    expect((await f.storage.getTrace(WS, 'trace-7')).map((r) => r.spanId).sort()).to.deep.equal(
      Array.from({ length: 10 }, (_, i) => `span-${70 + i}`).sort(),
    );
    await p.close();
  });

  it('replay after an abrupt end re-inserts already-flushed rows without duplicates', async () => {
    const first = await pipeline(f.storage);
    await Promise.all(Array.from({ length: 100 }, (_, i) => first.ingest([span(i)])));
    await first.flush();
    await Promise.all(Array.from({ length: 50 }, (_, i) => first.ingest([span(100 + i)])));
    // Abandon `first` and replay its whole history again on top, as a crash between insert and delete would.
    const second = await pipeline(f.storage);
    await second.ingest(Array.from({ length: 100 }, (_, i) => span(i)));
    await second.flush();
    expect(await f.storage.countSpans(WS)).to.equal(150);
    expect(await f.storage.getTrace(WS, 'trace-3')).to.have.length(10);
    await second.close();
  });

  it('close() flushes everything acknowledged', async () => {
    const p = await pipeline(f.storage);
    await Promise.all(Array.from({ length: 64 }, (_, i) => p.ingest([span(i)])));
    await p.close();
    expect(await f.storage.countSpans(WS)).to.equal(64);
  });
});
