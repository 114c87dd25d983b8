// The storage floor of the OTLP case: what each storage engine itself costs to take the case's span rows, written
// the cheapest way it accepts them (ClickHouse: TabSeparated into a MergeTree with no sorting key; DuckDB: data
// chunks appended, then copied into a table with no key), next to the same rows through the collector's own schema.
// No deduplication, index, or rollup: no collector storing these spans in that engine can make it work for less, so
// the floor's CPU at a given rate, against the machine's cores, bounds the spans/s any implementation reaches here.
// (DuckDB runs inside this process: its figure also counts the JavaScript that fills its appender.)
//
//   node bench/storage-floor.ts        standalone: starts its own throwaway ClickHouse
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '@clickhouse/client';
import { DuckDBInstance } from '@duckdb/node-api';
import { decodeOtlpRequest, otlpLimits } from '../protocols/otlp/index.ts';
import { mapOtlp } from '../mappers/otlp.ts';
import type { SpanRecord } from '../core/record.ts';
import { loadConfig } from '../config/index.ts';
import { costProcessor } from '../processors/index.ts';
import { ClickHouseStorage, spanInsertRows } from '../storage/clickhouse.ts';
import { insertTsv } from '../storage/clickhouse-tsv.ts';
import { ColumnRows, stagingOf } from '../storage/duckdb-columns.ts';
import { appendSpans, DuckDbStorage, spansToAppend } from '../storage/duckdb.ts';
import { cpuMeter, fmt, sleep } from './lib.ts';
import { buildOtlpTemplate, stampRequest, type OtlpTemplate } from './otlp.ts';

/** Spans per insert, one insert a second (about what the collector's writer sends at 8,000 spans/s). */
const BATCH = 8192;
const BATCHES = 6;
/** After the last insert: ClickHouse's merges of the parts just written are part of what storing them costs. */
const TAIL_MS = 2000;
/** The rate issue 3 asks for. */
export const TARGET_SPANS_PER_SEC = 50_000;

export interface FloorResult {
  name: string;
  usPerSpan: number;
}

/** BATCHES batches of BATCH distinct spans of the OTLP case, mapped and priced as the collector stores them. */
function spanBatches(t: OtlpTemplate): SpanRecord[][] {
  const limits = otlpLimits(loadConfig({}));
  let seq = 0; // each request its own trace ids
  return Array.from({ length: BATCHES }, () => {
    const out: SpanRecord[] = [];
    while (out.length < BATCH) {
      const req = decodeOtlpRequest(stampRequest(t, seq++), 'protobuf', limits);
      const batch = costProcessor(
        { spans: mapOtlp(req, 'floor', Date.now(), { maxStringBytes: limits.maxStringBytes }), extra: [] },
        null,
      ) as { spans: SpanRecord[] };
      out.push(...batch.spans);
    }
    return out.slice(0, BATCH);
  });
}

/** Each batch handed to `write`, one a second; the CPU meter's reading `tailMs` after the last. */
async function paced<T>(
  batches: T[],
  write: (b: T) => Promise<void>,
  tailMs: number,
): Promise<ReturnType<ReturnType<typeof cpuMeter>>> {
  const meter = cpuMeter();
  for (const b of batches) {
    const start = performance.now();
    await write(b);
    const wait = start + 1000 - performance.now();
    if (wait > 0) await sleep(wait);
  }
  if (tailMs) await sleep(tailMs);
  return meter();
}

async function clickhouseFloor(url: string, batches: SpanRecord[][]): Promise<FloorResult[]> {
  const db = `bench_floor_${process.pid}`;
  const storage = new ClickHouseStorage({ url, database: db, username: 'default', password: '', exactRollups: true });
  const client = createClient({ url });
  try {
    await storage.init();
    await client.command({
      query: `CREATE TABLE ${db}.floor_plain AS ${db}.spans ENGINE = MergeTree() PARTITION BY tuple() ORDER BY tuple()`,
    });
    const rows = batches.map((b) => spanInsertRows(b));
    // ClickHouse runs in its own process: its CPU is the machine's minus this process's.
    const plain = await paced(rows, (r) => insertTsv(client, `${db}.floor_plain`, r), TAIL_MS);
    const ours = await paced(batches, (b) => storage.insertSpans(b), TAIL_MS);
    const n = BATCH * BATCHES;
    return [
      { name: 'ClickHouse 18.16: MergeTree, no sorting key (ClickHouse CPU)', usPerSpan: (plain.others * 1e6) / n },
      { name: "ClickHouse 18.16: tracegate's schema (ClickHouse CPU)", usPerSpan: (ours.others * 1e6) / n },
    ];
  } finally {
    await client.command({ query: `DROP DATABASE IF EXISTS ${db}` }).catch(() => {});
    await storage.close().catch(() => {});
    await client.close();
  }
}

async function duckdbFloor(batches: SpanRecord[][]): Promise<FloorResult[]> {
  const dir = mkdtempSync(join(tmpdir(), 'tracegate-bench-floor-'));
  const file = join(dir, 'floor.duckdb');
  try {
    // The schema made by the collector's own migrations; closed again so that the floor has the file to itself.
    const storage = new DuckDbStorage(file);
    await storage.init();
    const ours = await paced(batches, (b) => storage.insertSpans(b), 0);
    await storage.close();
    const instance = await DuckDBInstance.create(file, { memory_limit: '256MB' });
    const c = await instance.connect();
    try {
      await c.run('CREATE TABLE floor_plain AS SELECT * FROM spans LIMIT 0'); // fillStaging makes its staging table
      const plain = await paced(
        batches,
        async (b) => {
          const cols = await ColumnRows.forTable(c, 'floor_plain');
          appendSpans(cols, spansToAppend(b));
          await cols.fillStaging(c, 'floor_plain');
          await c.run(`INSERT INTO floor_plain SELECT * FROM ${stagingOf('floor_plain')}`);
        },
        0,
      );
      const n = BATCH * BATCHES;
      return [
        // cpuMeter counts this process's CPU as the load generator's: here it is DuckDB's and its appender's.
        {
          name: 'DuckDB: table with no key (appender + DuckDB, all threads)',
          usPerSpan: (plain.loadGenerator * 1e6) / n,
        },
        { name: "DuckDB: tracegate's schema (insertSpans, all threads)", usPerSpan: (ours.loadGenerator * 1e6) / n },
      ];
    } finally {
      c.closeSync();
      instance.closeSync();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function measureStorageFloor(t: OtlpTemplate, clickhouseUrl: string): Promise<FloorResult[]> {
  const batches = spanBatches(t);
  return [...(await clickhouseFloor(clickhouseUrl, batches)), ...(await duckdbFloor(batches))];
}

export function printStorageFloor(rows: FloorResult[]): void {
  console.log(
    "\n== storage floor: the OTLP case's spans, %d a second for %d s, written by each engine the cheapest way it takes them ==",
    BATCH,
    BATCHES,
  );
  console.log('engine'.padEnd(62), 'µs/span'.padStart(8), `cores at ${fmt(TARGET_SPANS_PER_SEC)} spans/s`.padStart(28));
  for (const r of rows)
    console.log(
      r.name.padEnd(62),
      fmt(r.usPerSpan, 1).padStart(8),
      fmt((r.usPerSpan * TARGET_SPANS_PER_SEC) / 1e6, 2).padStart(28),
    );
  console.log(
    "the machine has 2 cores, which also run the load generator, the HTTP receiver, decoding and the spool's fsync",
  );
}

if (import.meta.main) {
  const { startClickHouse } = await import('../test/support/clickhouse.ts');
  const ch = await startClickHouse();
  try {
    printStorageFloor(await measureStorageFloor(buildOtlpTemplate(), ch.url));
  } finally {
    await ch.dispose();
  }
}
