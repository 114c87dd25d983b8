// A small JSON state file rewritten whole (temp file, fsync, rename) at most once a second after a change, and
// at once on flush(). Used for the chain heads and the last-known keys and settings.
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

const WRITE_EVERY_MS = 1000;

export class JsonSnapshot {
  private readonly path: string;
  private readonly value: () => unknown;
  private dirty = false;
  private lastWrite = 0;
  private timer: NodeJS.Timeout | null = null;

  /** `value` is read when the file is written, so it always holds the newest state. */
  constructor(path: string, value: () => unknown) {
    this.path = path;
    this.value = value;
  }

  /** Something changed: write within a second. */
  changed(): void {
    this.dirty = true;
    if (this.timer) return;
    this.timer = setTimeout(() => { this.timer = null; this.write(); }, Math.max(0, this.lastWrite + WRITE_EVERY_MS - Date.now()));
    this.timer.unref();
  }

  /** Write now if anything changed (at shutdown). */
  flush(): void {
    if (this.timer) { clearTimeout(this.timer); this.timer = null; }
    this.write();
  }

  private write(): void {
    if (!this.dirty) return;
    this.dirty = false;
    this.lastWrite = Date.now();
    try {
      mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
      const fd = openSync(`${this.path}.tmp`, 'w', 0o600);
      try { writeSync(fd, JSON.stringify(this.value())); fsyncSync(fd); } finally { closeSync(fd); }
      renameSync(`${this.path}.tmp`, this.path);
    } catch {
      this.dirty = true; // a state file: the next change or flush tries again
    }
  }
}
