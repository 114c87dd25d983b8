// Rows sent to ClickHouse as TabSeparated rather than JSONEachRow: no key to write or to match per value, and a
// string needs escaping only when it holds a backslash, tab, line break or NUL. The body is made in chunks of
// CHUNK_BYTES, so a 64 MB batch is never one string as well as one buffer.
//
// The text forms are ClickHouse's own (the same in 18.16 and current releases): a String field is "escaped" (a
// backslash before \ and the control characters that end a field or a row); an Array field is `[e1,e2]` whose
// string elements are quoted ('…', with \' and \\) and whose numbers are bare.
import { Readable } from 'node:stream';
import type { ClickHouseClient } from '@clickhouse/client';

export type TsvValue = string | number | readonly (string | number)[];

const FIELD_SPECIAL = /[\\\t\n\r\0]/;
const FIELD_SPECIAL_G = /[\\\t\n\r\0]/g;
const QUOTED_SPECIAL = /[\\'\t\n\r\0]/;
const QUOTED_SPECIAL_G = /[\\'\t\n\r\0]/g;
const ESCAPES: Record<string, string> = {
  '\\': '\\\\',
  "'": "\\'",
  '\t': '\\t',
  '\n': '\\n',
  '\r': '\\r',
  '\0': '\\0',
};
const escapeChar = (c: string) => ESCAPES[c]!;

/** Bytes per chunk of the body (a row longer than that gets a chunk large enough for it). */
const CHUNK_BYTES = 1024 * 1024;

function number(n: number, column: string): string {
  if (!Number.isFinite(n)) throw new TypeError(`${column}: not a finite number`);
  return String(n);
}

function field(v: TsvValue | undefined, column: string): string {
  if (typeof v === 'string') return FIELD_SPECIAL.test(v) ? v.replace(FIELD_SPECIAL_G, escapeChar) : v;
  if (typeof v === 'number') return number(v, column);
  if (Array.isArray(v)) {
    let s = '[';
    for (let i = 0; i < v.length; i++) {
      const e = v[i];
      if (i > 0) s += ',';
      if (typeof e === 'string') s += `'${QUOTED_SPECIAL.test(e) ? e.replace(QUOTED_SPECIAL_G, escapeChar) : e}'`;
      else if (typeof e === 'number') s += number(e, column);
      else throw new TypeError(`${column}: array element of type ${typeof e}`);
    }
    return `${s}]`;
  }
  throw new TypeError(`${column}: value of type ${typeof v}`);
}

/** One row's line (its fields in `columns` order, tab-separated, newline-terminated). */
export function tsvLine(columns: readonly string[], row: Readonly<Record<string, unknown>>): string {
  let s = '';
  for (let i = 0; i < columns.length; i++) {
    if (i > 0) s += '\t';
    s += field(row[columns[i]!] as TsvValue | undefined, columns[i]!);
  }
  return `${s}\n`;
}

/**
 * A body being written, line by line, into chunks of CHUNK_BYTES. Each line goes into the chunk as it is made:
 * joining the lines first costs ~3× as much (a long string made of many pieces is flattened, then encoded, in one
 * go). The chunks are outside V8's heap, so a body held for a while costs its garbage collector nothing.
 */
export class TsvWriter {
  private readonly chunks: Buffer[] = [];
  private chunk = Buffer.allocUnsafe(0);
  private used = 0;
  /** Set by the first row(): every later row must have the same columns. */
  columns: string[] | null = null;
  /** The byte length of the last line written. */
  lastBytes = 0;

  /** A row's line, its columns those of the first row; a row that cannot be written throws (naming its column). */
  row(row: Readonly<Record<string, unknown>>): void {
    this.line(tsvLine((this.columns ??= Object.keys(row)), row));
  }

  /** A whole line, newline included; returns where it starts (see patch). */
  line(line: string): number {
    const most = line.length * 3; // UTF-8 bytes of a UTF-16 unit, at most
    if (this.used + most > this.chunk.length) {
      if (this.used > 0) this.chunks.push(this.chunk.subarray(0, this.used));
      this.chunk = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, most));
      this.used = 0;
    }
    const at = this.chunks.length * POSITION_CHUNK + this.used;
    this.lastBytes = this.chunk.write(line, this.used);
    this.used += this.lastBytes;
    return at;
  }

  /** Overwrite the ASCII byte at a position line() returned (the line's first). */
  patch(at: number, char: string): void {
    const i = Math.floor(at / POSITION_CHUNK);
    (i === this.chunks.length ? this.chunk : this.chunks[i]!)[at % POSITION_CHUNK] = char.charCodeAt(0);
  }

  /** The body written so far, without the lines at `dropped` (positions line() returned, with their byte lengths). */
  body(dropped: ReadonlyArray<readonly [at: number, bytes: number]> = []): Buffer[] {
    const all = this.used > 0 ? [...this.chunks, this.chunk.subarray(0, this.used)] : [...this.chunks];
    if (dropped.length === 0) return all;
    const gaps = [...dropped].sort((a, b) => a[0] - b[0]);
    const out: Buffer[] = [];
    let g = 0;
    all.forEach((c, i) => {
      let from = 0;
      for (; g < gaps.length && Math.floor(gaps[g]![0] / POSITION_CHUNK) === i; g++) {
        const at = gaps[g]![0] % POSITION_CHUNK;
        if (at > from) out.push(c.subarray(from, at));
        from = at + gaps[g]![1];
      }
      if (from < c.length) out.push(c.subarray(from));
    });
    return out;
  }
}

/** A line's position: its chunk's index times this, plus its offset in the chunk. */
const POSITION_CHUNK = 2 ** 31;

/** The body in chunks; a row that cannot be written throws (naming its column). */
export function tsvChunks(
  columns: readonly string[],
  rows: ReadonlyArray<Readonly<Record<string, unknown>>>,
): Buffer[] {
  const w = new TsvWriter();
  for (const row of rows) w.line(tsvLine(columns, row));
  return w.body();
}

/** Insert rows whose columns are those of the first row (every row must have them all). */
export async function insertTsv(client: ClickHouseClient, table: string, rows: ReadonlyArray<object>): Promise<void> {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0]!);
  // Every chunk made before the request starts: a row that cannot be written then fails the insert with nothing sent
  // (an error half-way through a streamed body could leave ClickHouse the rows before it).
  await insertBody(
    client,
    table,
    columns,
    tsvChunks(columns, rows as ReadonlyArray<Readonly<Record<string, unknown>>>),
  );
}

/** Insert a body made already (TsvWriter), its lines in `columns` order. */
export async function insertBody(
  client: ClickHouseClient,
  table: string,
  columns: readonly string[],
  chunks: Buffer[],
): Promise<void> {
  if (chunks.length === 0) return;
  await client.insert({
    table,
    columns: columns as [string, ...string[]],
    format: 'TabSeparated',
    values: Readable.from(chunks, { objectMode: false }),
  });
}
