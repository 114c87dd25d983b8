// A record storage refuses must not hold up everyone else's data forever (found by fuzzing: one batch that
// storage always refused was retried forever). After ISOLATE_AFTER_FAILURES failed flushes the writer finds
// the refused records and sets them aside in DATA_DIR/refused; an outage or an overloaded server sets nothing aside.
// The cases that need no storage but a double: test/unit/spool/refused.test.ts.
import { expect } from 'chai';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Pipeline } from '../../pipeline/pipeline.ts';
import { CONTRACT_BACKENDS, type StoreHarness } from '../storage/harness.ts';
import { TestLogger, WS, openDuckDb, removeDir, span, tempDir, testConfig, until } from '../support/spool.ts';
import { cli } from '../support/server.ts';
import { lockDataDir } from '../../platform/data-dir-lock.ts';
import { requeueRefused } from '../../pipeline/refused.ts';
import { decodeFrames } from '../../spool/spool.ts';

const refusedFiles = async (dir: string) =>
  existsSync(join(dir, 'refused')) ? await readdir(join(dir, 'refused')) : [];

for (const [name, factory] of CONTRACT_BACKENDS) {
  describe(`refused records set aside (${name})`, function () {
    this.timeout(120_000);
    let h: StoreHarness;
    let dir: string;
    before(async () => {
      h = await factory();
      dir = await tempDir();
    });
    after(async () => {
      await h.destroy();
      await removeDir(dir);
    });

    it('stores the rest, writes the refused record with its reason to DATA_DIR/refused, and carries on', async () => {
      const refusedRows: number[] = [];
      const p = new Pipeline({
        config: testConfig(dir, { FLUSH_INTERVAL_MS: '20', ISOLATE_AFTER_FAILURES: '2' }),
        storage: h.storage,
        logger: new TestLogger(),
        onRefused: (n) => refusedRows.push(n),
      });
      await p.start();
      try {
        const bad = { ...span(1000), spanId: 'bad-span', startTimeNs: 'soon' }; // bypasses the mappers' checks
        await Promise.all([
          ...Array.from({ length: 30 }, (_, i) => p.ingest([span(i)])),
          p.ingest([span(30), bad, span(31)]),
        ]);
        await until(async () => refusedRows.length === 1 && (await h.storage.countSpans(WS)) === 32, 30_000);
        const [file] = await refusedFiles(dir);
        const lines = (await readFile(join(dir, 'refused', file!), 'utf8'))
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l));
        expect(lines).to.have.length(1);
        expect(lines[0].record).to.include({ spanId: 'bad-span', startTimeNs: 'soon' });
        expect(lines[0].error).to.match(/startTimeNs/);
        expect(refusedRows).to.deep.equal([1]);
        await until(() => p.stats().pendingRows === 0 && p.stats().storageHealthy);
        await p.ingest([span(40)]); // the writer carries on
        await p.flush();
        expect(await h.storage.countSpans(WS)).to.equal(33);
      } finally {
        await p.close();
      }
    });
  });
}

describe('tracegate refused list | requeue', function () {
  this.timeout(120_000);
  it('lists refused records, refuses to requeue while the collector runs, then requeues them for the next start to replay', async () => {
    const dir = await tempDir();
    const storage = await openDuckDb(join(dir, 'db'));
    try {
      const config = testConfig(dir, { FLUSH_INTERVAL_MS: '20', ISOLATE_AFTER_FAILURES: '1' });
      const first = new Pipeline({ config, storage, logger: new TestLogger() });
      await first.start();
      await first.ingest([span(1), { ...span(2), spanId: 'bad', startTimeNs: 'soon' }, span(3)]);
      await until(() => first.stats().pendingRows === 0, 15_000);
      await first.close();
      expect(await storage.countSpans(WS)).to.equal(2);

      const env = { TRACEGATE_DATA_DIR: dir };
      const list = await cli(null, ['refused', 'list', '--json'], env);
      expect(list.code, list.stderr).to.equal(0);
      const files = JSON.parse(list.stdout) as Array<{ name: string; records: number; firstError: string }>;
      expect(files).to.have.length(1);
      expect(files[0]).to.include({ records: 1 });
      expect(files[0]!.firstError).to.match(/startTimeNs/);

      const unlock = await lockDataDir(dir); // a collector running on this DATA_DIR
      const busy = await cli(null, ['refused', 'requeue'], env);
      unlock();
      expect(busy.code).to.equal(1);
      expect(busy.stderr).to.match(/Stop the collector first/);

      // The cause fixed (here: the record itself), requeue and start again: the record is replayed.
      const path = join(dir, 'refused', files[0]!.name);
      await writeFile(path, (await readFile(path, 'utf8')).replace('"soon"', '"1000"'));
      const requeue = await cli(null, ['refused', 'requeue'], env);
      expect(requeue.code, requeue.stderr).to.equal(0);
      expect(requeue.stdout).to.match(/requeued 1 records from 1 files/);
      expect(await refusedFiles(dir)).to.deep.equal([]);
      const second = new Pipeline({ config, storage, logger: new TestLogger() });
      await second.start();
      await second.flush();
      await second.close();
      expect(await storage.countSpans(WS)).to.equal(3);
    } finally {
      await storage.close();
      await removeDir(dir);
    }
  });

  it('reads refused files a line at a time: lists 80 MB of records with a 48 MB heap; requeues them in segments of a bounded size', async function () {
    this.timeout(120_000);
    const dir = await tempDir();
    try {
      await mkdir(join(dir, 'refused'));
      const out = createWriteStream(join(dir, 'refused', '000000000001-big.ndjson'));
      for (let i = 0; i < 80_000; i++) {
        if (
          !out.write(JSON.stringify({ atMs: 1, error: i ? 'later' : 'the first error', record: span(i, 1024) }) + '\n')
        )
          await new Promise<void>((r) => out.once('drain', () => r()));
      }
      await new Promise<void>((r) => out.end(() => r()));
      // read whole (readFile, then split), the file alone took more than the heap: 600 MB could not be read at all
      const list = await cli(null, ['refused', 'list', '--json'], {
        TRACEGATE_DATA_DIR: dir,
        NODE_OPTIONS: '--max-old-space-size=48',
      });
      expect(list.code, list.stderr.slice(0, 500)).to.equal(0);
      expect(JSON.parse(list.stdout)).to.deep.equal([
        { name: '000000000001-big.ndjson', records: 80_000, firstError: 'the first error' },
      ]);

      expect(await requeueRefused(dir, [], 8 * 1024 * 1024)).to.deep.equal({ files: 1, records: 80_000 });
      const segments = (await readdir(join(dir, 'spool'))).sort();
      expect(segments.length).to.be.greaterThan(4);
      const ids: string[] = [];
      for (const seg of segments) {
        const bytes = await readFile(join(dir, 'spool', seg));
        expect(bytes.length).to.be.below(9 * 1024 * 1024);
        for (const r of decodeFrames(bytes).records) ids.push((r as { spanId: string }).spanId);
      }
      expect(ids).to.deep.equal(Array.from({ length: 80_000 }, (_, i) => `span-${i}`));
      expect(await refusedFiles(dir)).to.deep.equal([]);
    } finally {
      await removeDir(dir);
    }
  });
});
