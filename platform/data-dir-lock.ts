// One collector per DATA_DIR: two processes appending to the same spool segments would corrupt
// each other's acknowledged frames.
//
// On Linux the lock is an abstract Unix socket named after the directory's real path: binding it
// is atomic, and the kernel releases it when the process dies (a crash, a kill -9), so there is
// no stale state to detect and no takeover race. DATA_DIR/LOCK then only tells people (and the
// refused process) which pid holds it. Elsewhere LOCK itself is the lock: created whole with
// link(2) (never seen empty), taken over when its pid is gone — best effort, as two processes
// taking over the same stale lock at the same instant can both succeed.
import { hash } from 'node:crypto';
import { linkSync, readFileSync, realpathSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';

export class DataDirInUse extends Error {
  readonly owner: string;
  constructor(message: string, owner: string) {
    super(message);
    this.owner = owner;
  }
}

const held = new Map<string, { server: Server | null; count: number }>(); // this process's locks (tests restart in-process)

function inUse(dataDir: string, owner: string): DataDirInUse {
  return new DataDirInUse(
    `DATA_DIR ${dataDir} is in use by another tracegate process (pid ${owner}); stop it or use another TRACEGATE_DATA_DIR`,
    owner,
  );
}

function readOwner(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim() || 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Take the DATA_DIR lock or throw DataDirInUse; resolves to the release function. */
export async function lockDataDir(dataDir: string): Promise<() => void> {
  const real = realpathSync(dataDir);
  const path = join(real, 'LOCK');
  const mine = held.get(real);
  if (mine) {
    mine.count++;
    return once(() => release(real, path));
  }
  let server: Server | null = null;
  if (process.platform === 'linux') {
    server = await bindAbstract(`\0tracegate-data-dir-${hash('sha256', real, 'hex')}`);
    if (!server) throw inUse(dataDir, readOwner(path));
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, String(process.pid));
    renameSync(tmp, path); // informational: the socket is the lock
  } else {
    lockFile(dataDir, path);
  }
  held.set(real, { server, count: 1 });
  return once(() => release(real, path));
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (!done) {
      done = true;
      fn();
    }
  };
}

function release(real: string, path: string): void {
  const h = held.get(real);
  if (!h || --h.count > 0) return;
  held.delete(real);
  try {
    if (readFileSync(path, 'utf8') === String(process.pid)) unlinkSync(path);
  } catch {
    /* already gone */
  }
  h.server?.close();
}

/** Listen on an abstract socket; null when another process holds the name. */
function bindAbstract(name: string): Promise<Server | null> {
  return new Promise((resolve, reject) => {
    const server = createServer((sock) => sock.destroy());
    server.once('error', (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' ? resolve(null) : reject(e)));
    server.listen(name, () => {
      server.unref(); // the lock must not keep the process alive
      resolve(server);
    });
  });
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
}

/** The fallback where there are no abstract sockets. */
function lockFile(dataDir: string, path: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, String(process.pid));
  try {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        linkSync(tmp, path); // atomic, and the file is never seen without its pid
        return;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const owner = readOwner(path);
      // An unreadable lock counts as held: never delete what we cannot identify.
      if (!/^\d+$/.test(owner) || alive(Number(owner))) throw inUse(dataDir, owner);
      try {
        unlinkSync(path);
      } catch {
        /* someone else took it over first */
      }
    }
    throw new DataDirInUse(`could not take ${path}: another process keeps creating it`, 'unknown');
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      /* gone */
    }
  }
}
