// The WAL itself: framing, durable appends, torn tails, disk errors (group commit: see pipeline.test.ts).
import type { SpanRecord } from '../../../core/record.ts';
import { expect } from 'chai';
import { appendFile, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { closeSync, constants, openSync, readSync } from 'node:fs';
import {
  FrameArena,
  Spool,
  decodeFrames,
  encodeFrame,
  loadSegment,
  serializeRecords,
  type Segment,
} from '../../../spool/spool.ts';
import { TestLogger, removeDir, span, tempDir } from '../../support/spool.ts';

describe('spool', () => {
  let dir: string;
  let log: TestLogger;
  const recovered = new Map<Spool, Segment[]>();
  const openSpool = (fsync = true) => {
    const s = new Spool({ dir, fsync, logger: log });
    recovered.set(s, s.open());
    return s;
  };
  const sealedOf = (s: Spool) => recovered.get(s)!;
  beforeEach(async () => {
    dir = join(await tempDir(), 'spool');
    log = new TestLogger();
  });
  afterEach(async () => {
    await removeDir(join(dir, '..'));
  });

  it('round-trips frames and counts rows', () => {
    const a = encodeFrame([span(1), span(2)]);
    const b = encodeFrame([span(3)]);
    const dec = decodeFrames(Buffer.concat([a, b]));
    expect(dec.error).to.equal(null);
    expect(dec.rows).to.equal(3);
    expect(dec.records.map((r) => (r as SpanRecord).spanId)).to.deep.equal(['span-1', 'span-2', 'span-3']);
  });

  it('encodes frames into reused memory as encodeFrame does; a taken group stays intact while the next one grows past it', () => {
    const arena = new FrameArena(64);
    const big = (i: number) => ({ ...span(i), prompt: `é✓ ${'x'.repeat(300)} ${i}` }); // multi-byte text, each frame past 64 bytes
    const known = span(7);
    arena.add([big(1), big(2)]);
    arena.addFrame(encodeFrame([big(3)]));
    arena.add([known], serializeRecords([known]));
    const first = arena.take();
    expect(
      first.equals(Buffer.concat([encodeFrame([big(1), big(2)]), encodeFrame([big(3)]), encodeFrame([known])])),
    ).to.equal(true);
    const copy = Buffer.from(first);
    expect(arena.size).to.equal(0);
    for (let i = 10; i < 40; i++) arena.add([big(i)]); // grows the other buffer many times over, frames kept whole
    expect(first.equals(copy)).to.equal(true); // the write in flight is not touched
    const mark = arena.size;
    arena.add([big(99)]);
    arena.truncate(mark); // an encoding that failed drops only its own frames
    const second = decodeFrames(arena.take());
    expect(second.error).to.equal(null);
    expect(second.records.map((r) => (r as SpanRecord).prompt)).to.deep.equal(
      Array.from({ length: 30 }, (_, k) => big(10 + k).prompt),
    );
    arena.add([big(50)]);
    arena.truncate(); // a failed write's later frames
    arena.add([big(51)]);
    expect(decodeFrames(arena.take()).records.map((r) => (r as SpanRecord).spanId)).to.deep.equal(['span-51']);
  });

  it('appends a frame per call, durably (O_DSYNC) when fsync is on; each call one write', async () => {
    const s = openSpool();
    await s.append(encodeFrame([span(1)]), 1);
    await s.append(Buffer.concat([encodeFrame([span(2)]), encodeFrame([span(3), span(4)])]), 3, 2);
    expect(s.counters).to.include({ appends: 3, writes: 2, syncs: 2 });
    expect(s.activeRows).to.equal(4);
    const fd = (s as unknown as { active: { fd: number } }).active.fd;
    expect(fcntlFlags(fd) & constants.O_DSYNC).to.equal(constants.O_DSYNC);
    s.close();
  });

  it('skips the flush when fsync is off', async () => {
    const s = openSpool(false);
    for (let i = 0; i < 10; i++) await s.append(encodeFrame([span(i)]), 1);
    expect(s.counters).to.include({ appends: 10, writes: 10, syncs: 0 });
    const fd = (s as unknown as { active: { fd: number } }).active.fd;
    expect(fcntlFlags(fd) & constants.O_DSYNC).to.equal(0);
    s.close();
  });

  it('seals segments in order and reopens them for replay', async () => {
    const s = openSpool();
    await s.append(encodeFrame([span(1), span(2)]), 2);
    const [first] = s.seal();
    await s.append(encodeFrame([span(3)]), 1);
    const [second] = s.close();
    expect(first?.rows).to.equal(2);
    expect(second?.rows).to.equal(1);
    expect(s.seal()).to.deep.equal([]); // nothing active after close
    await rejects(s.append(encodeFrame([span(9)]), 1), /closed/);

    const again = new Spool({ dir, fsync: true, logger: log });
    const segs = again.open();
    expect(segs.map((x) => x.rows)).to.deep.equal([2, 1]);
    const rows = [...(await loadSegment(segs[0]!)), ...(await loadSegment(segs[1]!))];
    expect(rows.map((r) => (r as SpanRecord).spanId)).to.deep.equal(['span-1', 'span-2', 'span-3']);
    expect(segs.map((x) => x.bytes)).to.deep.equal([
      (await stat(segs[0]!.path)).size,
      (await stat(segs[1]!.path)).size,
    ]);
    // New appends go to a newer segment than the recovered ones.
    await again.append(encodeFrame([span(4)]), 1);
    const [sealed] = again.seal();
    expect(sealed!.seq).to.be.greaterThan(segs[1]!.seq);
    again.close();
  });

  it('ignores a torn tail frame (never acknowledged) and logs it', async () => {
    const s = openSpool();
    await s.append(encodeFrame([span(1)]), 1);
    await s.append(encodeFrame([span(2)]), 1);
    const [seg] = s.close();
    const good = (await stat(seg!.path)).size;
    // A crash mid-write: half a frame after the good ones.
    const torn = encodeFrame([span(3), span(4)]);
    await appendFile(seg!.path, torn.subarray(0, torn.length >> 1));

    const again = openSpool();
    const [rec] = sealedOf(again);
    expect(rec!.rows).to.equal(2);
    expect((await loadSegment(rec!)).map((r) => (r as SpanRecord).spanId)).to.deep.equal(['span-1', 'span-2']);
    expect((await stat(seg!.path)).size).to.equal(good); // cut back to the last good frame
    expect(log.lines.some((l) => l.level === 'warn' && /torn tail/.test(l.msg ?? ''))).to.equal(true);
    again.close();
  });

  it('ignores a tail frame whose checksum does not match', async () => {
    await mkdir(dir, { recursive: true });
    const bad = encodeFrame([span(2)]);
    bad[bad.length - 3] ^= 0xff; // flipped payload byte
    await writeFile(join(dir, '000000000007.seg'), Buffer.concat([encodeFrame([span(1)]), bad]));
    const s = openSpool();
    expect(sealedOf(s).map((x) => x.rows)).to.deep.equal([1]);
    expect(log.lines.some((l) => /torn tail/.test(l.msg ?? '') && /checksum/.test(JSON.stringify(l.obj)))).to.equal(
      true,
    );
    s.close();
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
    for (const [what, damaged] of [
      ['payload', payloadByte],
      ['length', lengthByte],
    ] as const) {
      await rm(join(dir, '..', 'spool-damaged'), { recursive: true, force: true });
      await writeFile(join(dir, '000000000003.seg'), Buffer.concat([damaged, encodeFrame([span(6)]).subarray(0, 10)])); // and a torn tail
      log = new TestLogger();
      const s = openSpool();
      const [seg] = sealedOf(s);
      expect(
        (await loadSegment(seg!)).map((r) => (r as SpanRecord).spanId),
        what,
      ).to.deep.equal(['span-1', 'span-2', 'span-4', 'span-5']);
      expect(seg!.rows).to.equal(4);
      expect((await stat(seg!.path)).size).to.equal(whole.length - frames[2]!.length); // rewritten without the damage
      const copies = await readdir(join(dir, '..', 'spool-damaged'));
      expect(copies).to.have.length(1);
      expect((await readFile(join(dir, '..', 'spool-damaged', copies[0]!))).subarray(0, damaged.length)).to.deep.equal(
        damaged,
      );
      expect(log.lines.some((l) => l.level === 'error' && /damaged on disk/.test(l.msg ?? ''))).to.equal(true);
      s.close();
      await rm(seg!.path);
    }
  });

  it('takes a hole of zeros (a write that never landed while a later one did) for a torn tail, not damage', async () => {
    await mkdir(dir, { recursive: true });
    const [a, b, c] = [1, 2, 3].map((i) => encodeFrame([span(i)]));
    // blocks of an unacknowledged write that never landed before a crash, while later ones did: only the first counts
    await writeFile(join(dir, '000000000004.seg'), Buffer.concat([a!, Buffer.alloc(b!.length), c!]));
    const s = openSpool();
    const [seg] = sealedOf(s);
    expect((await loadSegment(seg!)).map((r) => (r as SpanRecord).spanId)).to.deep.equal(['span-1']);
    expect((await stat(seg!.path)).size).to.equal(a!.length);
    expect(
      log.lines.some((l) => /torn tail/.test(l.msg ?? '') && /unwritten bytes/.test(JSON.stringify(l.obj))),
    ).to.equal(true);
    expect(log.lines.some((l) => l.level === 'error')).to.equal(false);
    s.close();
  });

  it('drops segments with no complete frame on open', async () => {
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, '000000000001.seg'), Buffer.from([1, 2, 3]));
    const s = openSpool();
    expect(sealedOf(s)).to.have.length(0);
    expect(await readdir(dir)).to.deep.equal([]);
    s.close();
  });

  it('throws on disk errors, never acknowledging, reports the failure until an append succeeds, and recovers', async () => {
    const s = openSpool();
    await s.append(encodeFrame([span(1)]), 1);
    s.seal();
    await rm(dir, { recursive: true }); // the next segment cannot be created
    await rejects(s.append(encodeFrame([span(2)]), 1), /ENOENT/);
    await rejects(s.append(encodeFrame([span(3)]), 1), /ENOENT/);
    expect(s.state()).to.deep.include({ activeRows: 0 });
    expect(s.state().lastWriteFailure?.message).to.match(/ENOENT/);
    expect(s.counters.appends).to.equal(1);
    expect(log.lines.some((l) => l.level === 'error')).to.equal(true);

    await mkdir(dir, { recursive: true });
    await s.append(encodeFrame([span(4)]), 1);
    expect(s.state().lastWriteFailure).to.equal(null);
    const [seg] = s.seal();
    expect(decodeFrames(await readFile(seg!.path)).records.map((r) => (r as SpanRecord).spanId)).to.deep.equal([
      'span-4',
    ]);
    s.close();
  });

  for (const sync of [false, true]) {
    it(`after a failed write (${sync ? 'on this thread' : 'through the thread pool'}), the segment is cut back to its last good frame and sealed; the next append opens a new one`, async () => {
      const s = openSpool();
      await s.append(encodeFrame([span(0)]), 1);
      // The write fails halfway: part of the frame reached the file (a full disk), and the call threw.
      const active = (s as unknown as { active: { fd: number; path: string } }).active;
      const frame = encodeFrame([span(1)]);
      // The spool's named imports follow the builtin's properties once synced (node:module).
      const fs = (await import('node:fs')).default;
      const { syncBuiltinESMExports } = await import('node:module');
      const real = { write: fs.write, writeSync: fs.writeSync };
      let failed = false;
      const enospc = () => Object.assign(new Error('ENOSPC: no space left on device (test)'), { code: 'ENOSPC' });
      type Cb = (err: NodeJS.ErrnoException | null, n: number) => void;
      fs.write = ((fd: number, buf: Buffer, off: number, len: number, pos: number, cb: Cb) => {
        if (fd !== active.fd || failed) return real.write(fd, buf, off, len, pos, cb);
        failed = true;
        real.writeSync(fd, buf, off, len >> 1, pos); // part of it reached the file
        process.nextTick(() => cb(enospc(), 0));
      }) as typeof fs.write;
      fs.writeSync = ((fd: number, buf: Buffer, off: number, len: number, pos: number) => {
        if (fd !== active.fd || failed) return real.writeSync(fd, buf, off, len, pos);
        failed = true;
        real.writeSync(fd, buf, off, len >> 1, pos);
        throw enospc();
      }) as typeof fs.writeSync;
      syncBuiltinESMExports();
      try {
        await rejects(s.append(frame, 1, 1, sync), /ENOSPC/);
        expect(failed).to.equal(true);
      } finally {
        Object.assign(fs, real);
        syncBuiltinESMExports();
      }
      await s.append(encodeFrame([span(2)]), 1, 1, sync); // goes to a new segment
      const segs = s.close();
      expect(segs.map((x) => x.rows)).to.deep.equal([1, 1]);
      expect(segs[0]!.path).to.equal(active.path);
      const ids = [];
      for (const seg of segs)
        ids.push(...decodeFrames(await readFile(seg.path)).records.map((r) => (r as SpanRecord).spanId));
      expect(ids).to.deep.equal(['span-0', 'span-2']);
      expect((await stat(segs[0]!.path)).size).to.equal(segs[0]!.bytes);
    });
  }
});

async function rejects(p: Promise<unknown>, pattern: RegExp): Promise<void> {
  let err: unknown = null;
  await p.catch((e: unknown) => {
    err = e;
  });
  expect(String(err)).to.match(pattern);
}

/** A file descriptor's status flags, from /proc (Linux). */
function fcntlFlags(fd: number): number {
  const m = /^flags:\s+([0-7]+)$/m.exec(readFileSyncUtf8(`/proc/self/fdinfo/${fd}`));
  return m ? parseInt(m[1]!, 8) : -1;
}
function readFileSyncUtf8(path: string): string {
  const f = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(4096);
    const n = readSync(f, buf, 0, buf.length, null);
    return buf.toString('utf8', 0, n);
  } finally {
    closeSync(f);
  }
}
