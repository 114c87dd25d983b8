// Proxy overhead: a fake provider answering after a fixed 20 ms, called directly and through tracegate.
// JSON: autocannon, 100 connections; latencies taken from each response's own hrtime (autocannon's histogram
// rounds to whole ms, too coarse for sub-ms overhead). SSE: a custom client in the same process as a stamped fake,
// so each event's send time (performance.now) and arrival time share one monotonic clock.
import { fork, type ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import { Pool } from 'undici';
import { createKey } from '../collector/workspaces/admin.ts';
import { startFakeResponses } from '../test/support/fake-responses.ts';
import { fmt, peakRssMb, processCpuSeconds, stealMeter, terminate } from './lib.ts';
import { startBenchServer } from './server.ts';

const DELAY_MS = 20;
const CONNECTIONS = 100;
const BODY = JSON.stringify({
  model: 'gpt-4o-mini',
  instructions: 'You are a helpful support agent. Answer in two sentences.',
  input:
    'Customer asks: my order #48213 arrived damaged, the box was crushed and the mug inside is broken. What are my options?',
  temperature: 0.2,
  metadata: { channel: 'email', ticket: 'T-48213' },
});

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

interface Latencies {
  rps: number;
  p50: number;
  p99: number;
  max: number;
  ok: number;
  bad: number;
  cpuUs?: number;
}

async function hammer(
  url: string,
  headers: Record<string, string>,
  seconds: number,
  overallRate?: number,
): Promise<Latencies> {
  const times: number[] = [];
  let bad = 0;
  const r = await new Promise<autocannon.Result>((resolve, reject) => {
    const inst = autocannon(
      {
        url,
        method: 'POST',
        body: BODY,
        headers,
        connections: CONNECTIONS,
        duration: seconds,
        ...(overallRate ? { overallRate } : {}),
      },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
    inst.on('response', (_c, status, _b, ms) => {
      if (status === 200) times.push(ms);
      else bad++;
    });
  });
  times.sort((a, b) => a - b);
  return {
    rps: r.requests.average,
    p50: pct(times, 50),
    p99: pct(times, 99),
    max: times.at(-1) ?? NaN,
    ok: times.length,
    bad: bad + r.errors + r.timeouts,
  };
}

/** Open loop: one request every 1000/rate ms (drift-corrected), over a pool of CONNECTIONS keep-alive sockets. */
async function paced(url: string, headers: Record<string, string>, seconds: number, rate: number): Promise<Latencies> {
  const u = new URL(url);
  const pool = new Pool(u.origin, { connections: CONNECTIONS });
  const times: number[] = [];
  let bad = 0;
  const inflight: Promise<void>[] = [];
  const start = performance.now();
  const total = Math.floor(seconds * rate);
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const t0 = performance.now();
    inflight.push(
      pool.request({ method: 'POST', path: u.pathname, body: BODY, headers }).then(
        async (res) => {
          await res.body.text();
          if (res.statusCode === 200) times.push(performance.now() - t0);
          else bad++;
        },
        () => {
          bad++;
        },
      ),
    );
  }
  await Promise.all(inflight);
  await pool.close();
  times.sort((a, b) => a - b);
  return {
    rps: times.length / ((performance.now() - start) / 1000),
    p50: pct(times, 50),
    p99: pct(times, 99),
    max: times.at(-1) ?? NaN,
    ok: times.length,
    bad,
  };
}

async function startFakeChild(): Promise<{ child: ChildProcess; url: string }> {
  const child = fork('bench/fake-upstream.ts', [], {
    env: { ...process.env, DELAY_MS: String(DELAY_MS) },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { url: string }).url));
    child.once('exit', (c) => reject(new Error(`fake upstream exited ${c}`)));
  });
  return { child, url };
}

/** The floor proxy (bench/proxy-floor.ts) in front of the fake: fsync false leaves its append in the page cache. */
async function startFloor(providerUrl: string, fsync: boolean): Promise<{ child: ChildProcess; url: string }> {
  const child = fork('bench/proxy-floor.ts', [], {
    env: { ...process.env, UPSTREAM: providerUrl, FSYNC: fsync ? '1' : '0' },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { url: string }).url));
    child.once('exit', (c) => reject(new Error(`floor proxy exited ${c}`)));
  });
  return { child, url };
}

async function startProxy(
  providerUrl: string,
): Promise<{ child: ChildProcess; url: string; key: string; close(): Promise<void> }> {
  const env = { TRACEGATE_PROVIDER_BASE_URL: providerUrl, TRACEGATE_PROVIDER_API_KEY: 'sk-bench' };
  const server = await startBenchServer(env, (storage) => createKey(storage, 'bench-proxy'));
  return { child: server.child, url: server.url, key: server.made.key, close: () => server.close(60_000) };
}

interface StreamStats {
  ttfbHeaders: number[];
  ttfbEvent: number[];
  gaps: number[];
  events: number;
  streams: number;
}

/** Concurrent streams for `seconds`: per stream, time to headers and to the first event; per event, arrival − send. */
async function streamLoad(
  url: string,
  headers: Record<string, string>,
  seconds: number,
  concurrency: number,
): Promise<StreamStats> {
  const u = new URL(url);
  const pool = new Pool(u.origin, { connections: concurrency });
  const st: StreamStats = { ttfbHeaders: [], ttfbEvent: [], gaps: [], events: 0, streams: 0 };
  const body = JSON.stringify({ ...JSON.parse(BODY), stream: true });
  const until = performance.now() + seconds * 1000;
  const worker = async () => {
    while (performance.now() < until) {
      const t0 = performance.now();
      const res = await pool.request({
        method: 'POST',
        path: u.pathname,
        body,
        headers: { 'content-type': 'application/json', ...headers },
      });
      st.ttfbHeaders.push(performance.now() - t0);
      if (res.statusCode !== 200) throw new Error(`stream answered ${res.statusCode}: ${await res.body.text()}`);
      let buf = '';
      let first = true;
      for await (const chunk of res.body) {
        const now = performance.now();
        if (first) {
          st.ttfbEvent.push(now - t0);
          first = false;
        }
        buf += chunk.toString();
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = block.split('\n').find((l) => l.startsWith('data: '));
          if (!data) continue;
          const t = (JSON.parse(data.slice(6)) as { t?: number }).t;
          if (typeof t === 'number') {
            st.gaps.push(now - t);
            st.events++;
          }
        }
      }
      st.streams++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await pool.close();
  for (const a of [st.ttfbHeaders, st.ttfbEvent, st.gaps]) a.sort((x, y) => x - y);
  return st;
}

export async function runProxyBench(seconds: number): Promise<void> {
  const fake = await startFakeChild();
  const proxy = await startProxy(fake.url);
  const auth = { authorization: `Bearer ${proxy.key}` };
  const json = { 'content-type': 'application/json' };
  try {
    console.log(
      `\n== proxy: POST /api/proxy/provider/responses, fake provider answering after ${DELAY_MS} ms, ${CONNECTIONS} connections ==`,
    );
    // Warm up pools, JIT and the spool before measuring.
    await hammer(`${proxy.url}/api/proxy/provider/responses`, { ...json, ...auth }, 2);
    const rows: Array<[string, Latencies]> = [];
    const steal = stealMeter();
    const fake0 = processCpuSeconds(fake.child.pid!);
    const direct = await hammer(`${fake.url}/responses`, json, seconds);
    direct.cpuUs = ((processCpuSeconds(fake.child.pid!) - fake0) * 1e6) / direct.ok;
    rows.push(['direct to the fake, closed loop', direct]);
    const cpu0 = processCpuSeconds(proxy.child.pid!);
    const closed = await hammer(`${proxy.url}/api/proxy/provider/responses`, { ...json, ...auth }, seconds);
    closed.cpuUs = ((processCpuSeconds(proxy.child.pid!) - cpu0) * 1e6) / closed.ok;
    rows.push(['through tracegate, closed loop', closed]);
    // Closed loop saturates a 2-core box (load generator, fake and proxy share it), so its latency is mostly
    // queueing. autocannon's overallRate sends in bursts, so the paced rows use an evenly spaced open-loop client.
    // The floor: a bare node proxy that forwards and makes the exchange durable (bench/proxy-floor.ts), with and
    // without the disk flush; what tracegate adds beyond it is its own work.
    const floors = [await startFloor(fake.url, false), await startFloor(fake.url, true)];
    let floorClosed: Latencies | null = null;
    const paced3: Array<{ rate: number; direct: Latencies; bare: Latencies; durable: Latencies; via: Latencies }> = [];
    try {
      floorClosed = await hammer(`${floors[1]!.url}/responses`, json, seconds);
      rows.push(['floor proxy, O_DSYNC append, closed loop', floorClosed]);
      for (const rate of [100, 300]) {
        const direct = await paced(`${fake.url}/responses`, json, seconds, rate);
        const bare = await paced(`${floors[0]!.url}/responses`, json, seconds, rate);
        const durable = await paced(`${floors[1]!.url}/responses`, json, seconds, rate);
        const via = await paced(`${proxy.url}/api/proxy/provider/responses`, { ...json, ...auth }, seconds, rate);
        paced3.push({ rate, direct, bare, durable, via });
        rows.push(
          [`direct to the fake, ${rate} req/s`, direct],
          [`floor proxy, no fsync, ${rate} req/s`, bare],
          [`floor proxy, O_DSYNC append, ${rate} req/s`, durable],
          [`through tracegate, ${rate} req/s`, via],
        );
      }
    } finally {
      for (const f of floors) await terminate(f.child);
    }
    console.log(
      'case'.padEnd(40),
      'req/s'.padStart(8),
      'p50 ms'.padStart(8),
      'p99 ms'.padStart(8),
      'max ms'.padStart(8),
      '  non-2xx/errors',
    );
    for (const [name, r] of rows)
      console.log(
        name.padEnd(40),
        fmt(r.rps).padStart(8),
        fmt(r.p50, 2).padStart(8),
        fmt(r.p99, 2).padStart(8),
        fmt(r.max, 1).padStart(8),
        ' ',
        r.bad,
      );
    const added = (p: Latencies, d: Latencies) => `p50 ${fmt(p.p50 - d.p50, 2)} ms, p99 ${fmt(p.p99 - d.p99, 2)} ms`;
    console.log(
      `added by the proxy (closed loop): tracegate ${added(closed, direct)}  (target ≤ 1 / ≤ 3); floor ${added(floorClosed!, direct)}`,
    );
    for (const x of paced3) {
      console.log(
        `added at ${x.rate} req/s: tracegate ${added(x.via, x.direct)}  (target ≤ 1 / ≤ 3); floor ${added(x.durable, x.direct)} (no fsync: ${added(x.bare, x.direct)})`,
      );
    }
    // Unloaded: one request at a time (the pure per-request overhead, including the durable spool append).
    {
      const d = await paced(`${fake.url}/responses`, json, Math.min(seconds, 5), 20);
      const p = await paced(
        `${proxy.url}/api/proxy/provider/responses`,
        { ...json, ...auth },
        Math.min(seconds, 5),
        20,
      );
      console.log(
        `unloaded (20 req/s, no overlap): direct p50 ${fmt(d.p50, 2)} / p99 ${fmt(d.p99, 2)} ms, via proxy p50 ${fmt(p.p50, 2)} / p99 ${fmt(p.p99, 2)} ms; added p50 ${fmt(p.p50 - d.p50, 2)} ms, p99 ${fmt(p.p99 - d.p99, 2)} ms`,
      );
    }
    console.log(
      `CPU per request (closed loop): proxy ${fmt(closed.cpuUs, 0)} µs incl. spool and storage writer; the bare-node fake ${fmt(direct.cpuUs, 0)} µs; proxy peak RSS ${peakRssMb(proxy.child.pid!)} MB`,
    );
    console.log(`CPU steal by other guests during these cases: ${fmt(steal(), 0)}%`);
  } finally {
    await proxy.close();
    await terminate(fake.child);
  }

  // Streams: the fake runs here, stamping each event with performance.now(); the proxy is a child process.
  const stamped = await startFakeResponses({ delayMs: DELAY_MS, stamp: true, record: false });
  const sproxy = await startProxy(stamped.url);
  const sfloor = await startFloor(stamped.url, true);
  try {
    const concurrency = 20;
    console.log(`\n== proxy: SSE passthrough, ${concurrency} concurrent streams, an event every ${DELAY_MS} ms ==`);
    await streamLoad(
      `${sproxy.url}/api/proxy/provider/responses`,
      { authorization: `Bearer ${sproxy.key}` },
      2,
      concurrency,
    );
    const steal = stealMeter();
    const direct = await streamLoad(`${stamped.url}/responses`, {}, seconds, concurrency);
    const floor = await streamLoad(`${sfloor.url}/responses`, {}, seconds, concurrency);
    const via = await streamLoad(
      `${sproxy.url}/api/proxy/provider/responses`,
      { authorization: `Bearer ${sproxy.key}` },
      seconds,
      concurrency,
    );
    console.log(
      'case'.padEnd(22),
      'streams'.padStart(8),
      'events'.padStart(8),
      'headers p50'.padStart(12),
      'first ev p50'.padStart(13),
      'first ev p99'.padStart(13),
      '  per-event delay p50 / p99 / max ms',
    );
    for (const [name, s] of [
      ['direct to the fake', direct],
      ['floor proxy', floor],
      ['through tracegate', via],
    ] as const) {
      console.log(
        name.padEnd(22),
        String(s.streams).padStart(8),
        String(s.events).padStart(8),
        fmt(pct(s.ttfbHeaders, 50), 2).padStart(12),
        fmt(pct(s.ttfbEvent, 50), 2).padStart(13),
        fmt(pct(s.ttfbEvent, 99), 2).padStart(13),
        ' ',
        [50, 99].map((p) => fmt(pct(s.gaps, p), 3)).join(' / '),
        '/',
        fmt(s.gaps.at(-1)!, 3),
      );
    }
    const added = (s: StreamStats, p: number) => fmt(pct(s.gaps, p) - pct(direct.gaps, p), 3);
    const over1 = (s: StreamStats) => `${s.gaps.filter((g) => g > 1).length}/${s.gaps.length}`;
    console.log(
      `forwarding delay added per event: tracegate p50 ${added(via, 50)} ms, p99 ${added(via, 99)} ms; floor p50 ${added(floor, 50)} ms, p99 ${added(floor, 99)} ms`,
    );
    console.log(
      `events over 1 ms end to end (target: none): tracegate ${over1(via)}, floor ${over1(floor)}, direct to the fake ${over1(direct)}`,
    );
    console.log(
      `time to first event added: p50 ${fmt(pct(via.ttfbEvent, 50) - pct(direct.ttfbEvent, 50), 2)} ms; CPU steal by other guests: ${fmt(steal(), 0)}%`,
    );
  } finally {
    await terminate(sfloor.child);
    await sproxy.close();
    await stamped.close();
  }
}

if (import.meta.main) await runProxyBench(Number(process.env.BENCH_SECONDS ?? 10));
