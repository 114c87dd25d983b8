// Test doubles and helpers for the spool/pipeline tests.
import { Pipeline } from '../../pipeline/pipeline.ts';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configSchema, type Config } from '../../config/index.ts';
import { emptySpan, type SpanRecord } from '../../core/record.ts';
import type { EnrichmentRecord } from '../../core/enrichment-records.ts';
import type { DuckDbStorage } from '../../storage/duckdb.ts';
import type { Storage } from '../../core/ports/storage.ts';

/** The real DuckDB storage in `dir` (the database file is created there). */
export async function openDuckDb(dir: string): Promise<DuckDbStorage> {
  const { DuckDbStorage } = await import('../../storage/duckdb.ts'); // lazily: the native module is slow to load
  const s = new DuckDbStorage(join(dir, 'tracegate.duckdb'));
  await s.init();
  return s;
}

/**
 * TEST DOUBLE: the span write/read part of Storage in a Map, to unit-test the spool and
 * writer without a database. `fail` makes inserts throw, `hang` makes them never settle.
 */
export class MapStorage
  implements Pick<Storage, 'insertSpans' | 'insertEnrichment' | 'ping' | 'getTrace' | 'countSpans'>
{
  readonly spans = new Map<string, SpanRecord>();
  /** Enrichment records in insert order. */
  readonly enrichment: EnrichmentRecord[] = [];
  /** Row count of every insertSpans call, successful or not. */
  readonly inserts: number[] = [];
  /** How many times each (workspace, trace, span) was inserted successfully. */
  readonly deliveries = new Map<string, number>();
  fail = false;
  hang = false;

  async ping(): Promise<boolean> {
    return !this.fail;
  }
  async insertSpans(rows: SpanRecord[]): Promise<void> {
    this.inserts.push(rows.length);
    if (this.hang) return new Promise(() => {});
    if (this.fail) throw new Error('storage unreachable (test)');
    for (const r of rows) {
      const k = `${r.workspaceId}/${r.traceId}/${r.spanId}`;
      const prev = this.spans.get(k);
      if (!prev || prev.ingestedAtMs <= r.ingestedAtMs) this.spans.set(k, r);
      this.deliveries.set(k, (this.deliveries.get(k) ?? 0) + 1);
    }
  }
  async insertEnrichment(rows: EnrichmentRecord[]): Promise<void> {
    if (this.fail) throw new Error('storage unreachable (test)');
    this.enrichment.push(...rows);
  }
  async getTrace(workspaceId: string, traceId: string): Promise<SpanRecord[]> {
    return [...this.spans.values()].filter((r) => r.workspaceId === workspaceId && r.traceId === traceId);
  }
  async countSpans(workspaceId: string): Promise<number> {
    let n = 0;
    for (const r of this.spans.values()) if (r.workspaceId === workspaceId) n++;
    return n;
  }
}

export const WS = 'ws_spool_test';

/** A record of about `size` bytes of JSON. */
export function span(i: number, size = 1024, traceId = 'trace-' + Math.floor(i / 10)): SpanRecord {
  const r = emptySpan(WS, 'native');
  r.traceId = traceId;
  r.spanId = `span-${i}`;
  r.name = 'call';
  r.kind = 'llm';
  r.startTimeNs = '1700000000000000000';
  r.endTimeNs = '1700000000100000000';
  r.durationMs = 100;
  r.prompt = 'p'.repeat(Math.max(0, size - 700));
  r.response = 'ok';
  r.ingestedAtMs = 1700000000000 + i;
  return r;
}

export async function tempDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'tracegate-spool-'));
}
export const removeDir = (dir: string) => rm(dir, { recursive: true, force: true });

export function testConfig(dataDir: string, over: Partial<Record<keyof Config, string>> = {}): Config {
  return configSchema.parse({ DATA_DIR: dataDir, FLUSH_INTERVAL_MS: '60000', ...over });
}

/** Collects log calls; pino-compatible enough for the pipeline. */
export class TestLogger {
  readonly lines: Array<{ level: string; obj: object; msg?: string }> = [];
  info(obj: object, msg?: string): void {
    this.lines.push({ level: 'info', obj, msg });
  }
  warn(obj: object, msg?: string): void {
    this.lines.push({ level: 'warn', obj, msg });
  }
  error(obj: object, msg?: string): void {
    this.lines.push({ level: 'error', obj, msg });
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function until(cond: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out waiting for condition');
    await sleep(10);
  }
}

const CHILD = fileURLToPath(new URL('./spool-child.ts', import.meta.url));

/** Run the crash child until `killAfter` acks (or it finishes), SIGKILL it, return the acked indexes. */
export async function crashChild(
  dataDir: string,
  storageMode: string,
  total: number,
  killAfter: number,
): Promise<Set<number>> {
  const child = spawn(process.execPath, [CHILD, dataDir, storageMode, String(total), '16'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const acked = new Set<number>();
  let stderr = '';
  let buf = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.startsWith('acked ')) acked.add(Number(line.slice(6)));
        if (acked.size >= killAfter || line === 'done') child.kill('SIGKILL');
      }
    });
    child.on('exit', (code, signal) =>
      signal === 'SIGKILL' ? resolve() : reject(new Error(`child exited ${code}: ${stderr}`)),
    );
  });
  return acked;
}

/**
 * For a describe block: a temp dir, a DuckDB store in it opened before each test and closed after, and pipelines
 * writing into that store (`over`: settings of the pipeline's collector).
 */
export function duckDbPipelines() {
  const f = {
    dir: '',
    storage: null as unknown as DuckDbStorage,
    openStorage: () => openDuckDb(join(f.dir, 'db')),
    pipeline: async (s: DuckDbStorage, over: Partial<Record<keyof Config, string>> = {}) => {
      const p = new Pipeline({
        config: testConfig(join(f.dir, 'collector'), over),
        storage: s,
        logger: new TestLogger(),
      });
      await p.start();
      return p;
    },
  };
  beforeEach(async () => {
    f.dir = await tempDir();
    f.storage = await f.openStorage();
  });
  afterEach(async () => {
    await f.storage.close();
    await removeDir(f.dir);
  });
  return f;
}
