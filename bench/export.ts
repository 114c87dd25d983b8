// `node bench/export.ts` (or BENCH_ONLY=export make bench): GET /api/export/training over 100 k and then 1 M stored
// trainable model calls, on each engine: lines/s, and the server's RSS while it streams over its RSS when idle. Bar:
// that growth is the same at 1 M as at 100 k (the export holds a page at a time, whatever the count).
// The calls are written through the storage API in bulk (insertSpans, the collector's own write path) into a store
// the server then opens: the first 100 k, an export, the next 900 k, an export. A server per measurement, warmed up
// by a small export first; the full export runs twice (cold, then warm: see Passes); RSS sampled every 50 ms
// (/proc/<pid>/status VmRSS).
// EXPORT_BENCH_SIZES (default 100000,1000000) and EXPORT_BENCH_ENGINES (default duckdb,clickhouse) narrow it;
// EXPORT_BENCH_WARM=0 skips the warm pass.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKey } from '../collector/workspaces/admin.ts';
import { loadConfig } from '../config/index.ts';
import { emptySpan, type SpanRecord } from '../core/record.ts';
import { createStorage } from '../storage/index.ts';
import { startClickHouse } from '../test/support/clickhouse.ts';
import { fmt, freePort, sleep, startChild, terminate } from './lib.ts';

const SIZES = (process.env.EXPORT_BENCH_SIZES ?? '100000,1000000').split(',').map(Number);
const ENGINES = (process.env.EXPORT_BENCH_ENGINES ?? 'duckdb,clickhouse').split(',');
/** EXPORT_BENCH_WARM=0: the cold pass only (ClickHouse's caches are not in the server's RSS). */
const WARM = process.env.EXPORT_BENCH_WARM !== '0';
const BATCH = 10_000;
const T0 = 1_795_000_000_000; // ms

const rssMb = (pid: number): number => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};

/** The i-th stored call: a distinct prompt and answer of a few hundred bytes, a trace of its own, every 10th voted. */
function call(ws: string, i: number): SpanRecord {
  const id = createHash('sha256').update(String(i)).digest('hex');
  const startMs = T0 + i;
  return {
    ...emptySpan(ws, 'native'),
    traceId: id.slice(0, 32),
    spanId: id.slice(32, 48),
    name: 'answer',
    kind: 'llm',
    startTimeNs: `${startMs}000000`,
    endTimeNs: `${startMs + 800}000000`,
    durationMs: 800,
    status: 'completed',
    model: 'gpt-4o-mini',
    prompt: `Customer ${i} asks: where is my order ${id.slice(0, 12)}? It was due on Monday and the tracking page shows nothing since.`,
    response: `Order ${id.slice(0, 12)} left the warehouse on Friday; the carrier scans it at the next depot, so tracking updates within a day. Reference ${i}.`,
    promptTokens: 40,
    completionTokens: 45,
    totalTokens: 85,
    actionName: 'support_reply',
    environment: 'production',
    requestId: id.slice(0, 32),
    trainable: true,
    attributes: { metadata: { ticket: i } },
    ingestedAtMs: startMs + 1000,
  };
}

async function seed(env: Record<string, string>, ws: string, from: number, to: number): Promise<number> {
  const storage = createStorage(loadConfig(env));
  await storage.init();
  const t = performance.now();
  try {
    for (let i = from; i < to; i += BATCH) {
      const batch: SpanRecord[] = [];
      for (let j = i; j < Math.min(to, i + BATCH); j++) batch.push(call(ws, j));
      await storage.insertSpans(batch);
    }
  } finally {
    await storage.close();
  }
  return (to - from) / ((performance.now() - t) / 1000);
}

interface Measured {
  lines: number;
  seconds: number;
  idleMb: number;
  peakMb: number;
  bytes: number;
}

/** Reads the whole export, sampling the server's RSS. */
async function exportOnce(url: string, key: string, pid: number, query = ''): Promise<Measured> {
  const idleMb = rssMb(pid);
  let peakMb = idleMb;
  const sampler = setInterval(() => {
    peakMb = Math.max(peakMb, rssMb(pid));
  }, 50);
  const t = performance.now();
  let lines = 0;
  let bytes = 0;
  try {
    const res = await fetch(`${url}/api/export/training${query}`, { headers: { authorization: `Bearer ${key}` } });
    if (res.status !== 200) throw new Error(`export answered ${res.status}: ${await res.text()}`);
    for await (const chunk of res.body!) {
      bytes += chunk.length;
      for (const b of chunk) if (b === 10) lines++;
    }
  } finally {
    clearInterval(sampler);
  }
  peakMb = Math.max(peakMb, rssMb(pid));
  return { lines, seconds: (performance.now() - t) / 1000, idleMb, peakMb, bytes };
}

interface Passes {
  /** A fresh server's RSS, after a small export. */
  idleMb: number;
  /** The first full export, from that fresh server: its caches (DuckDB's buffer pool, up to its memory limit) fill. */
  cold: Measured;
  /** The same export again: idleMb here is the RSS the first one left, so the growth is the export's own. */
  warm: Measured | null;
}

async function measure(env: Record<string, string>, key: string, expected: number): Promise<Passes> {
  const port = await freePort();
  const child = await startChild(
    'bin/tracegate.ts',
    ['serve'],
    { ...env, TRACEGATE_PORT: String(port), TRACEGATE_HOST: '127.0.0.1', TRACEGATE_LOG_LEVEL: 'warn' },
    `http://127.0.0.1:${port}/healthz`,
  );
  try {
    const url = `http://127.0.0.1:${port}`;
    // Warm-up: the route, the storage thread and its first queries, then a quiet moment.
    await exportOnce(url, key, child.pid!, `?to=${T0 + 2000}`);
    await sleep(2000);
    const idleMb = rssMb(child.pid!);
    const cold = await exportOnce(url, key, child.pid!);
    await sleep(2000);
    const warm = WARM ? await exportOnce(url, key, child.pid!) : null;
    for (const m of [cold, warm ?? cold])
      if (m.lines !== expected) throw new Error(`exported ${m.lines} lines, expected ${expected}`);
    return { idleMb, cold, warm };
  } finally {
    await terminate(child);
  }
}

/** `chUrl`: a ClickHouse to use (else a throwaway one is started). */
export async function runExportBench(chUrl?: string): Promise<void> {
  const ch = ENGINES.includes('clickhouse') && !chUrl ? await startClickHouse() : null;
  const clickhouseUrl = chUrl ?? ch?.url;
  console.log(
    '\n== training export (GET /api/export/training, openai_chat): lines/s and server RSS over its idle RSS ==',
  );
  console.log(
    '(cold: the first full export of a fresh server, over its idle RSS; warm: the same export again, over the RSS the first left)',
  );
  console.log(
    'engine'.padEnd(12),
    'stored'.padStart(10),
    'seed/s'.padStart(9),
    'MiB out'.padStart(8),
    'idle MiB'.padStart(9),
    'cold lines/s'.padStart(13),
    'peak'.padStart(6),
    'growth'.padStart(7),
    'warm lines/s'.padStart(13),
    'before'.padStart(7),
    'peak'.padStart(6),
    'growth'.padStart(7),
  );
  try {
    for (const engine of ENGINES) {
      const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-bench-export-'));
      const env: Record<string, string> = { TRACEGATE_DATA_DIR: dataDir };
      if (engine === 'clickhouse') {
        env.TRACEGATE_CLICKHOUSE_URL = clickhouseUrl!;
        env.TRACEGATE_CLICKHOUSE_DATABASE = `bench_export_${Date.now().toString(36)}`;
      }
      try {
        const storage = createStorage(loadConfig(env));
        await storage.init();
        const { key, workspaceId } = await createKey(storage, 'bench-export');
        await storage.close();
        let stored = 0;
        const growth: Array<[number, number]> = [];
        for (const size of SIZES) {
          const seedRate = await seed(env, workspaceId, stored, size);
          stored = size;
          const { idleMb, cold, warm } = await measure(env, key, size);
          const warmGrowth = warm ? warm.peakMb - warm.idleMb : Number.NaN;
          growth.push([cold.peakMb - idleMb, warmGrowth]);
          console.log(
            engine.padEnd(12),
            fmt(size).padStart(10),
            fmt(seedRate).padStart(9),
            fmt(cold.bytes / 2 ** 20).padStart(8),
            fmt(idleMb).padStart(9),
            fmt(cold.lines / cold.seconds).padStart(13),
            fmt(cold.peakMb).padStart(6),
            fmt(cold.peakMb - idleMb).padStart(7),
            (warm ? fmt(warm.lines / warm.seconds) : '—').padStart(13),
            (warm ? fmt(warm.idleMb) : '—').padStart(7),
            (warm ? fmt(warm.peakMb) : '—').padStart(6),
            (warm ? fmt(warmGrowth) : '—').padStart(7),
          );
        }
        if (growth.length > 1) {
          const [first, last] = [growth[0]!, growth.at(-1)!];
          console.log(
            `${engine}: RSS growth at ${fmt(SIZES.at(-1)!)} against ${fmt(SIZES[0]!)}: cold ${fmt(last[0])} vs ${fmt(first[0])} MiB${WARM ? `, warm ${fmt(last[1])} vs ${fmt(first[1])} MiB` : ''}`,
          );
        }
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
  } finally {
    await ch?.dispose();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await runExportBench();
