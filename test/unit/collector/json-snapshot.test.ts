import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JsonSnapshot } from '../../../platform/json-snapshot.ts';

describe('JsonSnapshot', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'snap-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const read = (p: string) => JSON.parse(readFileSync(p, 'utf8')) as { n: number };

  it('writes a change within a second, off the calling thread, and keeps the newest state', async () => {
    const path = join(dir, 'sub', 'state.json');
    let n = 1;
    const snap = new JsonSnapshot(path, () => ({ n }));
    snap.changed();
    expect(existsSync(path)).to.equal(false); // nothing written synchronously
    for (let i = 0; i < 100 && !existsSync(path); i++) await new Promise((r) => setTimeout(r, 20));
    expect(read(path)).to.deep.equal({ n: 1 });
    // A change during the next interval is written by it; flush() at once writes the newest state.
    n = 2;
    snap.changed();
    n = 3;
    await snap.flush();
    expect(read(path)).to.deep.equal({ n: 3 });
    await new Promise((r) => setTimeout(r, 1200)); // the pending timed write has nothing newer to say
    expect(read(path)).to.deep.equal({ n: 3 });
  });

  it('a write that fails is tried again at the next change or flush, not in a loop', async () => {
    writeFileSync(join(dir, 'file'), 'x');
    let calls = 0;
    const snap = new JsonSnapshot(
      join(dir, 'file', 'state.json'),
      () => {
        calls++;
        return { n: 1 };
      },
      0,
    ); // its directory cannot exist
    snap.changed();
    await new Promise((r) => setTimeout(r, 200));
    expect(calls).to.equal(1);
    snap.changed();
    await new Promise((r) => setTimeout(r, 200));
    expect(calls).to.equal(2);
  });

  it('flush() waits for a timed write under way, so an older state never lands after it', async () => {
    const path = join(dir, 'state.json');
    let n = 0;
    let writes = 0;
    const snap = new JsonSnapshot(
      path,
      () => {
        writes++;
        return { n };
      },
      0,
    ); // timed writes at once
    for (let round = 1; round <= 20; round++) {
      n = round;
      snap.changed();
      await new Promise((r) => setTimeout(r, round % 3)); // sometimes while the timed write is under way
      n = round + 1000;
      snap.changed();
      await snap.flush();
      expect(read(path), `round ${round}`).to.deep.equal({ n: round + 1000 });
    }
    expect(writes).to.be.greaterThan(20); // timed writes ran between the flushes
    await new Promise((r) => setTimeout(r, 100));
    expect(read(path)).to.deep.equal({ n: 1020 });
  });
});
