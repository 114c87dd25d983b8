// `node bench/export.ts` (or BENCH_ONLY=export make bench): GET /api/export/training over 100 k and then 1 M stored
// trainable model calls, on each engine: lines/s, and the server's RSS while it streams over its RSS when idle. Bar:
// that growth is the same at 1 M as at 100 k (the export holds a page at a time, whatever the count).
// The calls are written through the storage API in bulk (insertSpans, the collector's own write path) into a store
// the server then opens: the first 100 k, an export, the next 900 k, an export. A server per measurement, warmed up
// by a small export first; its RSS sampled every 50 ms (/proc/<pid>/status VmRSS).
// EXPORT_BENCH_SIZES (default 100000,1000000) and EXPORT_BENCH_ENGINES (default duckdb,clickhouse) narrow it.
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

async function measure(env: Record<string, string>, key: string, expected: number): Promise<Measured> {
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
    const m = await exportOnce(url, key, child.pid!);
    if (m.lines !== expected) throw new Error(`exported ${m.lines} lines, expected ${expected}`);
    return m;
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
    'engine'.padEnd(20),
    'stored'.padStart(10),
    'seed/s'.padStart(9),
    'lines/s'.padStart(9),
    'MiB out'.padStart(8),
    'idle MiB'.padStart(9),
    'peak MiB'.padStart(9),
    'growth MiB'.padStart(11),
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
        const growth: number[] = [];
        for (const size of SIZES) {
          const seedRate = await seed(env, workspaceId, stored, size);
          stored = size;
          const m = await measure(env, key, size);
          growth.push(m.peakMb - m.idleMb);
          console.log(
            engine.padEnd(20),
            fmt(size).padStart(10),
            fmt(seedRate).padStart(9),
            fmt(m.lines / m.seconds).padStart(9),
            fmt(m.bytes / 2 ** 20).padStart(8),
            fmt(m.idleMb).padStart(9),
            fmt(m.peakMb).padStart(9),
            fmt(m.peakMb - m.idleMb).padStart(11),
          );
        }
        if (growth.length > 1)
          console.log(
            `${engine}: growth at ${fmt(SIZES.at(-1)!)} / at ${fmt(SIZES[0]!)}: ${fmt(growth.at(-1)! / Math.max(1, growth[0]!), 2)}`,
          );
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
  } finally {
    await ch?.dispose();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await runExportBench();
