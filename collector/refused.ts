// Records storage refused on their own (see storage/spool-files.ts insertIsolating): written durably to
// DATA_DIR/refused as NDJSON, one { atMs, error, record } per line, before their spool segment is removed.
// Records in the spool were already processed, so redacted text stays redacted here too.
import { mkdir, open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { RefusedRecord } from '../storage/spool-files.ts';

/**
 * `name` comes from the spool segment the records were in: a retry after a crash (file written, segment not yet
 * removed) rewrites the same file instead of adding a second copy.
 */
export async function writeRefused(dir: string, name: string, refused: RefusedRecord[]): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const atMs = Date.now();
  const file = join(dir, `${name}.ndjson`);
  const text = refused.map((r) => JSON.stringify({ atMs, error: r.error, record: r.record })).join('\n') + '\n';
  // Written whole under a temporary name, then renamed: a reader never sees a partial file.
  const fh = await open(`${file}.tmp`, 'w', 0o600); // 'w': a crash may have left one behind
  try {
    await fh.writeFile(text);
    await fh.datasync();
  } finally {
    await fh.close();
  }
  await rename(`${file}.tmp`, file);
  const d = await open(dir, 'r');
  try { await d.sync(); } finally { await d.close(); }
  return file;
}
