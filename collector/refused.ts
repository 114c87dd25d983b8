// Records storage refused on their own (see storage/spool-files.ts insertIsolating): written durably to
// DATA_DIR/refused as NDJSON, one { atMs, error, record } per line, before their spool segment is removed.
// Records in the spool were already processed, so redacted text stays redacted here too.
import { hash } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RefusedRecord } from '../storage/spool-files.ts';
import type { StoredRecord } from './record.ts';
import { encodeFrame, syncDir } from './spool.ts';

/**
 * Named after the spool segment the records were in plus a hash of the records: a retry after a crash (file
 * written, segment not yet removed) rewrites the same file instead of adding a second copy, while a later
 * segment that reuses the number (numbering restarts with an empty spool) gets a file of its own.
 */
export async function writeRefused(dir: string, segment: string, refused: RefusedRecord[]): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const atMs = Date.now();
  const digest = hash('sha256', JSON.stringify(refused.map((r) => r.record)), 'hex').slice(0, 16);
  const file = join(dir, `${segment}-${digest}.ndjson`);
  await writeWhole(file, refused.map((r) => JSON.stringify({ atMs, error: r.error, record: r.record })).join('\n') + '\n');
  return file;
}

/** Durably, under a temporary name first ('w': a crash may have left one), so a reader never sees a partial file. */
async function writeWhole(file: string, data: string | Buffer): Promise<void> {
  const fh = await open(`${file}.tmp`, 'w', 0o600);
  try {
    await fh.writeFile(data);
    await fh.datasync();
  } finally {
    await fh.close();
  }
  await rename(`${file}.tmp`, file);
  await syncDir(dirname(file));
}

export interface RefusedFile { name: string; records: number; firstError: string }

/** The files in DATA_DIR/refused, by name. */
export async function listRefused(dataDir: string): Promise<RefusedFile[]> {
  const dir = join(dataDir, 'refused');
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.ndjson')).sort();
  const out: RefusedFile[] = [];
  for (const name of names) {
    const lines = (await readFile(join(dir, name), 'utf8')).split('\n').filter((l) => l.trim());
    out.push({ name, records: lines.length, firstError: lines.length ? String((JSON.parse(lines[0]!) as { error: unknown }).error) : '' });
  }
  return out;
}

/**
 * Move refused records back into the spool as a new segment, for the next start to replay (after the cause was
 * fixed). Only with the collector stopped: the caller holds the DATA_DIR lock. Records refused again return to
 * DATA_DIR/refused. The segment is durable before the refused file is deleted.
 */
export async function requeueRefused(dataDir: string, names?: string[]): Promise<{ files: number; records: number }> {
  const dir = join(dataDir, 'refused');
  const spoolDir = join(dataDir, 'spool');
  await mkdir(spoolDir, { recursive: true });
  const all = (await listRefused(dataDir)).map((f) => f.name);
  const chosen = names?.length ? names : all;
  for (const n of chosen) if (!all.includes(n)) throw new Error(`no refused file ${n} in ${dir}`);
  let records = 0;
  for (const name of chosen) {
    const rows = (await readFile(join(dir, name), 'utf8')).split('\n').filter((l) => l.trim())
      .map((l) => (JSON.parse(l) as { record: StoredRecord }).record);
    const segs = (await readdir(spoolDir)).filter((n) => /^\d+\.seg$/.test(n)).sort();
    const seq = segs.length ? Number(segs[segs.length - 1]!.slice(0, -4)) + 1 : 1;
    const seg = join(spoolDir, `${String(seq).padStart(12, '0')}.seg`);
    const frames: Buffer[] = [];
    for (let i = 0; i < rows.length; i += 1000) frames.push(encodeFrame(rows.slice(i, i + 1000)));
    await writeWhole(seg, Buffer.concat(frames));
    await unlink(join(dir, name));
    await syncDir(dir);
    records += rows.length;
  }
  return { files: chosen.length, records };
}
