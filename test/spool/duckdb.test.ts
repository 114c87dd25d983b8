// The key writer cases against the real DuckDB storage (storage/duckdb.ts).
import { expect } from 'chai';
import { join } from 'node:path';
import { Pipeline } from '../../pipeline/pipeline.ts';
import type { DuckDbStorage } from '../../storage/duckdb.ts';
import { TestLogger, WS, crashChild, openDuckDb, removeDir, span, tempDir, testConfig } from './helpers.ts';

describe('pipeline on DuckDbStorage', function () {
  this.timeout(120_000);
  let dir: string;
  let storage: DuckDbStorage;

  const openStorage = () => openDuckDb(join(dir, 'db'));
  const pipeline = async (s: DuckDbStorage, over = {}) => {
    const p = new Pipeline({ config: testConfig(join(dir, 'collector'), over), storage: s, logger: new TestLogger() });
    await p.start();
    return p;
  };

  beforeEach(async () => {
    dir = await tempDir();
    storage = await openStorage();
  });
  afterEach(async () => {
    await storage.close();
    await removeDir(dir);
  });

  it('one insertSpans per flush for many concurrent ingests; readable after flush()', async () => {
    const calls: number[] = [];
    const insert = storage.insertSpans.bind(storage);
    storage.insertSpans = async (rows) => {
      calls.push(rows.length);
      await insert(rows);
    };
    const p = await pipeline(storage);
    await Promise.all(Array.from({ length: 500 }, (_, i) => p.ingest([span(i)])));
    await p.flush();
    expect(calls).to.deep.equal([500]);
    expect(await storage.countSpans(WS)).to.equal(500);
    expect((await storage.getTrace(WS, 'trace-7')).map((r) => r.spanId).sort()).to.deep.equal(
      Array.from({ length: 10 }, (_, i) => `span-${70 + i}`).sort(),
    );
    await p.close();
  });

  it('replay after an abrupt end re-inserts already-flushed rows without duplicates', async () => {
    const first = await pipeline(storage);
    await Promise.all(Array.from({ length: 100 }, (_, i) => first.ingest([span(i)])));
    await first.flush();
    await Promise.all(Array.from({ length: 50 }, (_, i) => first.ingest([span(100 + i)])));
    // Abandon `first` and replay its whole history again on top, as a crash between insert and delete would.
    const second = await pipeline(storage);
    await second.ingest(Array.from({ length: 100 }, (_, i) => span(i)));
    await second.flush();
    expect(await storage.countSpans(WS)).to.equal(150);
    expect(await storage.getTrace(WS, 'trace-3')).to.have.length(10);
    await second.close();
  });

  it('close() flushes everything acknowledged', async () => {
    const p = await pipeline(storage);
    await Promise.all(Array.from({ length: 64 }, (_, i) => p.ingest([span(i)])));
    await p.close();
    expect(await storage.countSpans(WS)).to.equal(64);
  });

  it('SIGKILLed child flushing into DuckDB: every acked record stored exactly once after replay', async () => {
    await storage.close(); // the child owns the database file while it runs
    for (const killAfter of [400, 2500]) {
      await removeDir(join(dir, 'collector'));
      const acked = await crashChild(join(dir, 'collector'), `duckdb:${join(dir, 'db')}`, 3000, killAfter);
      storage = await openStorage();
      const p = await pipeline(storage);
      await p.flush();
      await p.close();
      const stored = await storage.countSpans(WS);
      expect(stored).to.be.at.least(acked.size).and.at.most(3000);
      // Per trace: every acked span present, none twice.
      const traces = new Map<string, number[]>();
      for (const i of acked)
        traces.set(`trace-${Math.floor(i / 10)}`, [...(traces.get(`trace-${Math.floor(i / 10)}`) ?? []), i]);
      for (const [traceId, ids] of traces) {
        const got = (await storage.getTrace(WS, traceId)).map((s) => s.spanId);
        expect(new Set(got).size, traceId).to.equal(got.length);
        for (const i of ids) expect(got, traceId).to.include(`span-${i}`);
      }
      await storage.close();
    }
    storage = await openStorage();
  });
});
