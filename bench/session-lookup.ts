// `node bench/session-lookup.ts`: what the session cookie's storage lookup (one per request, never cached: a
// revocation must be seen at once by every collector) costs, on both engines. The same cheap read route
// (GET /api/policy, answered from the settings cache) is called with the API key (verified from its 30 s cache) and
// with the cookie; the difference is the lookup. SESSION_BENCH_N requests each (default 500), sequential, one client;
// SESSION_BENCH_STORED (default 10,000) other sessions stored first, so the lookup is not in a one-row table.
import { randomBytes } from 'node:crypto';
import { newSession } from '../collector/workspaces/sessions.ts';
import { stopSharedClickHouse } from '../test/support/shared.ts';
import { type Backend, startTestServer } from '../test/support/server.ts';
import { signIn } from '../test/support/sessions.ts';

const N = Number(process.env.SESSION_BENCH_N ?? 500);
const STORED = Number(process.env.SESSION_BENCH_STORED ?? 10_000);

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

async function timed(url: string, headers: Record<string, string>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    const res = await fetch(url, { headers });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
    out.push(performance.now() - t);
  }
  return out;
}

async function bench(backend: Backend): Promise<void> {
  const s = await startTestServer(backend);
  try {
    const key = await s.key(`bench-${randomBytes(3).toString('hex')}`);
    const terms = { idleMs: 1800_000, maxMs: 8 * 3600_000 };
    for (let i = 0; i < STORED; i++)
      await s.running.storage.putSession(newSession(key.workspaceId, terms, Date.now()).record);
    const cookie = await signIn(s.url, key.key);
    const url = `${s.url}/api/policy`;
    await timed(url, { cookie }); // warm up both paths
    await timed(url, { authorization: `Bearer ${key.key}` });
    const byKey = await timed(url, { authorization: `Bearer ${key.key}` });
    const byCookie = await timed(url, { cookie });
    const direct: number[] = [];
    const hash = (await s.running.storage.listSessions({ workspaceId: key.workspaceId, nowMs: Date.now() }))[0]!
      .tokenHash;
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      await s.running.storage.getSession(hash);
      direct.push(performance.now() - t);
    }
    const row = (name: string, xs: number[]) =>
      `  ${name.padEnd(46)} median ${pct(xs, 0.5).toFixed(2)} ms  p99 ${pct(xs, 0.99).toFixed(2)} ms`;
    console.log(`\n== ${backend}: ${N} sequential requests each, ${STORED} sessions stored ==`);
    console.log(row('GET /api/policy, API key (cached)', byKey));
    console.log(row('GET /api/policy, session cookie (a lookup each)', byCookie));
    console.log(row('storage.getSession alone (storage thread / HTTP)', direct));
    console.log(`  lookup cost per request: ${(pct(byCookie, 0.5) - pct(byKey, 0.5)).toFixed(2)} ms at the median`);
  } finally {
    await s.close();
  }
}

await bench('duckdb');
await bench('clickhouse');
await stopSharedClickHouse();
