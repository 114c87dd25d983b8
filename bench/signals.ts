// The signal routes: POST /api/ingest/tool-calls, /api/ingest/feedback and /api/ingest/webhooks (unsigned, and signed
// with a secret: the load generator signs each body), next to POST /api/traces on the same server in the same run
// (native before and after them, so drift over the run shows). One server per storage; each case its own workspace,
// so what it stored is counted on its own once the server has stopped (SIGTERM flushes the spool).
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { createKey } from '../collector/workspaces/admin.ts';
import { addWebhookSecret } from '../collector/workspaces/webhook-secrets.ts';
import type { Storage } from '../core/ports/storage.ts';
import { loadSecretsKey, secretBox } from '../processors/secret-box.ts';
import { createStorage } from '../storage/index.ts';
import { describeCpu, fmt, load, peakRssMb, terminate } from './lib.ts';
import { startBenchServer } from './server.ts';
import { type CaseResult, combine, NATIVE_BODY } from './native.ts';

interface SignalCase {
  name: string;
  path: string;
  /** The body of request n (unique, so each is a record of its own). */
  body: (n: number) => string;
  /** Headers of a request over its body (the signature). */
  sign?: (body: string) => Record<string, string>;
  /** What it stored, counted in its workspace. */
  stored: (storage: Storage, workspaceId: string) => Promise<number>;
}

const TOOL = (n: number) =>
  JSON.stringify({
    id: `call_${n}`,
    name: 'get_weather',
    type: 'function',
    arguments: { location: 'Paris', unit: 'celsius' },
    result: { temp_c: 18, conditions: 'partly cloudy', humidity: 0.61 },
    started_at: Date.now() - 412,
    duration_ms: 412,
    trace_id: `bench-agent-${n % 1000}`,
    session_id: 'sess-42',
    user_id: 'u-1029',
  });

const VOTE = (n: number) =>
  JSON.stringify({ trace_id: 'bench-voted', value: n % 3 ? 'up' : 'down', user_id: `u-${n}`, comment: 'helpful' });

const ALERT = (n: number) =>
  JSON.stringify({
    source: 'lakera-guard-relay',
    severity: 'high',
    category: 'prompt_injection',
    title: 'Prompt injection detected in user input',
    detected_at: new Date().toISOString(),
    metadata: { request_uuid: `req-${n}`, trace_id: `bench-agent-${n % 1000}`, user_id: 'u-1029' },
    breakdown: [{ detector_type: 'prompt_attack', detected: true, score: 0.97 }],
    n,
  });

/** Every security alert of a workspace, page by page. */
async function countAlerts(storage: Storage, workspaceId: string): Promise<number> {
  let n = 0;
  let cursor: string | undefined;
  do {
    const page = await storage.listSecurityAlerts(workspaceId, { limit: 1000, ...(cursor ? { cursor } : {}) });
    n += page.items.length;
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return n;
}

function cases(secret: string): SignalCase[] {
  const spans = (s: Storage, ws: string) => s.countSpans(ws);
  return [
    {
      name: 'native POST /api/traces',
      path: '/api/traces',
      body: (n) => NATIVE_BODY.replace('[<id>]', String(n)),
      stored: spans,
    },
    { name: 'POST /api/ingest/tool-calls', path: '/api/ingest/tool-calls', body: TOOL, stored: spans },
    {
      name: 'POST /api/ingest/feedback',
      path: '/api/ingest/feedback',
      body: VOTE,
      stored: async (s, ws) => (await s.traceFeedback(ws, 'bench-voted')).length,
    },
    { name: 'POST /api/ingest/webhooks, unsigned', path: '/api/ingest/webhooks', body: ALERT, stored: countAlerts },
    {
      name: 'POST /api/ingest/webhooks, signed',
      path: '/api/ingest/webhooks',
      body: ALERT,
      sign: (body) => {
        const ts = String(Math.floor(Date.now() / 1000));
        const sig = createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex');
        return { 'x-service-delivery-timestamp': ts, 'x-service-signature': `v1=${sig}` };
      },
      stored: countAlerts,
    },
  ];
}

async function runStore(label: string, env: Record<string, string>, seconds: number): Promise<void> {
  // Keys and the signing secret made before the server starts (it then reads the same key file).
  const server = await startBenchServer(env, async (setup, dataDir) => {
    const box = secretBox(loadSecretsKey(join(dataDir, 'keys')));
    const keys = [];
    for (let i = 0; i < cases('').length; i++) keys.push(await createKey(setup, `bench-signals-${i}`));
    const { secret } = await addWebhookSecret(setup, box, keys[4]!.workspaceId, async () => {});
    return { keys, secret };
  });
  const { keys, secret } = server.made;
  const { child } = server;
  const list = cases(secret);
  const results: Array<{ c: SignalCase; i: number; r: CaseResult }> = [];
  try {
    // native first and last, the signal routes between
    for (const i of [0, 1, 2, 3, 4, 0]) {
      const c = list[i]!;
      let n = i === 0 && results.length ? 10_000_000 : 0;
      const r = await load({
        url: `${server.url}${c.path}`,
        body: c.body(0),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${keys[i]!.key}` },
        connections: 50,
        seconds,
        serverPid: child.pid!,
        request: () => {
          const body = c.body(++n);
          return { body, ...(c.sign ? { headers: c.sign(body) } : {}) };
        },
      });
      results.push({ c, i, r: { name: c.name, ...r, rssMb: peakRssMb(child.pid!) } });
    }
    await terminate(child, 120_000);
    const s = createStorage(server.config);
    await s.init();
    const stored = new Map<number, number>();
    for (const [i, c] of list.entries()) stored.set(i, await c.stored(s, keys[i]!.workspaceId));
    await s.close();
    print(label, results, stored);
  } finally {
    await server.close();
  }
}

function print(
  label: string,
  results: Array<{ c: SignalCase; i: number; r: CaseResult }>,
  stored: Map<number, number>,
) {
  const native = combine(results.filter((x) => x.i === 0).map((x) => x.r));
  const nativeRate = native.ok / native.duration;
  console.log(`\n== signal routes, ${label}: requests/s next to native POST /api/traces on the same server ==`);
  console.log(
    'case'.padEnd(40),
    'req/s'.padStart(8),
    'p50 ms'.padStart(8),
    'p99 ms'.padStart(8),
    'vs native'.padStart(10),
    'steal %'.padStart(8),
    '  stored / 2xx (≥: answers in flight at the stop)',
  );
  const rows = [
    { ...native, name: 'native POST /api/traces (before + after)' },
    ...results.filter((x) => x.i !== 0).map((x) => x.r),
  ];
  const idx = [0, ...results.filter((x) => x.i !== 0).map((x) => x.i)];
  for (const [k, r] of rows.entries()) {
    const rate = r.ok / r.duration;
    const i = idx[k]!;
    // Both native runs went to one workspace; the two signed/unsigned webhook runs to their own.
    const okAll = i === 0 ? results.filter((x) => x.i === 0).reduce((a, x) => a + x.r.ok, 0) : r.ok;
    const st = stored.get(i) ?? 0;
    console.log(
      r.name.padEnd(40),
      fmt(rate).padStart(8),
      fmt(r.p50, 1).padStart(8),
      fmt(r.p99, 1).padStart(8),
      fmt(rate / nativeRate, 2).padStart(10),
      fmt(r.stealPct, 0).padStart(8),
      ' ',
      `${st} / ${okAll} ${st >= okAll ? 'OK' : 'LOST'}`,
      r.non2xx || r.errors ? `(non-2xx ${r.non2xx}, errors ${r.errors})` : '',
    );
  }
  for (const r of rows) console.log(`  ${r.name}: ${describeCpu(r.cpu, r.ok, 'request')}`);
}

export async function runSignalsBench(seconds: number, clickhouseUrl: string): Promise<void> {
  await runStore('embedded (DuckDB)', {}, seconds);
  await runStore(
    'ClickHouse 18.16',
    { TRACEGATE_CLICKHOUSE_URL: clickhouseUrl, TRACEGATE_CLICKHOUSE_DATABASE: `bench_signals_${Date.now()}` },
    seconds,
  );
}
