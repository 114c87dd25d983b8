// One collector per DATA_DIR: two processes appending to the same spool segments would corrupt
// each other's acknowledged frames. The lock is a file holding the owner's pid, created with
// O_EXCL; a lock left by a process that is gone (a crash, a kill -9) is taken over.
import { openSync, readFileSync, unlinkSync, writeSync, closeSync } from 'node:fs';
import { join } from 'node:path';

export class DataDirInUse extends Error {}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
  // A reused pid (after a reboot or in a new container) belongs to some other program.
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('tracegate');
  } catch {
    return true; // no /proc: trust kill(0)
  }
}

/** Take DATA_DIR/LOCK or throw DataDirInUse; returns the release function. */
export function lockDataDir(dataDir: string): () => void {
  const path = join(dataDir, 'LOCK');
  const mine = String(process.pid);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, mine);
      closeSync(fd);
      return () => {
        try {
          if (readFileSync(path, 'utf8') === mine) unlinkSync(path);
        } catch { /* already gone */ }
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    let owner = NaN;
    try {
      owner = Number(readFileSync(path, 'utf8').trim());
    } catch { /* vanished: retry */ }
    // The same process may start again on its own directory (tests restart in-process).
    if (owner !== process.pid && alive(owner)) {
      throw new DataDirInUse(`DATA_DIR ${dataDir} is in use by another tracegate process (pid ${owner}); stop it or use another TRACEGATE_DATA_DIR`);
    }
    try { unlinkSync(path); } catch { /* someone else took it over first */ }
  }
  throw new DataDirInUse(`could not take ${path}: another process keeps creating it`);
}
