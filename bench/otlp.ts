import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import { SpanKind, context, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { loadConfig } from '../config/index.ts';
import { createStorage } from '../storage/index.ts';
import { createKey } from '../collector/workspaces/admin.ts';
import { decodeOtlpRequest, otlpLimits } from '../protocols/otlp/index.ts';
import { mapOtlp } from '../mappers/otlp.ts';
import {
  cpuMeter,
  describeCpu,
  fmt,
  peakRssMb,
  settledCounter,
  stealMeter,
  terminate,
  reportWarmup,
  WARMUP_SECONDS,
  type CpuSplit,
} from './lib.ts';
import { startBenchServer } from './server.ts';

export const SPANS_PER_REQUEST = 512;
const TRACES_PER_REQUEST = 32; // 16 chat spans per trace: one root call, 15 follow-up calls under it
const CONNECTIONS = 8;

const PROMPTS = [
  'Customer asks: my order #{n} arrived damaged, the box was crushed and the mug inside is broken. What are my options for a replacement or a refund? I would prefer a replacement if it can arrive before Friday, otherwise a refund to my card please.',
  'Summarize the following support thread for the on-call engineer in three bullet points, keeping ticket ids and error codes verbatim: user {n} reports intermittent 502 errors on checkout since the 14:05 deploy; retries succeed after ~30 s; region eu-west-1 only.',
  'Translate to French, keeping the product names unchanged: "Your TraceGate Pro subscription renews on the 1st. Invoice #{n} is attached. Reply to this e-mail if you want to switch to yearly billing and save two months."',
];
const ANSWERS = [
  'Sorry about the damaged mug! I have created replacement order R-{n}; it ships today by express and arrives Thursday. You do not need to return the broken one. If you would rather have a refund, reply "refund" and it will be on your card within 3–5 business days.',
  '- Since the 14:05 deploy, checkout returns intermittent 502s for user {n} (eu-west-1 only).\n- Retries succeed after ~30 s, which points at a slow upstream warm-up or connection pool.\n- Suggest rolling back the 14:05 deploy in eu-west-1 and checking pool saturation metrics.',
  '« Votre abonnement TraceGate Pro est renouvelé le 1er. La facture n° {n} est jointe. Répondez à cet e-mail si vous souhaitez passer à la facturation annuelle et économiser deux mois. »',
];

export interface OtlpTemplate {
  body: Buffer;
  /** Byte offsets of every Span.traceId value in `body`. */
  traceIdOffsets: number[];
  spans: number;
}

/** One request body from real SDK spans: 32 traces × 16 `chat` spans with GenAI attributes. */
export function buildOtlpTemplate(): OtlpTemplate {
  const mem = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({
        'service.name': 'support-api',
        'service.version': '2.4.1',
        'deployment.environment.name': 'production',
      }),
    ),
    spanProcessors: [new SimpleSpanProcessor(mem)],
  });
  const tracer = provider.getTracer('bench-genai', '1.0.0');
  const perTrace = SPANS_PER_REQUEST / TRACES_PER_REQUEST;
  const t0 = Date.now() - 60_000;
  let n = 0;
  const chat = (parentCtx: ReturnType<typeof context.active>, start: number) => {
    const i = n++;
    const v = i % PROMPTS.length;
    const prompt = PROMPTS[v]!.replace('{n}', String(48_000 + i));
    const answer = ANSWERS[v]!.replace('{n}', String(48_000 + i));
    const model = i % 4 === 0 ? 'gpt-4o' : 'gpt-4o-mini';
    const span = tracer.startSpan(
      `chat ${model}`,
      {
        kind: SpanKind.CLIENT,
        startTime: start,
        attributes: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': 'openai',
          'gen_ai.request.model': model,
          'gen_ai.response.model': `${model}-2024-08-06`,
          'gen_ai.request.temperature': 0.3,
          'gen_ai.request.max_tokens': 512,
          'gen_ai.response.id': `chatcmpl-${i}`,
          'gen_ai.usage.input_tokens': 180 + (i % 50),
          'gen_ai.usage.output_tokens': 60 + (i % 40),
          'gen_ai.response.finish_reasons': ['stop'],
          'gen_ai.conversation.id': `conv-${i >> 4}`,
          'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: prompt }] }]),
          'gen_ai.output.messages': JSON.stringify([
            { role: 'assistant', parts: [{ type: 'text', content: answer }], finish_reason: 'stop' },
          ]),
          'server.address': 'api.openai.com',
          'server.port': 443,
        },
      },
      parentCtx,
    );
    return span;
  };
  for (let t = 0; t < TRACES_PER_REQUEST; t++) {
    const start = t0 + t * 2000;
    const root = chat(context.active(), start);
    const ctx = trace.setSpan(context.active(), root);
    for (let c = 1; c < perTrace; c++) chat(ctx, start + c * 100).end(start + c * 100 + 80);
    root.end(start + perTrace * 100 + 50);
  }
  const spans = mem.getFinishedSpans();
  if (spans.length !== SPANS_PER_REQUEST) throw new Error(`built ${spans.length} spans`);
  const body = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
  const traceIds = [...new Set(spans.map((s) => s.spanContext().traceId))];
  const traceIdOffsets: number[] = [];
  for (const id of traceIds) {
    const needle = Buffer.from(id, 'hex');
    for (let at = body.indexOf(needle); at !== -1; at = body.indexOf(needle, at + 16)) traceIdOffsets.push(at);
  }
  if (traceIdOffsets.length !== SPANS_PER_REQUEST)
    throw new Error(`found ${traceIdOffsets.length} trace ids in the body`);
  return { body, traceIdOffsets, spans: SPANS_PER_REQUEST };
}

/** Give the template the trace ids of request number `seq` (in place). */
export function stampRequest(t: OtlpTemplate, seq: number): Buffer {
  for (const at of t.traceIdOffsets) t.body.writeUInt32BE(seq >>> 0, at);
  return t.body;
}

// ---------------------------------------------------------------------------

export interface Ceiling {
  decodeSpansPerSec: number;
  decodeMapSpansPerSec: number;
  msPerRequest: number;
}

/** The project's protobuf decoder (and decoder + mapper) on the same request, in-process. */
export function measureCeiling(t: OtlpTemplate, seconds = 4): Ceiling {
  const limits = otlpLimits(loadConfig({}));
  const run = (withMap: boolean, ms: number) => {
    const until = performance.now() + ms;
    let n = 0;
    const started = performance.now();
    while (performance.now() < until) {
      const req = decodeOtlpRequest(t.body, 'protobuf', limits);
      if (req.spanCount !== SPANS_PER_REQUEST) throw new Error('decode lost spans');
      if (withMap) mapOtlp(req, 'ws', Date.now(), { maxStringBytes: limits.maxStringBytes });
      n++;
    }
    return { n, ms: performance.now() - started };
  };
  run(true, 500); // warm-up
  const d = run(false, (seconds * 1000) / 2);
  const dm = run(true, (seconds * 1000) / 2);
  return {
    decodeSpansPerSec: (d.n * SPANS_PER_REQUEST) / (d.ms / 1000),
    decodeMapSpansPerSec: (dm.n * SPANS_PER_REQUEST) / (dm.ms / 1000),
    msPerRequest: d.ms / d.n,
  };
}

export interface OtlpCaseResult {
  name: string;
  requestsOk: number;
  non2xx: number;
  errors: number;
  duration: number;
  spansPerSec: number;
  p50: number;
  p99: number;
  rssMb: number;
  drainMs: number;
  stored: number;
  expected: number;
  stealPct: number;
  cpu: CpuSplit;
}

export async function runOtlpServer(
  name: string,
  env: Record<string, string>,
  seconds: number,
  t: OtlpTemplate,
): Promise<OtlpCaseResult> {
  const profileDir = process.env.BENCH_OTLP_PROFILE;
  const childEnv = profileDir
    ? { ...env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --cpu-prof --cpu-prof-dir=${profileDir}`.trim() }
    : env;
  const server = await startBenchServer(childEnv, (storage) =>
    createKey(storage, `bench-otlp-${randomBytes(4).toString('hex')}`),
  );
  const { child, config, port } = server;
  const k = server.made;
  try {
    let seq = Math.floor(Math.random() * 0x7fffffff); // distinct from any earlier run against the same database
    const options = {
      url: `http://127.0.0.1:${port}/v1/traces`,
      method: 'POST' as const,
      connections: CONNECTIONS,
      headers: { 'content-type': 'application/x-protobuf', authorization: `Bearer ${k.key}` },
      body: t.body, // sets Content-Length; every request replaces it via setupRequest
      requests: [{ setupRequest: (req: object) => ({ ...req, body: stampRequest(t, seq++) }) }],
    };
    if (WARMUP_SECONDS > 0) reportWarmup(await autocannon({ ...options, duration: WARMUP_SECONDS }), name);
    const steal = stealMeter();
    const cpuOf = cpuMeter(child.pid!);
    const r = await autocannon({ ...options, duration: seconds });
    // Requests still in flight when autocannon stops are completed (and acknowledged) by the
    // server without autocannon counting them: the exact figure is the server's own counter.
    const stealPct = steal();
    const cpu = cpuOf();
    const acked = await settledCounter(`http://127.0.0.1:${port}/metrics`, 'otlp', Math.max(1000, 2 * r.latency.max));
    const rssMb = peakRssMb(child.pid!);
    const stopAt = performance.now();
    await terminate(child, 300_000); // SIGTERM: drain requests, flush the spool to storage
    const drainMs = performance.now() - stopAt;
    const check = createStorage(config);
    await check.init();
    const stored = await check.countSpans(k.workspaceId);
    await check.close();
    return {
      name,
      requestsOk: r['2xx'],
      non2xx: r.non2xx,
      errors: r.errors + r.timeouts,
      duration: r.duration,
      spansPerSec: (r['2xx'] * SPANS_PER_REQUEST) / r.duration,
      p50: r.latency.p50,
      p99: r.latency.p99,
      rssMb,
      drainMs,
      stored,
      expected: acked,
      stealPct,
      cpu,
    };
  } finally {
    await server.close();
  }
}

export function printOtlp(rows: OtlpCaseResult[], ceiling: Ceiling, t: OtlpTemplate): void {
  console.log(
    '\n== OTLP ingestion: POST /v1/traces, protobuf, %d GenAI chat spans (%s KB) per request, %d connections ==',
    SPANS_PER_REQUEST,
    fmt(t.body.length / 1024, 1),
    CONNECTIONS,
  );
  console.log(
    'ceiling: decodeOtlpRequest in-process %s spans/s (%s ms/request); decode + mapOtlp %s spans/s',
    fmt(ceiling.decodeSpansPerSec),
    fmt(ceiling.msPerRequest, 2),
    fmt(ceiling.decodeMapSpansPerSec),
  );
  console.log(
    'case'.padEnd(40),
    'spans/s'.padStart(9),
    'req/s'.padStart(7),
    'p50 ms'.padStart(8),
    'p99 ms'.padStart(8),
    'RSS MB'.padStart(7),
    'ratio'.padStart(6),
    'drain s'.padStart(8),
    'steal %'.padStart(8),
    '  stored/expected',
  );
  for (const r of rows) {
    const ok = r.stored === r.expected ? 'OK' : 'MISMATCH';
    const bad = r.non2xx || r.errors ? ` (non-2xx ${r.non2xx}, errors ${r.errors})` : '';
    console.log(
      r.name.padEnd(40),
      fmt(r.spansPerSec).padStart(9),
      fmt(r.requestsOk / r.duration, 1).padStart(7),
      fmt(r.p50, 1).padStart(8),
      fmt(r.p99, 1).padStart(8),
      String(r.rssMb).padStart(7),
      fmt(r.spansPerSec / ceiling.decodeSpansPerSec, 2).padStart(6),
      fmt(r.drainMs / 1000, 1).padStart(8),
      fmt(r.stealPct, 0).padStart(8),
      ` ${r.stored}/${r.expected} ${ok}${bad}`,
    );
  }
  for (const r of rows)
    console.log(
      `  ${r.name}: ${describeCpu(r.cpu, r.requestsOk * SPANS_PER_REQUEST, 'span')} (load window only, drain not included)`,
    );
  console.log(
    'spans/s = spans acknowledged with 200 per second (a 200 means fsynced to the spool); ratio = spans/s ÷ decoder ceiling;',
  );
  console.log(
    'drain = SIGTERM → exit (final flush to storage); expected = spans the server acknowledged (its own counter, incl. requests in flight when the load stopped).',
  );
}

export async function runOtlpBench(seconds: number, clickhouseUrl: string): Promise<void> {
  const t = buildOtlpTemplate();
  const ceiling = measureCeiling(t);
  const ch = (db: string) => ({ TRACEGATE_CLICKHOUSE_URL: clickhouseUrl, TRACEGATE_CLICKHOUSE_DATABASE: db });
  const all: Array<[string, string, Record<string, string>]> = [
    ['duck-on', 'tracegate, embedded (DuckDB)', {}],
    ['ch-on', 'tracegate, ClickHouse 18.16', ch('bench_otlp')],
    ['duck-off', 'tracegate, embedded, enrichment off', { TRACEGATE_ENRICHMENT: 'false' }],
    ['ch-off', 'tracegate, ClickHouse, enrichment off', { ...ch('bench_otlp'), TRACEGATE_ENRICHMENT: 'false' }],
  ];
  const pick = process.env.BENCH_OTLP_CASES ? new Set(process.env.BENCH_OTLP_CASES.split(',')) : null;
  const rows: OtlpCaseResult[] = [];
  for (const [id, name, env] of all) {
    if (pick && !pick.has(id)) continue;
    rows.push(await runOtlpServer(name, env, seconds, t));
  }
  printOtlp(rows, ceiling, t);
}

if (import.meta.main) {
  const { startClickHouse } = await import('../test/support/clickhouse.ts');
  const chServer = await startClickHouse();
  try {
    await runOtlpBench(Number(process.env.BENCH_SECONDS ?? 20), chServer.url);
  } finally {
    await chServer.dispose();
  }
}
