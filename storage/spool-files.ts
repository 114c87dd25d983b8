// Insert sealed spool segments (see spool/spool.ts) into storage, reading them from disk.
import { readFile } from 'node:fs/promises';
import { decodeFrames, frameRecords } from '../spool/spool.ts';
import { isEnrichment, type SpanRecord, type StoredRecord } from '../core/record.ts';
import type { EnrichmentRecord } from '../core/enrichment-records.ts';
import type { RecordBatch, Storage } from '../core/ports/storage.ts';

export interface InsertedChunk {
  rows: number;
  ms: number;
}
/** A record storage refused on its own, with storage's reason. */
export interface RefusedRecord {
  record: StoredRecord;
  error: string;
}
export interface SpoolFilesResult {
  chunks: InsertedChunk[];
  badTails: Array<{ path: string; error: string }>;
  refused: RefusedRecord[];
}

type Writer = Pick<Storage, 'insertSpans' | 'insertEnrichment' | 'ping'> & { recordBatch?: () => RecordBatch };

/**
 * Records of one insert, by the size of their frames: a frame's JSON costs several times its size as objects, so a
 * bound on records alone let one insert take hundreds of MB in the storage thread.
 */
export const MAX_INSERT_BYTES = 16 * 1024 * 1024;

/**
 * Insert every record of the files, in order, in inserts of at most maxRows rows and about MAX_INSERT_BYTES of spooled
 * JSON; idempotent, so safe to repeat. Frames are parsed as they are inserted, not a whole segment at once.
 * With `isolate`, records storage refuses on their own are returned in `refused` instead of failing the call.
 */
export async function insertSpoolFiles(
  storage: Writer,
  paths: string[],
  maxRows: number,
  isolate = false,
  maxBytes = MAX_INSERT_BYTES,
): Promise<SpoolFilesResult> {
  const result: SpoolFilesResult = { chunks: [], badTails: [], refused: [] };
  // Where storage encodes records as they come (ClickHouse), they are added as they are parsed and never held as
  // objects until the insert. Isolating a bad record needs them as objects.
  const newBatch = !isolate && storage.recordBatch ? () => storage.recordBatch!() : null;
  let batch = newBatch?.() ?? null;
  let rows: StoredRecord[] = [];
  let count = 0;
  let bytes = 0;
  const flush = async () => {
    if (count === 0) return;
    const t0 = performance.now();
    if (batch) {
      const full = batch;
      batch = newBatch!();
      await full.finish();
    } else if (isolate) result.refused.push(...(await insertIsolating(storage, rows)));
    else await insertRecords(storage, rows);
    result.chunks.push({ rows: count, ms: performance.now() - t0 });
    rows = [];
    count = 0;
    bytes = 0;
  };
  for (const path of paths) {
    const buf = await readFile(path);
    const dec = decodeFrames(buf, false); // where the good frames are; parsed one at a time below
    if (dec.error) result.badTails.push({ path, error: dec.error });
    // Damaged after the spool opened it (open() sets damage aside): what is unreadable is lost; say so.
    if (dec.damaged.length)
      result.badTails.push({
        path,
        error: `damaged on disk: unreadable bytes skipped at ${dec.damaged.map((d) => d.at).join(', ')}; acknowledged records in them are lost`,
      });
    for (const f of dec.frames) {
      // A frame is one request's batch, up to the largest body limit (an agents export of ~100 MB): its records count
      // for its bytes one by one, so that one large frame is inserted in parts too (DuckDB ran out of its memory
      // limit inserting one whole).
      const records = frameRecords(buf, f);
      const each = f.bytes / Math.max(1, records.length);
      for (const r of records) {
        if (batch) batch.add(r);
        else rows.push(r);
        bytes += each;
        if (++count >= maxRows || bytes >= maxBytes) await flush();
      }
    }
  }
  await flush();
  return result;
}

/** Spans and enrichment go to their own tables; both inserts are idempotent, so a retry after a partial failure is safe. */
export async function insertRecords(
  storage: Pick<Storage, 'insertSpans' | 'insertEnrichment'>,
  rows: StoredRecord[],
): Promise<void> {
  const spans: SpanRecord[] = [];
  const extra: EnrichmentRecord[] = [];
  for (const r of rows) {
    if (isEnrichment(r)) extra.push(r);
    else spans.push(r);
  }
  if (spans.length) await storage.insertSpans(spans);
  if (extra.length) await storage.insertEnrichment(extra);
}

/**
 * Insert rows, setting aside those storage refuses: an insert failing with a data error (isDataError) is halved
 * until each failure stands alone. A lone record is set aside only when storage names bad data AND accepted some
 * of its batch-mates, so storage is known to work. Anything else (storage down or overloaded, a schema that
 * refuses everything) propagates and every row stays spooled; a lone bad record with no batch-mates waits for the
 * next batch that shares its insert.
 */
export async function insertIsolating(storage: Writer, rows: StoredRecord[]): Promise<RefusedRecord[]> {
  const alone: Array<{ record: StoredRecord; err: unknown }> = [];
  let written = 0;
  const attempt = async (part: StoredRecord[]): Promise<void> => {
    try {
      await insertRecords(storage, part);
      written += part.length;
    } catch (err) {
      if (!isDataError(err) || !(await storage.ping().catch(() => false))) throw err;
      if (part.length === 1) {
        alone.push({ record: part[0]!, err });
        return;
      }
      const mid = part.length >> 1;
      await attempt(part.slice(0, mid));
      await attempt(part.slice(mid));
    }
  };
  await attempt(rows);
  if (alone.length && written === 0) throw alone[0]!.err;
  return alone.map((a) => ({ record: a.record, error: a.err instanceof Error ? a.err.message : String(a.err) }));
}

// ClickHouse error codes that mean "this data", not "this server": cannot parse, type mismatch, out of bound,
// cannot convert, incorrect data, too large a value or query (the escaped-literal case), syntax of a literal.
const CLICKHOUSE_DATA_CODES = new Set([
  '6',
  '26',
  '27',
  '32',
  '38',
  '41',
  '53',
  '62',
  '69',
  '70',
  '72',
  '117',
  '130',
  '131',
  '190',
]);
const DUCKDB_DATA_ERRORS = /^(Conversion|Constraint|Invalid Input|Out of Range|Mismatch Type) Error/;

/** True when an insert error is about the rows themselves, so retrying them can never succeed. */
export function isDataError(err: unknown): boolean {
  if (err instanceof RangeError || err instanceof TypeError) return true; // our own codec refused a value
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e?.code === 'string' && CLICKHOUSE_DATA_CODES.has(e.code)) return true;
  // DuckDB's error classes, and its node binding's BigInt conversion
  return (
    typeof e?.message === 'string' && (DUCKDB_DATA_ERRORS.test(e.message) || /^bigint out of \w+ range/.test(e.message))
  );
}
