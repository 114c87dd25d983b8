// Rows collected column by column and handed to DuckDB as data chunks: about half the cost of the
// row appender's one native call per value.
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

  /** Rows for `table` (and its staging table, made alike), whose column types are read once per connection. */
  static async forTable(c: DuckDBConnection, table: string): Promise<ColumnRows> {
    return new ColumnRows(await tableTypes(c, table));
  }

  private push(v: DuckDBValue): void {
    const col = this.columns[this.column++];
    if (!col) throw new Error(`row has more than ${this.types.length} values`);
    col.push(v);
  }

  appendVarchar(v: string): void {
    this.push(v);
  }
  appendBigInt(v: bigint): void {
    this.push(v);
  }
  appendUBigInt(v: bigint): void {
    this.push(v);
  }
  appendDouble(v: number): void {
    this.push(v);
  }
  appendBoolean(v: boolean): void {
    this.push(v);
  }
  appendList(v: readonly DuckDBValue[]): void {
    this.push(listValue([...v]));
  }

  endRow(): void {
    if (this.column !== this.types.length)
      throw new Error(`row has ${this.column} values, the table ${this.types.length} columns`);
    this.column = 0;
    this.rows++;
  }

  /** Replace the contents of `table`'s staging table with everything collected, in chunks of CHUNK_ROWS rows. */
  async fillStaging(c: DuckDBConnection, table: string): Promise<void> {
    await clearStaging(c, table);
    this.appendTo(await c.createAppender(stagingOf(table), null, 'temp'));
  }

  /** Everything collected straight into `table` (no key to check: see the append-only tables in duckdb-enrichment.ts). */
  async appendInto(c: DuckDBConnection, table: string): Promise<void> {
    this.appendTo(await c.createAppender(table));
  }

  private appendTo(appender: Appender): void {
    try {
      for (let lo = 0; lo < this.rows; lo += CHUNK_ROWS) {
        const n = Math.min(CHUNK_ROWS, this.rows - lo);
        const chunk = DuckDBDataChunk.create(this.types, n);
        chunk.setColumns(this.columns.map((col) => (lo === 0 && n === col.length ? col : col.slice(lo, lo + n))));
        appender.appendDataChunk(chunk);
      }
    } finally {
      appender.closeSync(); // flushes
    }
  }
}

/**
 * Rows into `table` through its staging table: `append` fills them, `sql` moves them (each statement atomic on its
 * own, in turn: a batch that fails part-way is retried whole, so each must be idempotent), and the staging table is
 * emptied after, so its rows' memory comes back now rather than at the next insert.
 */
export async function insertStaged(
  c: DuckDBConnection,
  table: string,
  append: (cols: ColumnRows) => void,
  sql: string | readonly string[],
): Promise<void> {
  const cols = await ColumnRows.forTable(c, table);
  append(cols);
  await cols.fillStaging(c, table);
  try {
    for (const statement of typeof sql === 'string' ? [sql] : sql) await c.run(statement);
  } finally {
    await clearStaging(c, table);
  }
}

/** The per-connection scratch table the appender fills before one statement moves its rows into `table` (made by fillStaging). */
export const stagingOf = (table: string) => `${table}_staging`;

/**
 * Empties (or creates) `table`'s staging table, a temp table: never written to the file. It is made anew rather than
 * emptied with DELETE: a temp table never checkpoints, so deleted rows kept their memory and, past the memory limit,
 * temp files, growing with every row ever staged.
 */
export async function clearStaging(c: DuckDBConnection, table: string): Promise<void> {
  await c.run(`CREATE OR REPLACE TEMP TABLE ${stagingOf(table)} AS SELECT * FROM ${table} LIMIT 0`);
}

const typeCache = new WeakMap<DuckDBConnection, Map<string, DuckDBType[]>>();

/** Column types of a table, read once per connection. */
async function tableTypes(c: DuckDBConnection, table: string): Promise<DuckDBType[]> {
  let byTable = typeCache.get(c);
  if (!byTable) typeCache.set(c, (byTable = new Map()));
  let types = byTable.get(table);
  if (!types) {
    types = (await c.runAndReadAll(`SELECT * FROM ${table} LIMIT 0`)).columnTypes();
    byTable.set(table, types);
  }
  return types;
}
