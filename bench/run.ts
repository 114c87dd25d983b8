// `make bench`: every case prints its figures next to a baseline measured in the same run.
// BENCH_SECONDS (default 20) shortens runs for a quick look; BENCH_ONLY=native,otlp,... picks cases.
import { startClickHouse } from '../test/support/clickhouse.ts';
import { printNative, runNativeCeiling, runNativeServer } from './native.ts';

const seconds = Number(process.env.BENCH_SECONDS ?? 20);
const only = new Set((process.env.BENCH_ONLY ?? 'native,otlp,enrichment,proxy').split(','));

const ch = await startClickHouse();
try {
  if (only.has('native')) {
    const ceiling = await runNativeCeiling(seconds);
    const rows = [
      await runNativeServer('tracegate, embedded (DuckDB), fsync', {}, seconds),
      await runNativeServer('tracegate, ClickHouse 18.16, fsync', { TRACEGATE_CLICKHOUSE_URL: ch.url, TRACEGATE_CLICKHOUSE_DATABASE: 'bench_native' }, seconds),
    ];
    printNative(rows, ceiling);
  }
} finally {
  await ch.dispose();
}
