// The WAL itself: framing, group commit, torn tails, disk errors.
import type { SpanRecord } from '../../collector/record.ts';
import { expect } from 'chai';
import { appendFile, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Spool, decodeFrames, encodeFrame } from '../../collector/spool.ts';
import { TestLogger, removeDir, span, tempDir } from './helpers.ts';

describe('spool', () => {
  let dir: string;
  let log: TestLogger;
  const openSpool = async (fsync = true) => {
    const s = new Spool({ dir, fsync, logger: log });
    await s.open();
    return s;
  };
  beforeEach(async () => { dir = join(await tempDir(), 'spool'); log = new TestLogger(); });
  afterEach(async () => { await removeDir(join(dir, '..')); });

  it('round-trips frames and counts rows', () => {
    const a = encodeFrame([span(1), span(2)]);
    const b = encodeFrame([span(3)]);
    const dec = decodeFrames(Buffer.concat([a, b]));
    expect(dec.error).to.equal(null);
    expect(dec.rows).to.equal(3);
    expect(dec.records.map((r) => (r as SpanRecord).spanId)).to.deep.equal(['span-1', 'span-2', 'span-3']);
  });

  it('coalesces concurrent appends into few writes and fsyncs (group commit)', async () => {
    const s = await openSpool();
    await Promise.all(Array.from({ length: 500 }, (_, i) => s.append([span(i)])));
    expect(s.counters.appends).to.equal(500);
    expect(s.counters.syncs).to.be.at.most(5);
    expect(s.counters.writes).to.equal(s.counters.syncs);
    expect(s.pendingRows).to.equal(500);
    await s.close();
  });

  it('resolves an append only after an fsync that covers it', async () => {
    const s = await openSpool();
    const seen: boolean[] = [];
    await Promise.all(Array.from({ length: 50 }, async (_, i) => {
      const before = s.counters.syncs;
      await s.append([span(i)]);
      seen.push(s.counters.syncs > before);
    }));
    expect(seen).to.have.length(50);
    expect(seen.every(Boolean)).to.equal(true);
    await s.close();
  });

  it('skips fsync when disabled but still writes in groups', async () => {
    const s = await openSpool(false);
    await Promise.all(Array.from({ length: 100 }, (_, i) => s.append([span(i)])));
    expect(s.counters.syncs).to.equal(0);
    expect(s.counters.writes).to.be.at.most(3);
    await s.close();
  });

  it('seals segments in order and reopens them for replay', async () => {
    const s = await openSpool();
    await s.append([span(1), span(2)]);
    const first = await s.seal();
    await s.append([span(3)]);
    await s.close();
    expect(first?.rows).to.equal(2);
    expect(await s.seal()).to.equal(null); // nothing active after close

    const again = await openSpool();
    const segs = again.sealedSegments();
    expect(segs.map((x) => x.rows)).to.deep.equal([2, 1]);
    const rows = [...(await again.load(segs[0]!)), ...(await again.load(segs[1]!))];
    expect(rows.map((r) => (r as SpanRecord).spanId)).to.deep.equal(['span-1', 'span-2', 'span-3']);
    expect(again.totalBytes).to.equal((await stat(segs[0]!.path)).size + (await stat(segs[1]!.path)).size);
    // New appends go to a newer segment than the recovered ones.
    await again.append([span(4)]);
    const sealed = await again.seal();
    expect(sealed!.seq).to.be.greaterThan(segs[1]!.seq);
    await again.close();
  });

  it('ignores a torn tail frame (never acknowledged) and logs it', async () => {
    const s = await openSpool();
    await s.append([span(1)]);
    await s.append([span(2)]);
    const seg = (await s.seal())!;
    await s.close();
    const good = (await stat(seg.path)).size;
    // A crash mid-write: half a frame after the good ones.
    const torn = encodeFrame([span(3), span(4)]);
    await appendFile(seg.path, torn.subarray(0, torn.length >> 1));

    const again = await openSpool();
    const [rec] = again.sealedSegments();
    expect(rec!.rows).to.equal(2);
    expect((await again.load(rec!)).map((r) => (r as SpanRecord).spanId)).to.deep.equal(['span-1', 'span-2']);
    expect((await stat(seg.path)).size).to.equal(good); // cut back to the last good frame
    expect(log.lines.some((l) => l.level === 'warn' && /torn tail/.test(l.msg ?? ''))).to.equal(true);
    await again.close();
  });

  it('ignores a tail frame whose checksum does not match', async () => {
    await mkdir(dir, { recursive: true });
    const bad = encodeFrame([span(2)]);
    bad[bad.length - 3] ^= 0xff; // flipped payload byte
    await writeFile(join(dir, '000000000007.seg'), Buffer.concat([encodeFrame([span(1)]), bad]));
    const s = await openSpool();
    expect(s.pendingRows).to.equal(1);
    expect(log.lines.some((l) => /torn tail/.test(l.msg ?? '') && /checksum/.test(JSON.stringify(l.obj)))).to.equal(true);
    await s.close();
  });

  it('keeps every readable frame of a segment damaged in the middle, sets a copy aside and logs the loss', async () => {
    await mkdir(dir, { recursive: true });
    const frames = [1, 2, 3, 4, 5].map((i) => encodeFrame([span(i)]));
    const whole = Buffer.concat(frames);
    const at = frames[0]!.length + frames[1]!.length;
    const payloadByte = Buffer.from(whole);
    payloadByte[at + 20] ^= 0xff; // frame 3's payload: its length is intact
    const lengthByte = Buffer.from(whole);
    lengthByte[at + 1] ^= 0x40; // frame 3's length: found again by scanning
    for (const [what, damaged] of [['payload', payloadByte], ['length', lengthByte]] as const) {
      await rm(join(dir, '..', 'spool-damaged'), { recursive: true, force: true });
      await writeFile(join(dir, '000000000003.seg'), Buffer.concat([damaged, encodeFrame([span(6)]).subarray(0, 10)])); // and a torn tail
      log = new TestLogger();
      const s = await openSpool();
      const [seg] = s.sealedSegments();
      expect((await s.load(seg!)).map((r) => (r as SpanRecord).spanId), what).to.deep.equal(['span-1', 'span-2', 'span-4', 'span-5']);
      expect(seg!.rows).to.equal(4);
      expect((await stat(seg!.path)).size).to.equal(whole.length - frames[2]!.length); // rewritten without the damage
      const copies = await readdir(join(dir, '..', 'spool-damaged'));
      expect(copies).to.have.length(1);
      expect((await readFile(join(dir, '..', 'spool-damaged', copies[0]!))).subarray(0, damaged.length)).to.deep.equal(damaged);
      expect(log.lines.some((l) => l.level === 'error' && /damaged on disk/.test(l.msg ?? ''))).to.equal(true);
      await s.close();
      await rm(seg!.path);
    }
  });

  it('takes a hole of zeros (a write that never landed while a later one did) for a torn tail, not damage', async () => {
    await mkdir(dir, { recursive: true });
    const [a, b, c] = [1, 2, 3].map((i) => encodeFrame([span(i)]));
    // groups overlap and are acknowledged in order: the second never landed, the third did, so only the first counts
    await writeFile(join(dir, '000000000004.seg'), Buffer.concat([a!, Buffer.alloc(b!.length), c!]));
    const s = await openSpool();
    const [seg] = s.sealedSegments();
    expect((await s.load(seg!)).map((r) => (r as SpanRecord).spanId)).to.deep.equal(['span-1']);
    expect((await stat(seg!.path)).size).to.equal(a!.length);
    expect(log.lines.some((l) => /torn tail/.test(l.msg ?? '') && /unwritten bytes/.test(JSON.stringify(l.obj)))).to.equal(true);
    expect(log.lines.some((l) => l.level === 'error')).to.equal(false);
    await s.close();
  });

  it('drops segments with no complete frame on open', async () => {
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, '000000000001.seg'), Buffer.from([1, 2, 3]));
    const s = await openSpool();
    expect(s.sealedSegments()).to.have.length(0);
    expect(await readdir(dir)).to.deep.equal([]);
    await s.close();
  });

  it('rejects appends on disk errors, never acknowledging, and recovers', async () => {
    const s = await openSpool();
    await s.append([span(1)]);
    await s.seal();
    await rm(dir, { recursive: true }); // the next segment cannot be created
    const results = await Promise.allSettled([s.append([span(2)]), s.append([span(3)])]);
    expect(results.map((r) => r.status)).to.deep.equal(['rejected', 'rejected']);
    expect(s.pendingRows).to.equal(1); // only the sealed segment's row is counted
    expect(log.lines.some((l) => l.level === 'error')).to.equal(true);

    await mkdir(dir, { recursive: true });
    await s.append([span(4)]);
    const seg = (await s.seal())!;
    expect(decodeFrames(await readFile(seg.path)).records.map((r) => (r as SpanRecord).spanId)).to.deep.equal(['span-4']);
    await s.close();
  });

  it('overlaps group commits but acknowledges them in file order', async () => {
    const s = await openSpool();
    const acked: number[] = [];
    const all: Array<Promise<void>> = [];
    for (let i = 0; i < 60; i++) {
      all.push(s.append([span(i)]).then(() => { acked.push(i); }));
      await new Promise((r) => setImmediate(r)); // separate ticks: separate groups, several in flight
    }
    await Promise.all(all);
    expect(acked).to.deep.equal([...Array(60).keys()]);
    expect(s.counters.syncs).to.be.greaterThan(1);
    const seg = (await s.seal())!;
    const ids = decodeFrames(await readFile(seg.path)).records.map((r) => (r as SpanRecord).spanId);
    expect(ids).to.deep.equal([...Array(60).keys()].map((i) => `span-${i}`));
    await s.close();
  });

  it('a failed sync fails every later group in flight and the segment is cut back to the last acknowledged frame', async () => {
    const s = await openSpool();
    await s.append([span(0)]);
    // Fail the next fdatasync: the group it belongs to and any group behind it must not be acknowledged.
    const fh = (s as unknown as { active: { fh: { datasync: () => Promise<void> } } }).active.fh;
    const real = fh.datasync.bind(fh);
    let calls = 0;
    let failing!: () => void;
    const firstSyncStarted = new Promise<void>((r) => { failing = r; });
    fh.datasync = async () => {
      if (++calls === 1) { failing(); await new Promise((r) => setTimeout(r, 20)); throw new Error('EIO (test)'); }
      return real();
    };
    const later: Array<Promise<void>> = [];
    const first = s.append([span(1)]);
    // The later groups start only once the first group's (failing) sync is under way: otherwise a later
    // group's write could finish first and take the failing sync, leaving the first group acknowledged.
    await firstSyncStarted;
    for (let i = 2; i < 5; i++) { later.push(s.append([span(i)])); await new Promise((r) => setImmediate(r)); }
    const results = await Promise.allSettled([first, ...later]);
    expect(results.map((r) => r.status)).to.deep.equal(['rejected', 'rejected', 'rejected', 'rejected']);
    await s.append([span(5)]); // goes to a new segment
    await s.seal();
    const segs = s.sealedSegments();
    const ids = [];
    for (const seg of segs) ids.push(...decodeFrames(await readFile(seg.path)).records.map((r) => (r as SpanRecord).spanId));
    expect(ids).to.deep.equal(['span-0', 'span-5']);
    expect(s.pendingRows).to.equal(2);
    await s.close();
  });
});
