// `make bench`: every case prints its figures next to a baseline measured in the same run.
// BENCH_SECONDS (default 20) shortens runs for a quick look; BENCH_ONLY=native,otlp,proxy,signals,agents,export picks cases (and
// BENCH_ONLY=lookup the ClickHouse stored-version lookup, not run by default); BENCH_ENRICHMENT_ROUNDS (default 4)
// sets the rounds of native enrichment on/off.
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startClickHouse } from '../test/support/clickhouse.ts';
import { fmt, WARMUP_SECONDS } from './lib.ts';
import {
  combine,
  printFloorBudget,
  printNative,
  runNativeCeiling,
  runNativeFloor,
  runNativeServer,
  type CaseResult,
} from './native.ts';

const seconds = Number(process.env.BENCH_SECONDS ?? 20);
const only = new Set((process.env.BENCH_ONLY ?? 'native,otlp,proxy,signals,agents,export').split(','));

function printEnrichment(pairs: Array<[string, CaseResult[], CaseResult[]]>): void {
  console.log('\n== enrichment cost: native ingestion with governance, alerts, audit and verification on vs off ==');
  console.log(
    'storage'.padEnd(24),
    'on traces/s'.padStart(12),
    'off traces/s'.padStart(13),
    'on/off'.padStart(8),
    '  target ≥ 0.85',
    '  on/off per round',
  );
  for (const [name, onRuns, offRuns] of pairs) {
    const on = combine(onRuns),
      off = combine(offRuns);
    const a = on.ok / on.duration,
      b = off.ok / off.duration;
    const rounds = onRuns.map((r, i) => fmt(r.ok / r.duration / (offRuns[i]!.ok / offRuns[i]!.duration), 2)).join(' ');
    console.log(
      name.padEnd(24),
      fmt(a).padStart(12),
      fmt(b).padStart(13),
      fmt(a / b, 2).padStart(8),
      a / b >= 0.85 ? '  OK   ' : '  BELOW',
      `        ${rounds}`,
    );
  }
}

/**
 * The disk's fdatasync latency right now, back to back and after idle gaps: acknowledged writes cannot be faster
 * than this allows, and the gap case is the floor under the proxy's unloaded added latency (durable before answering).
 */
async function fsyncLatency(gapMs: number): Promise<{ p50: number; p90: number; p99: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'tracegate-fsync-'));
  const fd = openSync(join(dir, 'probe'), 'w');
  const buf = Buffer.alloc(1024, 1);
  const t: number[] = [];
  for (let i = 0; i < (gapMs ? 100 : 300); i++) {
    const s = performance.now();
    writeSync(fd, buf);
    fdatasyncSync(fd);
    t.push(performance.now() - s);
    if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
  }
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });
  t.sort((a, b) => a - b);
  return {
    p50: t[Math.floor(t.length / 2)]!,
    p90: t[Math.floor(t.length * 0.9)]!,
    p99: t[Math.floor(t.length * 0.99)]!,
  };
}

console.log(
  `native and OTLP server cases: ${WARMUP_SECONDS} s of the same load first (not measured; BENCH_WARMUP_SECONDS), then the measured runs; the proxy cases warm up for 2 s`,
);
const fs0 = await fsyncLatency(0);
const fsIdle = await fsyncLatency(50);
console.log(
  `disk: fdatasync of a 1 KiB append p50 ${fmt(fs0.p50, 2)} ms, p99 ${fmt(fs0.p99, 2)} ms back to back; ` +
    `after 50 ms idle p50 ${fmt(fsIdle.p50, 2)} ms, p90 ${fmt(fsIdle.p90, 2)} ms (varies a lot on this shared VM)`,
);

const ch = await startClickHouse();
try {
  if (only.has('native')) {
    // Cases compared with each other run in turn, in rounds (the ceiling at both ends), so the VM's speed drifting
    // over minutes weighs on all of them alike; each case's figures are over its rounds together. Enrichment on and
    // off get more rounds, in alternating order (on first, then off first): single runs spread by ±15 % here, about
    // as much as the difference they are to show.
    const rounds = 2;
    const enrichmentRounds = Math.max(rounds, Number(process.env.BENCH_ENRICHMENT_ROUNDS ?? 4));
    const part = Math.max(2, Math.round(seconds / rounds));
    const chEnv = (db: string) => ({ TRACEGATE_CLICKHOUSE_URL: ch.url, TRACEGATE_CLICKHOUSE_DATABASE: db });
    const server = (name: string, env: (n: number) => Record<string, string>) => (n: number) =>
      runNativeServer(name, env(n), part);
    const pairs = [
      [
        server('tracegate, embedded (DuckDB)', () => ({})),
        server('tracegate, embedded, enrichment off', () => ({ TRACEGATE_ENRICHMENT: 'false' })),
      ],
      [
        server('tracegate, ClickHouse 18.16', (n) => chEnv(`bench_native_on_${n}`)),
        server('tracegate, ClickHouse, enrichment off', (n) => ({
          ...chEnv(`bench_native_off_${n}`),
          TRACEGATE_ENRICHMENT: 'false',
        })),
      ],
    ] as const;
    // The floor (bench/native-floor.ts): what durable acknowledgements, and storing in ClickHouse, cost at least.
    const floors = [() => runNativeFloor(part), () => runNativeFloor(part, ch.url)];
    const ceilings = [await runNativeCeiling(part)];
    const pairRuns = pairs.map((): [CaseResult[], CaseResult[]] => [[], []]);
    const floorRuns = floors.map((): CaseResult[] => []);
    for (let n = 0; n < enrichmentRounds; n++) {
      for (const [i, [on, off]] of pairs.entries()) {
        if (n % 2 === 0) {
          pairRuns[i]![0].push(await on(n));
          pairRuns[i]![1].push(await off(n));
        } else {
          pairRuns[i]![1].push(await off(n));
          pairRuns[i]![0].push(await on(n));
        }
      }
      if (n < rounds) for (const [i, run] of floors.entries()) floorRuns[i]!.push(await run());
    }
    ceilings.push(await runNativeCeiling(part));
    const [[duckOn, duckOff], [chOn, chOff]] = pairRuns.map(([a, b]) => [combine(a), combine(b)]) as [
      [CaseResult, CaseResult],
      [CaseResult, CaseResult],
    ];
    const [floor, floorCh] = floorRuns.map(combine) as [CaseResult, CaseResult];
    const duckNoFsync = await runNativeServer(
      'embedded, enrichment off, NO fsync',
      { TRACEGATE_ENRICHMENT: 'false', TRACEGATE_SPOOL_FSYNC: 'false' },
      part,
    );
    const ceiling = { ...combine(ceilings), name: 'ceiling: bare Koa, parse JSON + reply' };
    printNative([duckOn, chOn, duckOff, chOff, duckNoFsync, floor, floorCh], ceiling);
    printFloorBudget(floorCh, ceiling, chOn);
    printEnrichment([
      ['embedded (DuckDB)', ...pairRuns[0]!],
      ['ClickHouse 18.16', ...pairRuns[1]!],
    ]);
  }
  if (only.has('otlp')) {
    const { buildOtlpTemplate, runOtlpBench } = await import('./otlp.ts');
    await runOtlpBench(seconds, ch.url);
    // What the storage engines alone cost for these spans: the target rate against the machine's two cores.
    const { measureStorageFloor, printStorageFloor } = await import('./storage-floor.ts');
    printStorageFloor(await measureStorageFloor(buildOtlpTemplate(), ch.url));
  }
  if (only.has('proxy')) {
    const { runProxyBench } = await import('./proxy.ts');
    await runProxyBench(seconds);
  }
  if (only.has('signals')) {
    const { runSignalsBench } = await import('./signals.ts');
    await runSignalsBench(seconds, ch.url);
  }
  if (only.has('agents')) {
    const { runAgentsBench } = await import('./agents.ts');
    await runAgentsBench(seconds, ch.url);
  }
  if (only.has('export')) {
    const { runExportBench } = await import('./export.ts');
    await runExportBench(ch.url);
  }
  if (only.has('lookup')) {
    // not in the default set: it writes millions of spans first
    const { runLookupBench } = await import('./lookup.ts');
    await runLookupBench();
  }
} finally {
  await ch.dispose();
}
