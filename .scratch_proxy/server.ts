import { loadConfig } from '../config/index.ts';
import { startServer } from '../collector/server.ts';
import { monitorEventLoopDelay } from 'node:perf_hooks';
const running = await startServer(loadConfig(process.env));
const pl = running.pipeline as any;
const ING: number[] = [];
const orig = pl.ingest.bind(pl);
pl.ingest = process.env.NOINGEST ? async () => ({ accepted: 1 }) : async (...a: any[]) => { const t = performance.now(); try { return await orig(...a); } finally { ING.push(performance.now() - t); } };
const h = monitorEventLoopDelay({ resolution: 1 }); h.enable();
process.on('SIGTERM', () => {
  ING.sort((a, b) => a - b);
  const p = (q: number) => ING[Math.floor(q * ING.length)]?.toFixed(2);
  console.error(`[server] ingest n=${ING.length} p50 ${p(0.5)} p90 ${p(0.9)} p99 ${p(0.99)}; loop delay p50 ${(h.percentile(50) / 1e6).toFixed(2)} p99 ${(h.percentile(99) / 1e6).toFixed(2)} max ${(h.max / 1e6).toFixed(1)} ms`);
  void running.close().then(() => process.exit(0));
});
