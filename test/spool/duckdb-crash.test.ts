// The writer against the real DuckDB storage when the process writing to it is SIGKILLed (a child process): every
// acknowledged record is stored exactly once after replay. The in-process cases: test/unit/spool/duckdb.test.ts.
import { expect } from 'chai';
import { join } from 'node:path';
import { WS, crashChild, duckDbPipelines, removeDir } from '../support/spool.ts';

describe('pipeline on DuckDbStorage', function () {
  this.timeout(120_000);
  const f = duckDbPipelines();
  const pipeline = f.pipeline;

  it('SIGKILLed child flushing into DuckDB: every acked record stored exactly once after replay', async () => {
    await f.storage.close(); // the child owns the database file while it runs
    for (const killAfter of [400, 2500]) {
      await removeDir(join(f.dir, 'collector'));
      const acked = await crashChild(join(f.dir, 'collector'), `duckdb:${join(f.dir, 'db')}`, 3000, killAfter);
      f.storage = await f.openStorage();
      const p = await pipeline(f.storage);
      await p.flush();
      await p.close();
      const stored = await f.storage.countSpans(WS);
      expect(stored).to.be.at.least(acked.size).and.at.most(3000);
      // Per trace: every acked span present, none twice.
      const traces = new Map<string, number[]>();
      for (const i of acked)
        traces.set(`trace-${Math.floor(i / 10)}`, [...(traces.get(`trace-${Math.floor(i / 10)}`) ?? []), i]);
      for (const [traceId, ids] of traces) {
        const got = (await f.storage.getTrace(WS, traceId)).map((s) => s.spanId);
        expect(new Set(got).size, traceId).to.equal(got.length);
        for (const i of ids) expect(got, traceId).to.include(`span-${i}`);
      }
      await f.storage.close();
    }
    f.storage = await f.openStorage();
  });
});
