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
const ESCAPES: Record<string, string> = { '\\': '\\\\', "'": "\\'", '\t': '\\t', '\n': '\\n', '\r': '\\r', '\0': '\\0' };
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

/** The body in chunks; a row that cannot be written throws (naming its column). */
export function tsvChunks(columns: readonly string[], rows: ReadonlyArray<Readonly<Record<string, unknown>>>): Buffer[] {
  // Each line is written into the chunk as it is made: joining the lines first costs ~3× as much (a long string
  // made of many pieces is flattened, then encoded, in one go).
  const chunks: Buffer[] = [];
  let chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  let used = 0;
  for (const row of rows) {
    const line = tsvLine(columns, row);
    const most = line.length * 3; // UTF-8 bytes of a UTF-16 unit, at most
    if (used + most > chunk.length) {
      if (used > 0) chunks.push(chunk.subarray(0, used));
      chunk = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, most));
      used = 0;
    }
    used += chunk.write(line, used);
  }
  if (used > 0) chunks.push(chunk.subarray(0, used));
  return chunks;
}

/** Insert rows whose columns are those of the first row (every row must have them all). */
export async function insertTsv(client: ClickHouseClient, table: string, rows: ReadonlyArray<object>): Promise<void> {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0]!);
  // Every chunk made before the request starts: a row that cannot be written then fails the insert with nothing sent
  // (an error half-way through a streamed body could leave ClickHouse the rows before it).
  const chunks = tsvChunks(columns, rows as ReadonlyArray<Readonly<Record<string, unknown>>>);
  await client.insert({
    table,
    columns: columns as [string, ...string[]],
    format: 'TabSeparated',
    values: Readable.from(chunks, { objectMode: false }),
  });
}
