// Write-ahead spool: acknowledged records live here until storage has them.
//
// Layout: `${dir}/<seq>.seg`, one active segment (appended to) and sealed ones
// (waiting for the writer). A segment is a run of frames:
//   [u32 payload length][u32 row count][u32 crc32(row count + payload)][payload: JSON array of records]
// A crash can tear only the tail (after a failed write the segment is sealed, cut back to its last good frame), so on open a bad
// frame with nothing valid after it ends the segment: it was never acknowledged. A bad frame with good
// frames after it is damage (a flipped byte on disk): open() sets a copy of the segment aside in
// `${dir}-damaged`, logs the loss, and keeps every frame it can still read.
//
// The spool lives on the processor thread (pipeline/processor-host.ts), which appends the frames of the requests it processed
// while the previous write was in flight as one write (group commit) and answers them once it returned. The file is
// opened O_DSYNC, so a write returns once its bytes are on disk: one system call, one thread-pool round trip.
import {
  closeSync,
  constants,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  write,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import type { StoredRecord } from '../core/record.ts';

export interface SpoolLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface SpoolOptions {
  dir: string;
  /** false leaves appends in the page cache: acknowledged data can be lost on power failure. Benchmarks only. */
  fsync: boolean;
  logger?: SpoolLogger;
}

/** A sealed segment: complete, no longer appended to, waiting for the writer. */
export interface Segment {
  readonly seq: number;
  readonly path: string;
  readonly bytes: number;
  readonly rows: number;
}

export interface SpoolCounters {
  appends: number; // frames acknowledged (one per request, or per group of records)
  writes: number; // appends to a segment file (one per group commit)
  syncs: number; // of those, durable ones (O_DSYNC: one per group when fsync is on)
  bytesWritten: number;
}

/** What the thread owning the spool reports of it (pipeline/pipeline.ts reads it on the HTTP thread). */
export interface SpoolState {
  /**
   * The segments the writer does not know yet: those sealed since seal() last handed them over (after a failed
   * write), then the one being appended to. A replacement of a thread that died takes them over (Spool.adopt).
   */
  unsealed: string[];
  activeBytes: number;
  activeRows: number;
  counters: SpoolCounters;
  /** The last append failed (disk full, I/O error) then, and none has succeeded since. */
  lastWriteFailure: { atMs: number; message: string } | null;
}

const HEADER = 12;
const SUFFIX = '.seg';

/** One frame. The JSON is written straight into the frame (no intermediate buffer). */
export function encodeFrame(records: StoredRecord[]): Buffer {
  const json = JSON.stringify(records); // well-formed (lone surrogates escaped or replaced), so the UTF-8 length is exact
  const length = Buffer.byteLength(json);
  const frame = Buffer.allocUnsafe(HEADER + length);
  frame.write(json, HEADER);
  frame.writeUInt32LE(length, 0);
  frame.writeUInt32LE(records.length, 4);
  frame.writeUInt32LE(crc32(frame.subarray(HEADER), crc32(frame.subarray(4, 8))), 8);
  return frame;
}

/**
 * Frames encoded into reused memory, in two buffers taking turns: frames queued for the next write fill one while
 * the write in flight holds the other (one write at a time; the next takes the filled buffer and gives back the
 * other). An OTLP batch's frame is megabytes: allocated anew each time, its pages are fresh memory, and on this
 * kind of VM every page fault costs µs.
 */
export class FrameArena {
  private readonly bufs: [Buffer, Buffer];
  private cur = 0;
  private used = 0;
  constructor(initialBytes = 256 * 1024) {
    this.bufs = [Buffer.allocUnsafe(initialBytes), Buffer.allocUnsafe(initialBytes)];
  }

  /** Bytes queued for the next write. */
  get size(): number {
    return this.used;
  }

  /** Encodes a frame of `records` (`json`: their JSON, when already serialized) after those queued. */
  add(records: StoredRecord[], json?: readonly string[]): void {
    const start = this.used;
    this.ensure(start + HEADER, start);
    let off = start + HEADER;
    const put = (text: string) => {
      this.ensure(off + text.length * 3, off); // UTF-8 takes at most 3 bytes per UTF-16 unit
      off += this.bufs[this.cur].write(text, off); // well-formed text (as in encodeFrame): every byte fits
    };
    put('[');
    for (let i = 0; i < records.length; i++) {
      if (i) put(',');
      put(json?.[i] ?? JSON.stringify(records[i]));
    }
    put(']');
    const frame = this.bufs[this.cur];
    frame.writeUInt32LE(off - start - HEADER, start);
    frame.writeUInt32LE(records.length, start + 4);
    frame.writeUInt32LE(
      crc32(frame.subarray(start + HEADER, off), crc32(frame.subarray(start + 4, start + 8))),
      start + 8,
    );
    this.used = off;
  }

  /** Queues a frame encoded elsewhere (a copy). */
  addFrame(frame: Buffer): void {
    this.ensure(this.used + frame.length, this.used);
    frame.copy(this.bufs[this.cur], this.used);
    this.used += frame.length;
  }

  /**
   * The queued bytes, to be written now; later frames go to the other buffer. The bytes stay as they are until the
   * next take(): that is, until this write has returned.
   */
  take(): Buffer {
    const out = this.bufs[this.cur].subarray(0, this.used);
    this.cur ^= 1;
    this.used = 0;
    // A buffer grown for a burst is let go once it is mostly idle (the peak stays allocated otherwise).
    const next = this.bufs[this.cur];
    if (next.length > SHRINK_ABOVE && out.length < next.length / 8)
      this.bufs[this.cur] = Buffer.allocUnsafe(Math.max(out.length * 2, 256 * 1024));
    return out;
  }

  /** Drops the frames queued after the first `size` bytes (all by default: their write will not happen). */
  truncate(size = 0): void {
    this.used = Math.min(this.used, size);
  }

  /** Room up to `end`: a larger buffer when needed, the first `keep` bytes (written so far) copied into it. */
  private ensure(end: number, keep: number): void {
    const buf = this.bufs[this.cur];
    if (end <= buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(buf.length * 2, end));
    buf.copy(bigger, 0, 0, keep);
    this.bufs[this.cur] = bigger;
  }
}

const SHRINK_ABOVE = 16 * 1024 * 1024;

/**
 * The JSON of each record, for its frame: `known` holds what was already written for some of them (the verification
 * processor's canonical form of each span: JSON of the same data with every object's keys sorted, so attributes
 * reach storage, and the read API, in key order, which OpenTelemetry gives no meaning), reused rather than
 * serializing the record a second time (an OTLP GenAI span: about 25 µs). Throws for what is not JSON data.
 * Handed along with the records, not kept on them: a WeakMap from record to JSON cost more, most of it in the garbage
 * collector.
 */
export function serializeRecords(records: readonly object[], known?: ReadonlyMap<object, string>): string[] {
  return records.map((r) => known?.get(r) ?? JSON.stringify(r));
}

export interface DecodedSegment {
  records: StoredRecord[];
  rows: number;
  /** Bytes up to the end of the last good frame. */
  validBytes: number;
  /** Why decoding stopped before the end, if it did. */
  error: string | null;
  /** Unreadable byte ranges with good frames after them (damage, not a torn tail): skipped. */
  damaged: Array<{ at: number; bytes: number }>;
  /** Where the good frames are (to rewrite a damaged segment without the damage). */
  frames: Array<{ at: number; bytes: number }>;
}

/** A whole frame with a matching checksum starts at `off`. */
function frameAt(buf: Buffer, off: number): boolean {
  if (buf.length - off < HEADER) return false;
  const len = buf.readUInt32LE(off);
  if (buf.length - off - HEADER < len) return false;
  return (
    crc32(buf.subarray(off + HEADER, off + HEADER + len), crc32(buf.subarray(off + 4, off + 8))) ===
    buf.readUInt32LE(off + 8)
  );
}

/** 12 zero bytes in a row within [from, to): more than a frame header's small numbers hold, and payloads are JSON. */
function zeroRun(buf: Buffer, from: number, to: number): boolean {
  let run = 0;
  for (let i = from; i < to; i++) {
    run = buf[i] === 0 ? run + 1 : 0;
    if (run >= 12) return true;
  }
  return false;
}

/** The next offset after a bad frame at `off` where a good one starts: past its length if that is intact, else by scanning; -1 when none (a torn tail). */
function resync(buf: Buffer, off: number): number {
  const len = buf.readUInt32LE(off);
  if (off + HEADER + len < buf.length && frameAt(buf, off + HEADER + len)) return off + HEADER + len;
  for (let i = off + 1; i + HEADER <= buf.length; i++) if (frameAt(buf, i)) return i;
  return -1;
}

/** The records of one good frame (a position decodeFrames found). */
export function frameRecords(buf: Buffer, frame: { at: number; bytes: number }): StoredRecord[] {
  return JSON.parse(buf.toString('utf8', frame.at + HEADER, frame.at + frame.bytes)) as StoredRecord[];
}

/** Decode frames; `parse: false` only validates and counts rows (cheap scan on open). */
export function decodeFrames(buf: Buffer, parse = true): DecodedSegment {
  const records: StoredRecord[] = [];
  const damaged: DecodedSegment['damaged'] = [];
  const frames: DecodedSegment['frames'] = [];
  let off = 0;
  let rows = 0;
  let error: string | null = null;
  while (off < buf.length) {
    if (buf.length - off < HEADER) {
      error = `truncated frame header at ${off}`;
      break;
    }
    if (!frameAt(buf, off)) {
      const next = resync(buf, off);
      // A run of zeros is a hole, not damage: blocks of an unacknowledged write that never landed while later ones did
      // (a crash mid-write, or a spool written by a version whose groups overlapped), so nothing from here on was
      // acknowledged. JSON frames hold no such run.
      if (next >= 0 && zeroRun(buf, off, next)) {
        error = `unwritten bytes at ${off}`;
        break;
      }
      if (next < 0) {
        error =
          buf.length - off - HEADER < buf.readUInt32LE(off)
            ? `truncated frame at ${off}`
            : `checksum mismatch at ${off}`;
        break;
      }
      damaged.push({ at: off, bytes: next - off });
      off = next;
      continue;
    }
    const len = buf.readUInt32LE(off);
    const frame = { at: off, bytes: HEADER + len };
    if (parse) for (const r of frameRecords(buf, frame)) records.push(r);
    rows += buf.readUInt32LE(off + 4);
    frames.push(frame);
    off += HEADER + len;
  }
  return { records, rows, validBytes: off, error, damaged, frames };
}

interface Active {
  seq: number;
  path: string;
  fd: number;
  bytes: number;
  rows: number;
}

export class Spool {
  readonly dir: string;
  readonly counters: SpoolCounters = { appends: 0, writes: 0, syncs: 0, bytesWritten: 0 };
  private readonly fsync: boolean;
  private readonly log: SpoolLogger | undefined;
  private active: Active | null = null; // opened on the first append after a seal
  private sealedSince: Segment[] = []; // sealed since seal() last handed them over
  private nextSeq = 1;
  private broken = false; // the last write failed: the segment's tail is unknown, so it is sealed before the next
  lastWriteFailure: { atMs: number; message: string } | null = null;
  private closed = false;

  constructor(opts: SpoolOptions) {
    this.dir = opts.dir;
    this.fsync = opts.fsync;
    this.log = opts.logger;
  }

  /** Create the directory and take over segments left by a previous process: returned sealed, oldest first. */
  open(): Segment[] {
    mkdirSync(this.dir, { recursive: true });
    const all = readdirSync(this.dir);
    // A rewrite of a damaged segment cut short by a crash: the segment itself is still whole.
    for (const n of all) if (/^\d+\.seg\.rewrite$/.test(n)) unlinkSync(join(this.dir, n));
    const names = all.filter((n) => /^\d+\.seg$/.test(n)).sort();
    const recovered: Segment[] = [];
    for (const name of names) {
      this.nextSeq = Math.max(this.nextSeq, Number(name.slice(0, -SUFFIX.length)) + 1);
      const seg = this.recover(name);
      if (seg) recovered.push(seg);
    }
    if (recovered.length) {
      this.log?.info(
        { segments: recovered.length, rows: recovered.reduce((n, s) => n + s.rows, 0) },
        'spool: recovered segments to replay',
      );
    }
    return recovered;
  }

  /**
   * Continue after a spool owner on another thread that died (the segments it handed over are known to the writer):
   * number new segments after every file there, and take over the ones it had not handed over yet (its state's
   * `unsealed`), returned sealed in that order, torn tails cut (none for those that held nothing).
   */
  adopt(paths: readonly string[]): Segment[] {
    mkdirSync(this.dir, { recursive: true });
    for (const n of readdirSync(this.dir))
      if (/^\d+\.seg$/.test(n)) this.nextSeq = Math.max(this.nextSeq, Number(n.slice(0, -SUFFIX.length)) + 1);
    const out: Segment[] = [];
    for (const path of paths) {
      if (!path.startsWith(this.dir) || !/^\d+\.seg$/.test(path.slice(this.dir.length + 1))) continue;
      const seg = this.recover(path.slice(this.dir.length + 1));
      if (seg) out.push(seg);
    }
    return out;
  }

  /** One segment found on disk, checked and cut back to its last good frame; null (and deleted) when it has none. */
  private recover(name: string): Segment | null {
    const path = join(this.dir, name);
    let buf: Buffer;
    try {
      buf = readFileSync(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
    const dec = decodeFrames(buf, false);
    if (dec.damaged.length) this.setAsideDamaged(name, buf, dec);
    else if (dec.error) {
      // A torn tail: the write never completed, so it was never acknowledged.
      this.log?.warn(
        { segment: name, error: dec.error, keptBytes: dec.validBytes },
        'spool: ignoring torn tail of segment',
      );
      const fd = openSync(path, 'r+');
      try {
        ftruncateSync(fd, dec.validBytes);
      } finally {
        closeSync(fd);
      }
    }
    if (dec.rows === 0) {
      unlinkSync(path);
      return null;
    }
    const bytes = dec.frames.reduce((n, f) => n + f.bytes, 0); // = validBytes unless damage was cut out
    return { seq: Number(name.slice(0, -SUFFIX.length)), path, bytes, rows: dec.rows };
  }

  /**
   * Frames lost in the middle of a segment were acknowledged: keep a copy of the file as it was, log the loss at
   * error level, and rewrite the segment with the frames still readable (written whole, then renamed over it).
   */
  private setAsideDamaged(name: string, buf: Buffer, dec: DecodedSegment): void {
    const aside = `${this.dir}-damaged`;
    mkdirSync(aside, { recursive: true });
    const copy = join(aside, `${name}.${Date.now()}`);
    writeDurably(copy, buf, this.fsync);
    if (this.fsync) syncDirNow(aside);
    const good = Buffer.concat(dec.frames.map((f) => buf.subarray(f.at, f.at + f.bytes)));
    const tmp = join(this.dir, `${name}.rewrite`);
    writeDurably(tmp, good, this.fsync);
    renameSync(tmp, join(this.dir, name));
    if (this.fsync) syncDirNow(this.dir);
    this.log?.error(
      {
        segment: name,
        damagedBytes: dec.damaged.reduce((n, d) => n + d.bytes, 0),
        damagedAt: dec.damaged.map((d) => d.at),
        keptRows: dec.rows,
        copy,
        tail: dec.error,
      },
      'spool: segment damaged on disk; acknowledged records in the unreadable bytes are lost (a copy of the segment is kept); the readable ones are replayed',
    );
  }

  /**
   * Durably append `buf` (one or more whole frames holding `rows` rows, for `appends` callers): when this resolves, the
   * bytes are on disk. Rejects on a disk error (full, I/O): nothing of `buf` may be acknowledged then, and the next
   * append goes to a new segment, the failed one cut back to its last good frame. One append at a time (the caller
   * waits for each before the next, or before seal). `sync` writes on the calling thread: for a small append on a
   * thread with nothing else to do, it spares the round trips through the thread pool.
   */
  async append(buf: Buffer, rows: number, appends = 1, sync = false): Promise<void> {
    if (this.closed) throw new Error('spool is closed');
    if (buf.length === 0) return;
    try {
      if (this.broken) this.sealActive();
      const seg = this.active ?? this.createSegment();
      this.counters.writes++;
      for (let off = 0; off < buf.length; ) {
        off += sync
          ? writeSync(seg.fd, buf, off, buf.length - off, seg.bytes + off)
          : await writeAt(seg.fd, buf, off, seg.bytes + off);
      }
      if (this.fsync) this.counters.syncs++;
      seg.bytes += buf.length;
      seg.rows += rows;
    } catch (err) {
      this.broken = true;
      const e = err instanceof Error ? err : new Error(String(err));
      this.lastWriteFailure = { atMs: Date.now(), message: e.message };
      this.log?.error({ err: e, dir: this.dir }, 'spool: write failed; rejecting the batch');
      throw e;
    }
    this.counters.appends += appends;
    this.counters.bytesWritten += buf.length;
    this.lastWriteFailure = null;
  }

  /** Close the active segment for appends; returns every segment sealed since the last call (oldest first). */
  seal(): Segment[] {
    this.sealActive();
    const out = this.sealedSince;
    this.sealedSince = [];
    return out;
  }

  get activeBytes(): number {
    return this.active?.bytes ?? 0;
  }
  get activeRows(): number {
    return this.active?.rows ?? 0;
  }

  state(): SpoolState {
    const unsealed = this.sealedSince.map((x) => x.path);
    if (this.active) unsealed.push(this.active.path);
    return {
      unsealed,
      activeBytes: this.activeBytes,
      activeRows: this.activeRows,
      counters: { ...this.counters },
      lastWriteFailure: this.lastWriteFailure,
    };
  }

  /** Seal the active segment and take no more appends. Sealed files stay for the writer / next start. */
  close(): Segment[] {
    const out = this.seal();
    this.closed = true;
    return out;
  }

  private createSegment(): Active {
    const seq = this.nextSeq++;
    const path = join(this.dir, `${String(seq).padStart(12, '0')}${SUFFIX}`);
    // O_DSYNC: each write returns once its data (and the size that makes it readable) is on disk, as fdatasync would.
    const fd = openSync(
      path,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (this.fsync ? constants.O_DSYNC : 0),
      0o600,
    );
    try {
      // The new directory entry must be durable too, or a power loss could drop the whole file.
      if (this.fsync) syncDirNow(this.dir);
    } catch (e) {
      closeSync(fd);
      try {
        unlinkSync(path);
      } catch {
        /* gone with the directory */
      }
      throw e;
    }
    this.active = { seq, path, fd, bytes: 0, rows: 0 };
    return this.active;
  }

  private sealActive(): void {
    const a = this.active;
    this.broken = false;
    if (!a) return;
    this.active = null;
    // Cut off anything a failed write may have left past the last good frame.
    try {
      ftruncateSync(a.fd, a.bytes);
    } catch {
      /* the file is gone or the disk is failing: the next open cuts the tail */
    }
    try {
      closeSync(a.fd);
    } catch (e) {
      this.log?.warn({ err: e }, 'spool: closing segment failed');
    }
    if (a.rows === 0) {
      try {
        unlinkSync(a.path);
      } catch {
        /* never created, or gone */
      }
      return;
    }
    this.sealedSince.push({ seq: a.seq, path: a.path, bytes: a.bytes, rows: a.rows });
  }
}

/** One write(2) at `position`, through the thread pool (the fd is O_DSYNC: it returns once the bytes are on disk). */
function writeAt(fd: number, buf: Buffer, offset: number, position: number): Promise<number> {
  return new Promise((resolve, reject) =>
    write(fd, buf, offset, buf.length - offset, position, (err, n) => (err ? reject(err) : resolve(n))),
  );
}

/** The rows of a sealed segment, read from its file (what is unreadable is logged as lost). */
export async function loadSegment(seg: Segment, log?: SpoolLogger): Promise<StoredRecord[]> {
  const dec = decodeFrames(await readFile(seg.path));
  if (dec.error) log?.warn({ segment: seg.path, error: dec.error }, 'spool: segment has a bad tail');
  // Damaged after open() checked it: what is unreadable is lost; say so.
  if (dec.damaged.length)
    log?.error(
      { segment: seg.path, damagedAt: dec.damaged.map((d) => d.at) },
      'spool: segment damaged on disk; acknowledged records in the unreadable bytes are lost',
    );
  return dec.records;
}

function writeDurably(path: string, buf: Buffer, fsync: boolean): void {
  const fd = openSync(path, 'w', 0o600);
  try {
    writeFileSync(fd, buf);
    if (fsync) fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function syncDirNow(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
