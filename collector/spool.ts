// Write-ahead spool: acknowledged records live here until storage has them.
//
// Layout: `${dir}/<seq>.seg`, one active segment (appended to) and sealed ones
// (waiting for the writer). A segment is a run of frames:
//   [u32 payload length][u32 row count][u32 crc32(row count + payload)][payload: JSON array of records]
// A crash can tear only the tail (we never write after a failed write: see fail()), so on open a bad
// frame with nothing valid after it ends the segment: it was never acknowledged. A bad frame with good
// frames after it is damage (a flipped byte on disk): open() sets a copy of the segment aside in
// `${dir}-damaged`, logs the loss, and keeps every frame it can still read.
//
// Group commit: appends queued while writes are in flight go out together as one write and one
// fdatasync; up to MAX_INFLIGHT groups overlap, acknowledged in order, each caller only after
// its bytes (and every byte before them) are synced.
import { open, readdir, readFile, rename, stat, truncate, unlink, mkdir, writeFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import type { StoredRecord } from './record.ts';

export interface SpoolLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface SpoolOptions {
  dir: string;
  /** false skips fdatasync: acknowledged data can be lost on power failure. Benchmarks only. */
  fsync: boolean;
  /** Keep an in-memory copy of each segment's rows for the writer (false when it reads the files itself). */
  keepRecords?: boolean;
  logger?: SpoolLogger;
}

export interface Segment {
  readonly seq: number;
  readonly path: string;
  bytes: number;
  rows: number;
  /** In-memory copy of the rows; null when dropped to bound memory (re-read from the file). */
  records: StoredRecord[] | null;
}

export interface SpoolCounters {
  appends: number;     // append() calls written
  writes: number;      // write syscalls (one per group)
  syncs: number;       // fdatasync calls (one per group when fsync is on)
  bytesWritten: number;
}

const HEADER = 12;
const SUFFIX = '.seg';

/**
 * One frame. The JSON is written straight into the frame (no intermediate buffer). `own`: the frame gets its own
 * ArrayBuffer instead of a slice of Node's shared pool, so a worker thread can transfer it without a copy.
 */
export function encodeFrame(records: StoredRecord[], own = false): Buffer {
  const json = framePayload(records); // well-formed (lone surrogates escaped or replaced), so the UTF-8 length is exact
  const length = Buffer.byteLength(json);
  const frame = own ? Buffer.allocUnsafeSlow(HEADER + length) : Buffer.allocUnsafe(HEADER + length);
  frame.write(json, HEADER);
  frame.writeUInt32LE(length, 0);
  frame.writeUInt32LE(records.length, 4);
  frame.writeUInt32LE(crc32(frame.subarray(HEADER), crc32(frame.subarray(4, 8))), 8);
  return frame;
}

/**
 * JSON already written for a record: the verification processor's canonical form, i.e. JSON of the same data
 * with every object's keys sorted (so attributes reach storage, and the read API, in key order: OpenTelemetry
 * gives attribute order no meaning). The frame reuses it instead of serializing the record a second time (an
 * OTLP GenAI span: about 25 µs).
 */
const knownJson = new WeakMap<object, string>();
export function rememberJson(record: object, json: string): void { knownJson.set(record, json); }

function framePayload(records: StoredRecord[]): string {
  let known = false;
  for (const r of records) if (knownJson.has(r)) { known = true; break; }
  if (!known) return JSON.stringify(records);
  let out = '[';
  for (let i = 0; i < records.length; i++) out += (i ? ',' : '') + (knownJson.get(records[i]!) ?? JSON.stringify(records[i]));
  return out + ']';
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
  return crc32(buf.subarray(off + HEADER, off + HEADER + len), crc32(buf.subarray(off + 4, off + 8))) === buf.readUInt32LE(off + 8);
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

/** Decode frames; `parse: false` only validates and counts rows (cheap scan on open). */
export function decodeFrames(buf: Buffer, parse = true): DecodedSegment {
  const records: StoredRecord[] = [];
  const damaged: DecodedSegment['damaged'] = [];
  const frames: DecodedSegment['frames'] = [];
  let off = 0;
  let rows = 0;
  let error: string | null = null;
  while (off < buf.length) {
    if (buf.length - off < HEADER) { error = `truncated frame header at ${off}`; break; }
    if (!frameAt(buf, off)) {
      const next = resync(buf, off);
      // A run of zeros is a hole, not damage: a write that never landed while a later group's did (groups overlap,
      // acknowledged in order), so nothing from here on was acknowledged. JSON frames hold no such run.
      if (next >= 0 && zeroRun(buf, off, next)) { error = `unwritten bytes at ${off}`; break; }
      if (next < 0) { error = buf.length - off - HEADER < buf.readUInt32LE(off) ? `truncated frame at ${off}` : `checksum mismatch at ${off}`; break; }
      damaged.push({ at: off, bytes: next - off });
      off = next;
      continue;
    }
    const len = buf.readUInt32LE(off);
    if (parse) {
      const batch = JSON.parse(buf.subarray(off + HEADER, off + HEADER + len).toString('utf8')) as StoredRecord[];
      for (const r of batch) records.push(r);
    }
    rows += buf.readUInt32LE(off + 4);
    frames.push({ at: off, bytes: HEADER + len });
    off += HEADER + len;
  }
  return { records, rows, validBytes: off, error, damaged, frames };
}

interface Pending { frame: Buffer; rows: number; records: StoredRecord[] | null; resolve: () => void; reject: (e: Error) => void }
interface Active extends Segment { fh: FileHandle; /** End of the last write issued (bytes = end of the last acknowledged one). */ reserved: number }
interface Group { seg: Active; batch: Pending[]; bytes: number; error: Error | null; done: boolean; settled: Promise<void> }

/** Group commits whose write+fdatasync may overlap. */
const MAX_INFLIGHT = 4;

export class Spool {
  readonly dir: string;
  readonly counters: SpoolCounters = { appends: 0, writes: 0, syncs: 0, bytesWritten: 0 };
  private readonly fsync: boolean;
  private readonly keepRecords: boolean;
  private readonly log: SpoolLogger | undefined;
  private sealed: Segment[] = [];
  private active: Active | null = null; // opened lazily on the first write after a seal
  private sealing: Active | null = null; // between leaving `active` and joining `sealed`
  private nextSeq = 1;
  private queue: Pending[] = [];
  private queuedBytes = 0;
  private sealWaiters: Array<(seg: Segment | null) => void> = [];
  private inflight: Group[] = [];
  private draining = false;
  private wake: (() => void) | null = null;
  private wakeQueued = false;
  private drained: Promise<void> = Promise.resolve();
  private broken = false; // last write/sync failed: never append after it (keeps damage at the tail)
  /** When the last append failed (disk full, I/O error), until one succeeds again: readiness reports it. */
  lastWriteFailure: { atMs: number; message: string } | null = null;
  private closed = false;

  constructor(opts: SpoolOptions) {
    this.dir = opts.dir;
    this.fsync = opts.fsync;
    this.keepRecords = opts.keepRecords ?? true;
    this.log = opts.logger;
  }

  /** Create the directory and take over segments left by a previous process (oldest first). */
  async open(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const all = await readdir(this.dir);
    // A rewrite of a damaged segment cut short by a crash: the segment itself is still whole.
    for (const n of all) if (/^\d+\.seg\.rewrite$/.test(n)) await unlink(join(this.dir, n));
    const names = all.filter((n) => /^\d+\.seg$/.test(n)).sort();
    for (const name of names) {
      const seq = Number(name.slice(0, -SUFFIX.length));
      const path = join(this.dir, name);
      const buf = await readFile(path);
      const dec = decodeFrames(buf, false);
      if (dec.damaged.length) await this.setAsideDamaged(name, buf, dec);
      else if (dec.error) {
        // A torn tail: the write never completed, so it was never acknowledged.
        this.log?.warn({ segment: name, error: dec.error, keptBytes: dec.validBytes }, 'spool: ignoring torn tail of segment');
        await truncate(path, dec.validBytes);
      }
      if (dec.rows === 0) { await unlink(path); continue; }
      const bytes = dec.frames.reduce((n, f) => n + f.bytes, 0); // = validBytes unless damage was cut out
      this.sealed.push({ seq, path, bytes, rows: dec.rows, records: null });
      this.nextSeq = Math.max(this.nextSeq, seq + 1);
    }
    if (this.sealed.length) {
      this.log?.info({ segments: this.sealed.length, rows: this.pendingRows }, 'spool: recovered segments to replay');
    }
  }

  /**
   * Frames lost in the middle of a segment were acknowledged: keep a copy of the file as it was, log the loss at
   * error level, and rewrite the segment with the frames still readable (written whole, then renamed over it).
   */
  private async setAsideDamaged(name: string, buf: Buffer, dec: DecodedSegment): Promise<void> {
    const aside = `${this.dir}-damaged`;
    await mkdir(aside, { recursive: true });
    const copy = join(aside, `${name}.${Date.now()}`);
    await writeFile(copy, buf);
    if (this.fsync) { const c = await open(copy, 'r'); try { await c.datasync(); } finally { await c.close(); } await syncDir(aside); }
    const good = Buffer.concat(dec.frames.map((f) => buf.subarray(f.at, f.at + f.bytes)));
    const tmp = join(this.dir, `${name}.rewrite`);
    const fh = await open(tmp, 'w');
    try { await fh.writeFile(good); if (this.fsync) await fh.datasync(); } finally { await fh.close(); }
    await rename(tmp, join(this.dir, name));
    if (this.fsync) await syncDir(this.dir);
    this.log?.error({ segment: name, damagedBytes: dec.damaged.reduce((n, d) => n + d.bytes, 0), damagedAt: dec.damaged.map((d) => d.at), keptRows: dec.rows, copy, tail: dec.error },
      'spool: segment damaged on disk; acknowledged records in the unreadable bytes are lost (a copy of the segment is kept); the readable ones are replayed');
  }

  /** Durably append one batch; resolves after it is synced, rejects (never acknowledges) on disk errors. */
  append(records: StoredRecord[]): Promise<void> {
    return this.enqueue(encodeFrame(records), records.length, records);
  }

  /** Durably append a frame encoded elsewhere (encodeFrame); only when the spool keeps no in-memory copy. */
  appendFrame(frame: Buffer, rows: number): Promise<void> {
    if (this.keepRecords) return Promise.reject(new Error('appendFrame needs a spool without in-memory records'));
    return this.enqueue(frame, rows, null);
  }

  private enqueue(frame: Buffer, rows: number, records: StoredRecord[] | null): Promise<void> {
    if (this.closed) return Promise.reject(new Error('spool is closed'));
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ frame, rows, records, resolve, reject });
      this.queuedBytes += frame.length;
      this.schedule();
    });
  }

  /** Close the active segment for appends and hand it over; null when it holds nothing. */
  seal(): Promise<Segment | null> {
    return new Promise((resolve) => {
      this.sealWaiters.push(resolve);
      this.schedule();
    });
  }

  /** Sealed segments in append order. */
  sealedSegments(): readonly Segment[] { return this.sealed; }

  /** The rows of a sealed segment, from memory or from its file. */
  async load(seg: Segment): Promise<StoredRecord[]> {
    if (seg.records) return seg.records;
    const dec = decodeFrames(await readFile(seg.path));
    if (dec.error) this.log?.warn({ segment: seg.path, error: dec.error }, 'spool: segment has a bad tail');
    // Damaged after open() checked it: what is unreadable is lost; say so.
    if (dec.damaged.length) this.log?.error({ segment: seg.path, damagedAt: dec.damaged.map((d) => d.at) }, 'spool: segment damaged on disk; acknowledged records in the unreadable bytes are lost');
    return dec.records;
  }

  /** Delete a sealed segment once storage has its rows. */
  async remove(seg: Segment): Promise<void> {
    const i = this.sealed.indexOf(seg);
    if (i < 0) return;
    await unlink(seg.path).catch((e: NodeJS.ErrnoException) => { if (e.code !== 'ENOENT') throw e; });
    this.sealed.splice(i, 1);
  }

  /** Bytes on disk (sealed + active) plus bytes queued for the next write. */
  get totalBytes(): number {
    let n = this.queuedBytes + (this.active?.bytes ?? 0) + (this.sealing?.bytes ?? 0);
    for (const s of this.sealed) n += s.bytes;
    return n;
  }
  get segmentCount(): number { return this.sealed.length + (this.active ? 1 : 0); }
  get activeRows(): number { return this.active?.rows ?? 0; }
  get activeBytes(): number { return this.active?.bytes ?? 0; }
  get pendingRows(): number {
    let n = this.activeRows + (this.sealing?.rows ?? 0);
    for (const s of this.sealed) n += s.rows;
    return n;
  }

  /** Finish queued appends and close the active file. Sealed files stay for the writer / next start. */
  async close(): Promise<void> {
    this.closed = true;
    await this.drained;
    const seg = await this.sealNow();
    // An unflushed segment stays on disk; the next open() replays it.
    if (seg) seg.records = null;
  }

  private schedule(): void {
    if (this.draining) {
      // The running loop may be waiting on a sync: wake it (once per I/O phase) to start another group.
      if (this.wake && !this.wakeQueued) {
        this.wakeQueued = true;
        setImmediate(() => { this.wakeQueued = false; this.wake?.(); });
      }
      return;
    }
    this.draining = true;
    // setImmediate, not a microtask: lets appends from this whole I/O phase join one group.
    this.drained = new Promise((done) => setImmediate(() => {
      this.drain().catch((err: unknown) => this.log?.error({ err }, 'spool: drain loop failed')).finally(done);
    }));
  }

  private async drain(): Promise<void> {
    try {
      for (;;) {
        if (this.sealWaiters.length && !this.inflight.length) {
          const waiters = this.sealWaiters;
          this.sealWaiters = [];
          const seg = await this.sealNow().catch(() => null); // sealNow only logs; belt and braces
          for (const w of waiters) w(seg);
        } else if (this.queue.length && this.inflight.length < MAX_INFLIGHT && !this.broken && !this.sealWaiters.length) {
          const batch = this.queue;
          this.queue = [];
          await this.startGroup(batch);
        } else if (this.inflight.length) {
          // Until the oldest group settles (a slot frees, a seal can run) or a new append arrives.
          await new Promise<void>((resolve) => { this.wake = resolve; void this.inflight[0]!.settled.then(resolve); });
          this.wake = null;
        } else if (this.broken && this.queue.length) {
          await this.sealNow(); // the tail is unknown after a failure: continue in a new segment
        } else {
          return;
        }
      }
    } finally {
      this.draining = false;
    }
  }

  /**
   * Write one group at the next offset and fdatasync it, without waiting for groups already in
   * flight: up to MAX_INFLIGHT syncs overlap, so a slow disk flush does not idle the process.
   * Groups are acknowledged strictly in order (settleInOrder), and a failed group fails every later
   * one, so an acknowledged frame is never preceded by a hole.
   */
  private async startGroup(batch: Pending[]): Promise<void> {
    let bytes = 0;
    for (const p of batch) bytes += p.frame.length;
    let seg: Active;
    try {
      seg = this.active ?? (await this.createSegment());
    } catch (err) {
      this.fail(batch, bytes, err);
      return;
    }
    const buf = batch.length === 1 ? batch[0]!.frame : Buffer.concat(batch.map((p) => p.frame), bytes);
    const offset = seg.reserved;
    seg.reserved += buf.length;
    const g: Group = { seg, batch, bytes, error: null, done: false, settled: Promise.resolve() };
    g.settled = (async () => {
      try {
        this.counters.writes++;
        const { bytesWritten } = await seg.fh.write(buf, 0, buf.length, offset);
        if (bytesWritten !== buf.length) throw new Error(`short write to spool (${bytesWritten} of ${buf.length} bytes)`);
        if (this.fsync) { this.counters.syncs++; await seg.fh.datasync(); }
      } catch (err) {
        g.error = err instanceof Error ? err : new Error(String(err));
      }
      g.done = true;
      this.settleInOrder();
    })();
    this.inflight.push(g);
  }

  private settleInOrder(): void {
    while (this.inflight.length && this.inflight[0]!.done) {
      const g = this.inflight.shift()!;
      if (g.error || this.broken) {
        this.fail(g.batch, g.bytes, g.error ?? new Error('an earlier spool write failed'));
        continue;
      }
      g.seg.bytes += g.bytes;
      for (const p of g.batch) { g.seg.rows += p.rows; if (g.seg.records && p.records) for (const r of p.records) g.seg.records.push(r); }
      this.counters.appends += g.batch.length;
      this.counters.bytesWritten += g.bytes;
      this.queuedBytes -= g.bytes;
      for (const p of g.batch) p.resolve();
      this.lastWriteFailure = null;
    }
  }

  /** After a failed write or sync the file's tail is unknown: reject, and seal before the next write. */
  private fail(batch: Pending[], bytes: number, err: unknown): void {
    this.broken = true;
    this.queuedBytes -= bytes;
    const e = err instanceof Error ? err : new Error(String(err));
    this.lastWriteFailure = { atMs: Date.now(), message: e.message };
    this.log?.error({ err: e, dir: this.dir }, 'spool: write failed; rejecting the batch');
    for (const p of batch) p.reject(e);
  }

  private async createSegment(): Promise<Active> {
    const seq = this.nextSeq++;
    const path = join(this.dir, `${String(seq).padStart(12, '0')}${SUFFIX}`);
    const fh = await open(path, 'wx');
    try {
      // The new directory entry must be durable too, or a power loss could drop the whole file.
      if (this.fsync) await syncDir(this.dir);
    } catch (e) {
      await fh.close().catch(() => {});
      await unlink(path).catch(() => {});
      throw e;
    }
    this.active = { seq, path, fh, bytes: 0, reserved: 0, rows: 0, records: this.keepRecords ? [] : null };
    return this.active;
  }

  /** Only from the drain loop with nothing in flight (or close after it). */
  private async sealNow(): Promise<Segment | null> {
    const a = this.active;
    this.broken = false;
    if (!a) return null;
    this.active = null;
    this.sealing = a; // still counted in pendingRows while it is closed
    try {
      // Cut off anything a failed write may have left past the last good frame.
      await a.fh.truncate(a.bytes).catch(() => {});
      await a.fh.close().catch((e: unknown) => this.log?.warn({ err: e }, 'spool: closing segment failed'));
      if (a.rows === 0) { await unlink(a.path).catch(() => {}); return null; }
      const seg: Segment = { seq: a.seq, path: a.path, bytes: a.bytes, rows: a.rows, records: a.records };
      this.sealed.push(seg);
      return seg;
    } finally {
      this.sealing = null;
    }
  }
}

export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try { await fh.sync(); } finally { await fh.close(); }
}

/** Size of the files in a spool directory (for tests and tooling). */
export async function spoolDirBytes(dir: string): Promise<number> {
  let n = 0;
  for (const name of await readdir(dir)) if (name.endsWith(SUFFIX)) n += (await stat(join(dir, name))).size;
  return n;
}
