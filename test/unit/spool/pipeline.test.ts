// The writer: durable ingest, batched flushes, replay, outages, backpressure, shutdown.
// Storage here is the MapStorage test double; duckdb.test.ts runs the key cases on DuckDB.
import { headersOf, statusOf } from '../../../collector/http/errors.ts';
import { expect } from 'chai';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { BackpressureError } from '../../../core/errors.ts';
import { Pipeline, type PipelineOptions, type Processor } from '../../../pipeline/pipeline.ts';
import type { Config } from '../../../config/index.ts';
import { MapStorage, TestLogger, WS, removeDir, span, tempDir, testConfig, until } from '../../support/spool.ts';

describe('pipeline (writer + spool)', () => {
  let dir: string;
  let storage: MapStorage;
  let log: TestLogger;
  const open: Pipeline[] = [];

  async function pipeline(over: Partial<Record<keyof Config, string>> = {}, extra: Partial<PipelineOptions> = {}) {
    const p = new Pipeline({ config: testConfig(dir, over), storage, logger: log, ...extra });
    await p.start();
    open.push(p);
    return p;
  }
  const segmentFiles = async () => (await readdir(join(dir, 'spool'))).filter((n) => n.endsWith('.seg'));

  beforeEach(async () => {
    dir = await tempDir();
    storage = new MapStorage();
    log = new TestLogger();
  });
  afterEach(async () => {
    storage.fail = false;
    storage.hang = false;
    for (const p of open.splice(0)) await p.close();
    await removeDir(dir);
  });

  it('acknowledges after the spool write and flushes many ingests in ONE insert', async () => {
    const p = await pipeline();
    const results = await Promise.all(Array.from({ length: 300 }, (_, i) => p.ingest([span(i)])));
    expect(results.every((r) => r.accepted === 1)).to.equal(true);
    expect(storage.inserts).to.deep.equal([]); // nothing reaches storage per request
    expect(p.stats().pendingRows).to.equal(300);
    await p.flush();
    expect(storage.inserts).to.deep.equal([300]);
    expect(await storage.countSpans(WS)).to.equal(300);
    expect(await segmentFiles()).to.deep.equal([]); // flushed segments are deleted
    const s = p.stats();
    expect(s).to.include({
      pendingRows: 0,
      spoolBytes: 0,
      lastFlushRows: 300,
      storageHealthy: true,
      flushedTotal: 300,
      lastFlushError: null,
    });
  });

  it('flushes on the timer', async () => {
    const flushes: number[] = [];
    const p = await pipeline({ FLUSH_INTERVAL_MS: '30' }, { onFlush: (rows) => flushes.push(rows) });
    await Promise.all([p.ingest([span(1)]), p.ingest([span(2), span(3)])]);
    await until(() => storage.spans.size === 3);
    expect(flushes).to.deep.equal([3]);
  });

  it('seals early when FLUSH_MAX_ROWS rows are buffered and splits bigger segments', async () => {
    const p = await pipeline({ FLUSH_MAX_ROWS: '100' });
    await p.ingest(Array.from({ length: 250 }, (_, i) => span(i))); // one frame, one segment of 250
    await p.flush();
    expect(storage.inserts).to.deep.equal([100, 100, 50]);
    expect(storage.spans.size).to.equal(250);
  });

  it('rotates early on big segments but still sends them in one insert at the next flush', async () => {
    const p = await pipeline({}, { maxBatchBytes: 400 * 1024 }); // rotate at ~100 KiB
    for (let i = 0; i < 300; i++) await p.ingest([span(i)]);
    await until(() => p.sealedSegments().length >= 2);
    expect(storage.inserts).to.deep.equal([]);
    await p.flush();
    expect(storage.inserts).to.deep.equal([300]);
  });

  it('runs processors before the spool, so replaced text never reaches disk', async () => {
    const redact: Processor = (b) => ({ ...b, spans: b.spans.map((r) => ({ ...r, prompt: '[redacted]' })) });
    const drop: Processor = async (b) => ({ ...b, spans: b.spans.filter((r) => r.spanId !== 'span-2') });
    const p = await pipeline({}, { processors: [redact, drop] });
    const secret = span(1);
    secret.prompt = 'my secret prompt';
    expect(await p.ingest([secret, span(2)])).to.deep.equal({ accepted: 1 });
    const [file] = await segmentFiles();
    const bytes = await readFile(join(dir, 'spool', file!), 'utf8');
    expect(bytes).to.not.include('my secret prompt');
    expect(bytes).to.include('[redacted]');
    await p.flush();
    expect([...storage.spans.values()].map((r) => r.prompt)).to.deep.equal(['[redacted]']);
  });

  it('replays records left by a process that ended without flushing, exactly once', async () => {
    const first = new Pipeline({ config: testConfig(dir), storage, logger: log });
    await first.start();
    await Promise.all(Array.from({ length: 120 }, (_, i) => first.ingest([span(i)])));
    await first.flush(); // some rows already reached storage…
    await Promise.all(Array.from({ length: 80 }, (_, i) => first.ingest([span(120 + i)])));
    // …the rest only in the spool: abandon `first` (no close), as if the process died.

    const second = await pipeline();
    expect(second.stats().pendingRows).to.equal(80);
    await second.flush();
    expect(storage.spans.size).to.equal(200);
    expect([...storage.deliveries.values()].every((n) => n === 1)).to.equal(true);
  });

  it('replays in the background when storage is down at start, without blocking start()', async () => {
    const first = new Pipeline({ config: testConfig(dir), storage, logger: log });
    await first.start();
    await first.ingest([span(1), span(2)]);
    storage.fail = true;
    const second = await pipeline({ FLUSH_INTERVAL_MS: '20' });
    expect(second.stats().storageHealthy).to.equal(false);
    await until(() => storage.inserts.length > 0); // it tried
    storage.fail = false;
    await until(() => storage.spans.size === 2);
    await until(() => second.stats().storageHealthy);
  });

  it('keeps accepting into the spool while storage is down and flushes in order once it recovers', async () => {
    const inserted: string[] = [];
    const orig = storage.insertSpans.bind(storage);
    storage.insertSpans = async (rows) => {
      await orig(rows);
      for (const r of rows) inserted.push(r.spanId);
    };
    const p = await pipeline();
    storage.fail = true;
    for (let batch = 0; batch < 3; batch++) {
      await Promise.all(Array.from({ length: 10 }, (_, i) => p.ingest([span(batch * 10 + i)])));
      let err: unknown;
      await p.flush().catch((e: unknown) => {
        err = e;
      });
      expect(err).to.be.instanceOf(Error);
    }
    const s = p.stats();
    expect(s.storageHealthy).to.equal(false);
    expect(s.lastFlushError).to.match(/unreachable/);
    expect(s.pendingRows).to.equal(30);
    expect(s.spoolSegments).to.equal(3);
    expect(await segmentFiles()).to.have.length(3);

    storage.fail = false;
    await p.flush();
    expect(storage.spans.size).to.equal(30);
    expect(storage.inserts.at(-1)).to.equal(30); // the backlog goes out as one large insert
    expect(inserted).to.deep.equal(Array.from({ length: 30 }, (_, i) => `span-${i}`));
    expect(p.stats()).to.include({ storageHealthy: true, pendingRows: 0, lastFlushError: null });
  });

  it('writes the requests of one turn as one durable write (group commit), each answered after it', async () => {
    const p = await pipeline();
    const results = await Promise.all(Array.from({ length: 500 }, (_, i) => p.ingest([span(i)])));
    expect(results.every((r) => r.accepted === 1)).to.equal(true);
    const s = p.stats();
    expect(s.spoolAppends).to.equal(500);
    expect(s.spoolSyncs).to.be.at.most(2);
    expect(s.pendingRows).to.equal(500);
    // A request made after an answer is a write of its own: every answer came after the write that holds it.
    for (let i = 0; i < 3; i++) await p.ingest([span(1000 + i)]);
    expect(p.stats().spoolSyncs).to.equal(s.spoolSyncs + 3);
  });

  it('hands storage at most maxBatchBytes of segments at a time, oldest first', async () => {
    const p = await pipeline({}, { maxBatchBytes: 64 * 1024 });
    storage.fail = true;
    for (let batch = 0; batch < 4; batch++) {
      await p.ingest(Array.from({ length: 10 }, (_, i) => span(batch * 10 + i, 4096))); // ~40 KiB a segment
      await p.flush().catch(() => {});
    }
    expect(p.sealedSegments()).to.have.length(4);
    storage.fail = false;
    const before = storage.inserts.length;
    await p.flush();
    expect(storage.inserts.slice(before)).to.deep.equal([10, 10, 10, 10]);
    expect(storage.spans.size).to.equal(40);
    expect(storage.spans.get(`${WS}/trace-3/span-39`)?.prompt).to.equal(span(39, 4096).prompt);
  });

  it('answers BackpressureError (503 + Retry-After) when the spool is over its bound, and recovers', async () => {
    const p = await pipeline({ SPOOL_MAX_BYTES: String(1024 * 1024) });
    storage.fail = true;
    let acked = 0;
    let refused: unknown;
    for (let i = 0; i < 5000 && !refused; i++) {
      try {
        acked += (await p.ingest([span(i, 4096)])).accepted;
      } catch (e) {
        refused = e;
      }
    }
    expect(refused).to.be.instanceOf(BackpressureError);
    expect(statusOf(refused as BackpressureError)).to.equal(503);
    expect(headersOf(refused as BackpressureError)).to.have.property('Retry-After');
    expect(acked).to.be.within(200, 300); // ~1 MiB of ~4 KiB records
    expect(p.stats().spoolBytes).to.be.at.least(1024 * 1024);

    storage.fail = false;
    await p.flush();
    expect(storage.spans.size).to.equal(acked); // nothing acknowledged was lost
    expect((await p.ingest([span(999_999)])).accepted).to.equal(1);
  });

  it('rejects with 503 when the spool cannot be written', async () => {
    const p = await pipeline();
    await p.ingest([span(1)]);
    await p.flush();
    await rm(join(dir, 'spool'), { recursive: true });
    let err: unknown;
    await p.ingest([span(2)]).catch((e: unknown) => {
      err = e;
    });
    expect(err).to.be.instanceOf(BackpressureError);
    expect(p.stats().pendingRows).to.equal(0);
  });

  it('close() stops accepting and flushes what was acknowledged', async () => {
    const p = new Pipeline({ config: testConfig(dir), storage, logger: log });
    await p.start();
    await Promise.all(Array.from({ length: 50 }, (_, i) => p.ingest([span(i)])));
    await p.close();
    expect(storage.spans.size).to.equal(50);
    expect(await segmentFiles()).to.deep.equal([]);
    let err: unknown;
    await p.ingest([span(99)]).catch((e: unknown) => {
      err = e;
    });
    expect(err).to.be.instanceOf(BackpressureError);
  });

  it('close() gives up after its timeout when storage hangs; the rows replay on the next start', async () => {
    const p = new Pipeline({ config: testConfig(dir), storage, logger: log, closeTimeoutMs: 200 });
    await p.start();
    await p.ingest([span(1), span(2)]);
    storage.hang = true;
    const t0 = Date.now();
    await p.close();
    expect(Date.now() - t0).to.be.below(2000);
    expect(await segmentFiles()).to.have.length(1);

    storage.hang = false;
    const again = await pipeline();
    await again.flush();
    expect(storage.spans.size).to.equal(2);
  });

  it('never runs two flushes at once', async () => {
    let running = 0;
    let maxRunning = 0;
    const orig = storage.insertSpans.bind(storage);
    storage.insertSpans = async (rows) => {
      maxRunning = Math.max(maxRunning, ++running);
      await new Promise((r) => setTimeout(r, 20));
      try {
        await orig(rows);
      } finally {
        running--;
      }
    };
    const p = await pipeline({ FLUSH_INTERVAL_MS: '10' });
    const work: Promise<unknown>[] = [];
    for (let i = 0; i < 20; i++) {
      work.push(p.ingest([span(i)]));
      if (i % 5 === 0) work.push(p.flush());
      await new Promise((r) => setTimeout(r, 3));
    }
    await Promise.all(work);
    await p.flush();
    expect(storage.spans.size).to.equal(20);
    expect(maxRunning).to.equal(1);
  });
});

describe('insertSpoolFiles (the storage thread reading sealed segments)', () => {
  it('inserts in order, at most maxRows rows and about maxBytes of spooled JSON at a time, whatever the segment size', async () => {
    const { Spool, encodeFrame } = await import('../../../spool/spool.ts');
    const { insertSpoolFiles } = await import('../../../storage/spool-files.ts');
    const dir = await tempDir();
    try {
      const spool = new Spool({ dir: join(dir, 'spool'), fsync: false });
      spool.open();
      // One segment of 40 frames of 5 spans (~5 KiB a frame), one of 3 frames.
      for (let f = 0; f < 40; f++)
        await spool.append(encodeFrame(Array.from({ length: 5 }, (_, i) => span(f * 5 + i))), 5);
      const [first] = spool.seal();
      for (let f = 40; f < 43; f++)
        await spool.append(encodeFrame(Array.from({ length: 5 }, (_, i) => span(f * 5 + i))), 5);
      const [second] = spool.close();
      const storage = new MapStorage();
      const order: string[] = [];
      const insert = storage.insertSpans.bind(storage);
      storage.insertSpans = async (rows) => {
        for (const r of rows) order.push(r.spanId);
        await insert(rows);
      };
      const res = await insertSpoolFiles(storage, [first!.path, second!.path], 1000, false, 20 * 1024);
      // An insert closes with the record that reaches 20 KiB (each counts for its share of its frame's bytes); the
      // second file's rows follow on in the same one.
      const frameBytes = encodeFrame(Array.from({ length: 5 }, (_, i) => span(100 + i))).length;
      const per = Math.ceil((20 * 1024) / (frameBytes / 5));
      expect(per).to.be.within(15, 30);
      expect(storage.inserts).to.deep.equal([
        ...Array(Math.floor(215 / per)).fill(per),
        ...(215 % per ? [215 % per] : []),
      ]);
      expect(res.chunks.map((c) => c.rows)).to.deep.equal(storage.inserts);
      expect(order).to.deep.equal(Array.from({ length: 215 }, (_, i) => `span-${i}`));
      const byRows = new MapStorage();
      await insertSpoolFiles(byRows, [first!.path, second!.path], 60, false, 1 << 30);
      expect(byRows.inserts).to.deep.equal([60, 60, 60, 35]);
      // One frame larger than the bound (a large request's batch) is inserted in parts too.
      const big = new Spool({ dir: join(dir, 'big'), fsync: false });
      big.open();
      const frame = encodeFrame(Array.from({ length: 100 }, (_, i) => span(i)));
      await big.append(frame, 100);
      const [one] = big.close();
      const parts = new MapStorage();
      await insertSpoolFiles(parts, [one!.path], 1000, false, frame.length / 5);
      expect(parts.inserts).to.deep.equal([20, 20, 20, 20, 20]);
    } finally {
      await removeDir(dir);
    }
  });
});
