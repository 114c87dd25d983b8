// Insert sealed spool segments (see collector/spool.ts) into storage, reading them from disk.
import { readFile } from 'node:fs/promises';
import { decodeFrames } from '../collector/spool.ts';
import { isEnrichment, type SpanRecord, type StoredRecord } from '../collector/record.ts';
import type { EnrichmentRecord } from '../collector/enrichment-records.ts';
import type { Storage } from './types.ts';

export interface InsertedChunk { rows: number; ms: number }
export interface SpoolFilesResult { chunks: InsertedChunk[]; badTails: Array<{ path: string; error: string }> }

/** Insert every record of the files, in order, in inserts of at most maxRows; idempotent, so safe to repeat. */
export async function insertSpoolFiles(storage: Pick<Storage, 'insertSpans' | 'insertEnrichment'>, paths: string[], maxRows: number): Promise<SpoolFilesResult> {
  const result: SpoolFilesResult = { chunks: [], badTails: [] };
  let rows: StoredRecord[] = [];
  const flush = async () => {
    if (!rows.length) return;
    const t0 = performance.now();
    await insertRecords(storage, rows);
    result.chunks.push({ rows: rows.length, ms: performance.now() - t0 });
    rows = [];
  };
  for (const path of paths) {
    const dec = decodeFrames(await readFile(path));
    if (dec.error) result.badTails.push({ path, error: dec.error });
    for (const r of dec.records) {
      rows.push(r);
      if (rows.length >= maxRows) await flush();
    }
  }
  await flush();
  return result;
}

/** Spans and enrichment go to their own tables; both inserts are idempotent, so a retry after a partial failure is safe. */
export async function insertRecords(storage: Pick<Storage, 'insertSpans' | 'insertEnrichment'>, rows: StoredRecord[]): Promise<void> {
  const spans: SpanRecord[] = [];
  const extra: EnrichmentRecord[] = [];
  for (const r of rows) {
    if (isEnrichment(r)) extra.push(r);
    else spans.push(r);
  }
  if (spans.length) await storage.insertSpans(spans);
  if (extra.length) await storage.insertEnrichment(extra);
}
