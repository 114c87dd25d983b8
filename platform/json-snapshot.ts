// A small JSON state file rewritten whole (temp file, fsync, rename) at most once a second after a change, and
// at once on flush(). Used for the chain heads and the last-known keys and settings.
// Writes go through the thread pool: an fsync under ingest load took ~10 ms, and on the main thread it stalled
// every request in flight. One write at a time, so an older state never renames over a newer one.
import { mkdir, open, rename } from 'node:fs/promises';
import { dirname } from 'node:path';

const WRITE_EVERY_MS = 1000;

export class JsonSnapshot {
  private readonly path: string;
  private readonly value: () => unknown;
  private dirty = false;
  private lastWrite = 0;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;
  private readonly everyMs: number;

  /** `value` is read when the file is written, so it always holds the newest state. */
  constructor(path: string, value: () => unknown, everyMs = WRITE_EVERY_MS) {
    this.path = path;
    this.value = value;
    this.everyMs = everyMs;
  }

  /** Something changed: write within a second. */
  changed(): void {
    this.dirty = true;
    if (this.timer || this.writing) return; // the write under way schedules the next one
    this.timer = setTimeout(
      () => {
        this.timer = null;
        void this.write();
      },
      Math.max(0, this.lastWrite + this.everyMs - Date.now()),
    );
    this.timer.unref();
  }

  /** Write now if anything changed (at shutdown), after the write under way. */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    await this.writing;
    await this.write(false);
  }

  /** `next`: a change made while this write runs schedules the next one (timed writes); flush() needs none. */
  private write(next = true): Promise<void> {
    if (!this.dirty) return Promise.resolve();
    this.dirty = false;
    this.lastWrite = Date.now();
    let failed = false;
    this.writing = (async () => {
      const text = JSON.stringify(this.value());
      await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
      const fh = await open(`${this.path}.tmp`, 'w', 0o600);
      try {
        await fh.writeFile(text);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(`${this.path}.tmp`, this.path);
    })()
      .catch(() => {
        this.dirty = true;
        failed = true;
      }) // a state file: the next change or flush tries again
      .finally(() => {
        this.writing = null;
        if (next && this.dirty && !failed) this.changed();
      });
    return this.writing;
  }
}
