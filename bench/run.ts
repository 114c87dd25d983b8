// `make bench`: every case prints its figures next to a baseline measured in the same run.
// BENCH_SECONDS (default 20) shortens runs for a quick look; BENCH_ONLY=native,otlp,proxy picks cases.
import { startClickHouse } from '../test/support/clickhouse.ts';
import { fmt } from './lib.ts';
import { printNative, runNativeCeiling, runNativeServer, type CaseResult } from './native.ts';

const seconds = Number(process.env.BENCH_SECONDS ?? 20);
const only = new Set((process.env.BENCH_ONLY ?? 'native,otlp,proxy').split(','));

function printEnrichment(pairs: Array<[string, CaseResult, CaseResult]>): void {
  console.log('\n== enrichment cost: native ingestion with governance, alerts, audit and verification on vs off ==');
  console.log('storage'.padEnd(24), 'on traces/s'.padStart(12), 'off traces/s'.padStart(13), 'on/off'.padStart(8), '  target ≥ 0.85');
  for (const [name, on, off] of pairs) {
    const a = on.ok / on.duration, b = off.ok / off.duration;
    console.log(name.padEnd(24), fmt(a).padStart(12), fmt(b).padStart(13), fmt(a / b, 2).padStart(8), a / b >= 0.85 ? '  OK' : '  BELOW');
  }
}

const ch = await startClickHouse();
try {
  if (only.has('native')) {
    const ceiling = await runNativeCeiling(seconds);
    const chEnv = (db: string) => ({ TRACEGATE_CLICKHOUSE_URL: ch.url, TRACEGATE_CLICKHOUSE_DATABASE: db });
    const duckOn = await runNativeServer('tracegate, embedded (DuckDB)', {}, seconds);
    const duckOff = await runNativeServer('tracegate, embedded, enrichment off', { TRACEGATE_ENRICHMENT: 'false' }, seconds);
    const chOn = await runNativeServer('tracegate, ClickHouse 18.16', chEnv('bench_native_on'), seconds);
    const chOff = await runNativeServer('tracegate, ClickHouse, enrichment off', { ...chEnv('bench_native_off'), TRACEGATE_ENRICHMENT: 'false' }, seconds);
    printNative([duckOn, chOn, duckOff, chOff], ceiling);
    printEnrichment([['embedded (DuckDB)', duckOn, duckOff], ['ClickHouse 18.16', chOn, chOff]]);
  }
  if (only.has('otlp')) {
    const { runOtlpBench } = await import('./otlp.ts');
    await runOtlpBench(seconds, ch.url);
  }
  if (only.has('proxy')) {
    const { runProxyBench } = await import('./proxy.ts');
    await runProxyBench(seconds);
  }
} finally {
  await ch.dispose();
}
