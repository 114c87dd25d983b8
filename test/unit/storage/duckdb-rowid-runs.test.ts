import { expect } from 'chai';
import { rowidRuns } from '../../../storage/duckdb.ts';

describe('embedded store: rowid runs of the out-of-memory fallback', () => {
  const cost = (run: bigint[]) => Number(run.at(-1)! - run[0]! + 1n) * run.length;

  it('keeps nearby rowids together and sorted, in one run when they fit', () => {
    expect(rowidRuns([12n, 10n, 11n, 15n])).to.deep.equal([[10n, 11n, 12n, 15n]]);
    expect(rowidRuns([])).to.deep.equal([]);
    expect(rowidRuns([7n])).to.deep.equal([[7n]]);
  });

  it('cuts scattered rowids into runs each within the cost, together all of them in order', () => {
    const ids = Array.from({ length: 5_000 }, (_, i) => BigInt(i * 100 + (i % 7)));
    const runs = rowidRuns([...ids].reverse(), 1_000_000);
    expect(runs.flat()).to.deep.equal(ids);
    expect(runs.length).to.be.within(20, 100); // 100 rows apart: runs of ~100 ids over ~10,000 rows
    for (const run of runs) expect(cost(run)).to.be.at.most(1_000_000);
  });

  it('gives a rowid far from the others a run of its own', () => {
    expect(rowidRuns([1n, 2n, 3n, 10_000_000n], 1_000)).to.deep.equal([[1n, 2n, 3n], [10_000_000n]]);
  });
});
