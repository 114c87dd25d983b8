// Refused records (see test/spool/refused.test.ts) against a storage double: an outage or an overloaded server sets
// nothing aside, and a crash or restart around setting aside never loses or overwrites a refused file.
import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Segment } from '../../../spool/spool.ts';
import { Pipeline } from '../../../pipeline/pipeline.ts';
import { insertIsolating } from '../../../storage/spool-files.ts';
import { MapStorage, TestLogger, WS, removeDir, span, tempDir, testConfig, until } from '../../support/spool.ts';

const refusedFiles = async (dir: string) =>
  existsSync(join(dir, 'refused')) ? await readdir(join(dir, 'refused')) : [];

describe('refused records: outages are not refusals', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(() => removeDir(dir));

  it('storage down (ping fails): nothing is set aside, everything is stored once it returns', async () => {
    const storage = new MapStorage();
    storage.fail = true;
    const p = new Pipeline({
      config: testConfig(dir, { FLUSH_INTERVAL_MS: '10', ISOLATE_AFTER_FAILURES: '1' }),
      storage,
      logger: new TestLogger(),
    });
    await p.start();
    await Promise.all(Array.from({ length: 20 }, (_, i) => p.ingest([span(i)])));
    await until(() => storage.inserts.length >= 4, 15_000);
    expect(await refusedFiles(dir)).to.deep.equal([]);
    storage.fail = false;
    await p.flush();
    expect(await storage.countSpans(WS)).to.equal(20);
    await p.close();
  });

  it('an overloaded server failing some inserts (not a data error) never gets a good record set aside', async () => {
    const storage = new MapStorage();
    let calls = 0;
    const insert = storage.insertSpans.bind(storage);
    storage.insertSpans = async (rows) => {
      if (calls++ % 2 === 1) throw Object.assign(new Error('Too many parts (test)'), { code: '252' });
      if (rows.some((r) => r.spanId === 'bad')) throw new RangeError('startTimeNs is not a decimal uint64 (test)');
      await insert(rows);
    };
    const rows = [...Array.from({ length: 8 }, (_, i) => span(i)), { ...span(99), spanId: 'bad' }];
    let err: unknown;
    try {
      await insertIsolating(storage, rows);
    } catch (e) {
      err = e;
    }
    expect((err as { code?: string }).code).to.equal('252'); // propagated: the rows stay spooled
  });

  it('a crash after setting aside but before the segment is removed rewrites the same file, not a second one', async () => {
    const storage = new MapStorage();
    const insert = storage.insertSpans.bind(storage);
    storage.insertSpans = async (rows) => {
      if (rows.some((r) => r.spanId === 'bad')) throw new RangeError('startTimeNs is not a decimal uint64 (test)');
      await insert(rows);
    };
    const p = new Pipeline({
      config: testConfig(dir, { FLUSH_INTERVAL_MS: '10', ISOLATE_AFTER_FAILURES: '1' }),
      storage,
      logger: new TestLogger(),
    });
    const writer = p as unknown as { remove(seg: Segment): Promise<void> };
    const remove = writer.remove.bind(p);
    let removes = 0;
    writer.remove = async (seg) => {
      if (removes++ === 0) throw new Error('crash before remove (test)');
      await remove(seg);
    };
    await p.start();
    await p.ingest([span(1), { ...span(2), spanId: 'bad' }, span(3)]);
    await until(() => removes >= 2 && p.stats().pendingRows === 0, 15_000);
    const files = await refusedFiles(dir);
    expect(files).to.have.length(1);
    expect((await readFile(join(dir, 'refused', files[0]!), 'utf8')).trim().split('\n')).to.have.length(1);
    expect(await storage.countSpans(WS)).to.equal(2);
    await p.close();
  });

  it('after a restart the spool numbers segments from 1 again: a new refusal never overwrites an older file', async () => {
    const storage = new MapStorage();
    const insert = storage.insertSpans.bind(storage);
    storage.insertSpans = async (rows) => {
      if (rows.some((r) => r.spanId.startsWith('bad')))
        throw new RangeError('startTimeNs is not a decimal uint64 (test)');
      await insert(rows);
    };
    for (const run of [1, 2]) {
      const p = new Pipeline({
        config: testConfig(dir, { FLUSH_INTERVAL_MS: '10', ISOLATE_AFTER_FAILURES: '1' }),
        storage,
        logger: new TestLogger(),
      });
      await p.start();
      await p.ingest([span(run * 10), { ...span(run * 10 + 1), spanId: `bad-${run}` }]);
      await until(() => p.stats().pendingRows === 0, 15_000);
      await p.close();
    }
    const files = await refusedFiles(dir);
    expect(files).to.have.length(2);
    const texts = await Promise.all(files.map((f) => readFile(join(dir, 'refused', f), 'utf8')));
    expect(texts.join('')).to.include('bad-1').and.to.include('bad-2');
  });

  it('storage answering but refusing every insert for its own reasons: nothing is set aside', async () => {
    const storage = new MapStorage();
    let refuse = true;
    const insert = storage.insertSpans.bind(storage);
    storage.insertSpans = async (rows) => {
      if (refuse) throw new Error('Code: 252. DB::Exception: Too many parts (test)');
      await insert(rows);
    };
    const p = new Pipeline({
      config: testConfig(dir, { FLUSH_INTERVAL_MS: '10', ISOLATE_AFTER_FAILURES: '1' }),
      storage,
      logger: new TestLogger(),
    });
    await p.start();
    await Promise.all(Array.from({ length: 8 }, (_, i) => p.ingest([span(i)])));
    await until(() => p.stats().lastFlushError !== null, 15_000);
    await new Promise((r) => setTimeout(r, 300)); // several isolating attempts
    expect(await refusedFiles(dir)).to.deep.equal([]);
    refuse = false;
    await p.flush();
    expect(await storage.countSpans(WS)).to.equal(8);
    await p.close();
  });
});
