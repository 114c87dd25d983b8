// Rows collected column by column and handed to DuckDB as data chunks: about half the cost of the
// row appender's one native call per value (measured: 35 → 19 µs per 30-column span row).
// It offers the appender methods the row writers use, so the same writer feeds either.
import { DuckDBDataChunk, listValue, type DuckDBConnection, type DuckDBType, type DuckDBValue } from '@duckdb/node-api';

type Appender = Awaited<ReturnType<DuckDBConnection['createAppender']>>;
const CHUNK_ROWS = 2048; // DuckDB's vector size: one data chunk holds at most this many rows

export class ColumnRows {
  private readonly types: DuckDBType[];
  private readonly columns: DuckDBValue[][];
  private column = 0;
  rows = 0;

  constructor(types: DuckDBType[]) {
    this.types = types;
    this.columns = types.map(() => []);
  }

  private push(v: DuckDBValue): void {
    const col = this.columns[this.column++];
    if (!col) throw new Error(`row has more than ${this.types.length} values`);
    col.push(v);
  }

  appendVarchar(v: string): void { this.push(v); }
  appendBigInt(v: bigint): void { this.push(v); }
  appendUBigInt(v: bigint): void { this.push(v); }
  appendDouble(v: number): void { this.push(v); }
  appendBoolean(v: boolean): void { this.push(v); }
  appendList(v: readonly DuckDBValue[]): void { this.push(listValue([...v])); }

  endRow(): void {
    if (this.column !== this.types.length) throw new Error(`row has ${this.column} values, the table ${this.types.length} columns`);
    this.column = 0;
    this.rows++;
  }

  /** Everything collected, in chunks of at most CHUNK_ROWS rows; the caller closes the appender. */
  appendTo(appender: Appender): void {
    for (let lo = 0; lo < this.rows; lo += CHUNK_ROWS) {
      const n = Math.min(CHUNK_ROWS, this.rows - lo);
      const chunk = DuckDBDataChunk.create(this.types, n);
      chunk.setColumns(this.columns.map((c) => (lo === 0 && n === c.length ? c : c.slice(lo, lo + n))));
      appender.appendDataChunk(chunk);
    }
  }
}

const typeCache = new WeakMap<DuckDBConnection, Map<string, DuckDBType[]>>();

/** Column types of a table, read once per connection. */
export async function tableTypes(c: DuckDBConnection, table: string): Promise<DuckDBType[]> {
  let byTable = typeCache.get(c);
  if (!byTable) typeCache.set(c, (byTable = new Map()));
  let types = byTable.get(table);
  if (!types) {
    types = (await c.runAndReadAll(`SELECT * FROM ${table} LIMIT 0`)).columnTypes();
    byTable.set(table, types);
  }
  return types;
}
