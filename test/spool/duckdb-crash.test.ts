// The writer against the real DuckDB storage when the process writing to it is SIGKILLed (a child process): every
// acknowledged record is stored exactly once after replay. The in-process cases: test/unit/spool/duckdb.test.ts.
import { expect } from 'chai';
import { join } from 'node:path';
import { Pipeline } from '../../pipeline/pipeline.ts';
import type { DuckDbStorage } from '../../storage/duckdb.ts';
import { TestLogger, WS, crashChild, openDuckDb, removeDir, tempDir, testConfig } from '../support/spool.ts';

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
