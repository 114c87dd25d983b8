// The OTLP/HTTP route over real HTTP, on both storage backends: spans sent by the real
// OpenTelemetry JS exporters (protobuf and JSON, gzip and none, both paths, URL from code or
// from OTEL_EXPORTER_OTLP_* env vars), what is stored (GET /api/traces/:traceId), response
// bodies in the request's encoding, partial success, retries, and hostile requests answered
// with google.rpc.Status while the server stays healthy. Decoder/mapper details are covered
// by decode.test.ts and mapper.test.ts.
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { deflateSync, gzipSync } from 'node:zlib';
import { SpanKind, SpanStatusCode, context, diag, DiagLogLevel, trace, type Tracer } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import {
  BAD_REQUEST_TYPE_URL,
  ExportTraceServiceRequest,
  RpcBadRequest,
  RpcStatus,
} from '../../protocols/otlp/schema.ts';
import { priceUsd } from '../../processors/cost.ts';
import { BACKENDS, flushed, get, startTestServer, type TestServer } from '../support/server.ts';

const PATHS = ['/v1/traces', '/api/integrations/otlp/v1/traces'] as const;
const PB = 'application/x-protobuf';
const JSON_CT = 'application/json';
const LIMITS = {
  TRACEGATE_MAX_BODY_BYTES: String(1024 * 1024),
  TRACEGATE_MAX_DEPTH: '4',
  TRACEGATE_MAX_ATTRIBUTE_VALUE_BYTES: '256',
  TRACEGATE_MAX_STRING_BYTES: '4096',
};

// ---------------------------------------------------------------------------
// A realistic agent trace from the SDK: invoke_agent → chat gpt-4o, execute_tool → chat gpt-4o-mini

const SYSTEM = 'You are a support agent for an online shop. Be brief.';
const QUESTION = 'Where is my order #48213? It was due yesterday.';
const ANSWER = 'Your order #48213 shipped yesterday and arrives tomorrow.';
const TOOL_ARGS = '{"orderId":"48213"}';
const TOOL_RESULT = '{"status":"shipped","eta":"tomorrow"}';

interface AgentIds {
  traceId: string;
  root: string;
  chat: string;
  tool: string;
  inner: string;
  t0: number;
}

function emitAgentTrace(tracer: Tracer): AgentIds {
  const t0 = Date.now() - 5000; // whole milliseconds: exact durations
  const root = tracer.startSpan('invoke_agent support-bot', {
    kind: SpanKind.INTERNAL,
    startTime: t0,
    attributes: {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'support-bot',
      'gen_ai.provider.name': 'openai',
    },
  });
  const rootCtx = trace.setSpan(context.active(), root);
  const chat = tracer.startSpan(
    'chat gpt-4o',
    {
      kind: SpanKind.CLIENT,
      startTime: t0 + 10,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.request.temperature': 0.2,
        'gen_ai.response.id': 'chatcmpl-48213',
        'gen_ai.usage.input_tokens': 1200,
        'gen_ai.usage.output_tokens': 300,
        'gen_ai.response.finish_reasons': ['stop'],
        'gen_ai.system_instructions': JSON.stringify([{ type: 'text', content: SYSTEM }]),
        'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: QUESTION }] }]),
        'gen_ai.output.messages': JSON.stringify([
          { role: 'assistant', parts: [{ type: 'text', content: ANSWER }], finish_reason: 'stop' },
        ]),
      },
    },
    rootCtx,
  );
  chat.end(t0 + 810);
  const tool = tracer.startSpan(
    'execute_tool get_order',
    {
      kind: SpanKind.INTERNAL,
      startTime: t0 + 820,
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'get_order',
        'gen_ai.tool.call.id': 'call_1',
        'gen_ai.tool.call.arguments': TOOL_ARGS,
        'gen_ai.tool.call.result': TOOL_RESULT,
      },
    },
    rootCtx,
  );
  const inner = tracer.startSpan(
    'chat gpt-4o-mini',
    {
      kind: SpanKind.CLIENT,
      startTime: t0 + 900,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o-mini',
        'gen_ai.usage.input_tokens': 200,
        'gen_ai.usage.output_tokens': 50,
        'gen_ai.input.messages': JSON.stringify([
          { role: 'user', parts: [{ type: 'text', content: 'normalize the order id' }] },
        ]),
        'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: '48213' }] }]),
      },
    },
    trace.setSpan(context.active(), tool),
  );
  inner.setStatus({ code: SpanStatusCode.OK });
  inner.end(t0 + 1300);
  tool.end(t0 + 1400);
  root.end(t0 + 1500);
  return {
    traceId: root.spanContext().traceId,
    root: root.spanContext().spanId,
    chat: chat.spanContext().spanId,
    tool: tool.spanContext().spanId,
    inner: inner.spanContext().spanId,
    t0,
  };
}

const RESOURCE = {
  'service.name': 'support-api',
  'service.version': '2.4.1',
  'deployment.environment.name': 'staging',
};

/** Wraps an exporter and records every export result (the SDK swallows failures otherwise). */
class RecordingExporter implements SpanExporter {
  readonly results: Array<{ code: number; error?: Error }> = [];
  readonly inner: SpanExporter;
  constructor(inner: SpanExporter) {
    this.inner = inner;
  }
  export(spans: ReadableSpan[], cb: (r: { code: number; error?: Error }) => void): void {
    this.inner.export(spans, (r) => {
      this.results.push(r);
      cb(r);
    });
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

function sdk(exporter: SpanExporter, batch: boolean) {
  const rec = new RecordingExporter(exporter);
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes(RESOURCE)),
    spanProcessors: [
      batch ? new BatchSpanProcessor(rec, { scheduledDelayMillis: 60_000 }) : new SimpleSpanProcessor(rec),
    ],
  });
  return { provider, rec, tracer: provider.getTracer('route-test', '0.9.0') };
}

/** Spans from the SDK without sending them (for hand-posted requests). */
function sdkSpans(): { spans: ReadableSpan[]; ids: AgentIds } {
  const mem = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes(RESOURCE)),
    spanProcessors: [new SimpleSpanProcessor(mem)],
  });
  const ids = emitAgentTrace(provider.getTracer('route-test', '0.9.0'));
  return { spans: mem.getFinishedSpans(), ids };
}

// ---------------------------------------------------------------------------
// Hand-made requests

const hex = (n: number) => randomBytes(n).toString('hex');
const NS = 1_000_000n;

type Scalar = string | number | boolean;
function jsonKvs(o: Record<string, Scalar>) {
  return Object.entries(o).map(([key, v]) => ({
    key,
    value:
      typeof v === 'string'
        ? { stringValue: v }
        : typeof v === 'boolean'
          ? { boolValue: v }
          : Number.isInteger(v)
            ? { intValue: String(v) }
            : { doubleValue: v },
  }));
}
function pbKvs(o: Record<string, Scalar>) {
  return Object.entries(o).map(([key, v]) => ({
    key,
    value:
      typeof v === 'string'
        ? { stringValue: v }
        : typeof v === 'boolean'
          ? { boolValue: v }
          : Number.isInteger(v)
            ? { intValue: v }
            : { doubleValue: v },
  }));
}

interface PlainSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  startMs: number;
  endMs: number;
  attrs?: Record<string, Scalar>;
}

function plainSpan(traceId: string, name: string, over: Partial<PlainSpan> = {}): PlainSpan {
  const start = Date.now() - 10_000;
  return {
    traceId,
    spanId: hex(8),
    name,
    startMs: start,
    endMs: start + 250,
    attrs: {
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.usage.input_tokens': 10,
      'gen_ai.usage.output_tokens': 5,
    },
    ...over,
  };
}

function jsonRequest(spans: PlainSpan[], resource: Record<string, Scalar> = { 'service.name': 'hand-made' }): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: jsonKvs(resource) },
        scopeSpans: [
          {
            scope: { name: 'hand', version: '1' },
            spans: spans.map((s) => ({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              name: s.name,
              kind: 3,
              startTimeUnixNano: String(BigInt(s.startMs) * NS),
              endTimeUnixNano: String(BigInt(s.endMs) * NS),
              attributes: jsonKvs(s.attrs ?? {}),
              status: {},
            })),
          },
        ],
      },
    ],
  });
}

/** Protobuf with the project's own schema; ids are raw bytes (a bad id is just the wrong length). */
function pbRequest(
  spans: Array<PlainSpan & { rawSpanId?: Buffer; rawAttrs?: unknown[] }>,
  resource: Record<string, Scalar> = { 'service.name': 'hand-made' },
): Buffer {
  const msg = {
    resourceSpans: [
      {
        resource: { attributes: pbKvs(resource) },
        scopeSpans: [
          {
            scope: { name: 'hand', version: '1' },
            spans: spans.map((s) => ({
              traceId: Buffer.from(s.traceId, 'hex'),
              spanId: s.rawSpanId ?? Buffer.from(s.spanId, 'hex'),
              ...(s.parentSpanId ? { parentSpanId: Buffer.from(s.parentSpanId, 'hex') } : {}),
              name: s.name,
              kind: 3,
              startTimeUnixNano: String(BigInt(s.startMs) * NS),
              endTimeUnixNano: String(BigInt(s.endMs) * NS),
              attributes: s.rawAttrs ?? pbKvs(s.attrs ?? {}),
            })),
          },
        ],
      },
    ],
  };
  return Buffer.from(ExportTraceServiceRequest.encode(msg).finish());
}

/** A JSON AnyValue nested `depth` arrays deep. */
function nestedJson(depth: number): unknown {
  let v: unknown = { stringValue: 'leaf' };
  for (let i = 0; i < depth; i++) v = { arrayValue: { values: [v] } };
  return v;
}
function nestedPb(depth: number): unknown {
  let v: unknown = { stringValue: 'leaf' };
  for (let i = 0; i < depth; i++) v = { arrayValue: { values: [v] } };
  return v;
}

function decodeStatus(bytes: Buffer): { code?: number; message?: string } {
  return RpcStatus.toObject(RpcStatus.decode(bytes)) as { code?: number; message?: string };
}

/** The google.rpc.BadRequest field violations in a protobuf Status's details ([] when none). */
function statusViolations(bytes: Buffer): Array<{ field: string; description: string }> {
  const st = RpcStatus.decode(bytes) as unknown as { details: Array<{ typeUrl: string; value: Uint8Array }> };
  return st.details.flatMap((d) => {
    expect(d.typeUrl).to.equal(BAD_REQUEST_TYPE_URL);
    return (
      RpcBadRequest.toObject(RpcBadRequest.decode(d.value)) as {
        fieldViolations: Array<{ field: string; description: string }>;
      }
    ).fieldViolations;
  });
}

// ---------------------------------------------------------------------------

for (const backend of BACKENDS) {
  describe(`OTLP/HTTP route over real HTTP (${backend})`, function () {
    this.timeout(90_000);
    let s: TestServer;
    let key: string;
    let auth: Record<string, string>;
    let canary: AgentIds; // stored up front; must stay readable after every hostile request

    async function send(path: string, body: Buffer | string, headers: Record<string, string>) {
      const res = await fetch(`${s.url}${path}`, {
        method: 'POST',
        headers,
        body: typeof body === 'string' ? body : new Uint8Array(body),
      });
      const bytes = Buffer.from(await res.arrayBuffer());
      let json: any = null;
      try {
        json = JSON.parse(bytes.toString('utf8'));
      } catch {
        /* not JSON */
      }
      return { status: res.status, headers: res.headers, bytes, text: bytes.toString('utf8'), json };
    }
    const getTrace = async (traceId: string, h = auth) => get(`${s.url}/api/traces/${traceId}`, h);

    before(async () => {
      s = await startTestServer(backend, LIMITS);
      const k = await s.key('otlp-route');
      key = k.key;
      auth = { authorization: `Bearer ${key}` };
      const { spans, ids } = sdkSpans();
      const res = await send('/v1/traces', Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!), {
        ...auth,
        'content-type': PB,
      });
      expect(res.status).to.equal(200);
      canary = ids;
      await flushed(s);
    });
    after(() => s.close());

    /** Everything the brief promises about one stored agent trace. */
    async function expectAgentTrace(ids: AgentIds, h = auth): Promise<void> {
      const got = await getTrace(ids.traceId, h);
      expect(got.status, got.text).to.equal(200);
      const t = got.json.trace;
      const byId = new Map<string, any>(t.spans.map((x: any) => [x.spanId, x]));
      expect(t.spans).to.have.length(4);

      const root = byId.get(ids.root);
      expect(root).to.include({
        traceId: ids.traceId,
        parentSpanId: '',
        name: 'invoke_agent support-bot',
        kind: 'agent',
        source: 'otlp',
        actionName: 'support-bot',
        environment: 'staging',
        status: 'completed',
        durationMs: 1500,
        costUsd: 0,
      });
      expect(root.resourceAttributes).to.include(RESOURCE);
      expect(root.resourceAttributes['telemetry.sdk.language']).to.equal('nodejs');
      expect(root.attributes).to.include({
        'otel.span_kind': 'internal',
        'otel.scope.name': 'route-test',
        'otel.scope.version': '0.9.0',
        'gen_ai.agent.name': 'support-bot',
      });

      const chat = byId.get(ids.chat);
      const chatCost = priceUsd('gpt-4o', 'openai', { input: 1200, output: 300 });
      expect(chatCost).to.be.greaterThan(0);
      expect(chat).to.include({
        parentSpanId: ids.root,
        name: 'chat gpt-4o',
        kind: 'llm',
        model: 'gpt-4o',
        provider: 'openai',
        promptTokens: 1200,
        completionTokens: 300,
        totalTokens: 1500,
        finishReason: 'stop',
        requestId: 'chatcmpl-48213',
        durationMs: 800,
        status: 'completed',
        trainable: true,
        environment: 'staging',
      });
      expect(chat.costUsd).to.be.closeTo(chatCost, 1e-9);
      expect(chat.prompt).to.equal(`system: ${SYSTEM}\nuser: ${QUESTION}`);
      expect(chat.response).to.equal(ANSWER);
      expect(chat.attributes).to.include({
        'otel.span_kind': 'client',
        'gen_ai.request.temperature': 0.2,
        'gen_ai.usage.input_tokens': 1200,
      });
      expect(chat.attributes['gen_ai.response.finish_reasons']).to.deep.equal(['stop']);
      expect(chat.startTimeNs).to.equal(String(BigInt(ids.t0 + 10) * NS));
      expect(chat.endTimeNs).to.equal(String(BigInt(ids.t0 + 810) * NS));

      const tool = byId.get(ids.tool);
      expect(tool).to.include({
        parentSpanId: ids.root,
        kind: 'tool',
        actionName: 'get_order',
        prompt: TOOL_ARGS,
        response: TOOL_RESULT,
        costUsd: 0,
        durationMs: 580,
      });

      const inner = byId.get(ids.inner);
      const innerCost = priceUsd('gpt-4o-mini', 'openai', { input: 200, output: 50 });
      expect(inner).to.include({
        parentSpanId: ids.tool,
        kind: 'llm',
        model: 'gpt-4o-mini',
        prompt: 'user: normalize the order id',
        response: '48213',
        promptTokens: 200,
        completionTokens: 50,
      });
      expect(inner.attributes['otel.status_code']).to.equal('ok');
      expect(inner.costUsd).to.be.closeTo(innerCost, 1e-9);

      expect(t.tree).to.deep.equal([
        {
          spanId: ids.root,
          name: 'invoke_agent support-bot',
          kind: 'agent',
          children: [
            { spanId: ids.chat, name: 'chat gpt-4o', kind: 'llm', children: [] },
            {
              spanId: ids.tool,
              name: 'execute_tool get_order',
              kind: 'tool',
              children: [{ spanId: ids.inner, name: 'chat gpt-4o-mini', kind: 'llm', children: [] }],
            },
          ],
        },
      ]);
      // Roll-up: tokens/cost over all spans, latency of the whole trace, prompt/response of the root-most LLM span.
      expect(t.summary).to.include({
        name: 'invoke_agent support-bot',
        status: 'completed',
        spanCount: 4,
        errorCount: 0,
        durationMs: 1500,
        model: 'gpt-4o',
        provider: 'openai',
        prompt: chat.prompt,
        response: ANSWER,
        promptTokens: 1400,
        completionTokens: 350,
        totalTokens: 1750,
        actionName: 'support-bot',
        environment: 'staging',
        source: 'otlp',
      });
      expect(t.summary.costUsd).to.be.closeTo(chatCost + innerCost, 1e-8);
    }

    describe('real OpenTelemetry exporters', () => {
      const warnings: string[] = [];
      before(() => {
        diag.setLogger(
          {
            error: (m: string) => warnings.push(`error: ${m}`),
            warn: (m: string) => warnings.push(`warn: ${m}`),
            info: () => {},
            debug: () => {},
            verbose: () => {},
          },
          DiagLogLevel.WARN,
        );
      });
      after(() => diag.disable());
      beforeEach(() => {
        warnings.length = 0;
      });

      const matrix: Array<['proto' | 'http', 'gzip' | 'none', (typeof PATHS)[number]]> = [];
      for (const kind of ['proto', 'http'] as const)
        for (const compression of ['gzip', 'none'] as const)
          for (const path of PATHS) matrix.push([kind, compression, path]);
      matrix.forEach(([kind, compression, path], i) => {
        const batch = i % 2 === 0;
        it(`exporter-trace-otlp-${kind}, compression ${compression}, ${path}, ${batch ? 'Batch' : 'Simple'}SpanProcessor`, async () => {
          const opts = {
            url: `${s.url}${path}`,
            headers: { Authorization: `Bearer ${key}` },
            compression: compression as never,
          };
          const exporter = kind === 'proto' ? new ProtoExporter(opts) : new JsonExporter(opts);
          const { provider, rec, tracer } = sdk(exporter, batch);
          const ids = emitAgentTrace(tracer);
          await provider.forceFlush();
          expect(rec.results.length).to.be.greaterThan(0);
          for (const r of rec.results) expect(r.code, String(r.error)).to.equal(0); // ExportResultCode.SUCCESS
          expect(rec.results).to.have.length(batch ? 1 : 4);
          await provider.shutdown();
          // The exporter deserializes every 2xx answer and only warns when it cannot.
          expect(warnings).to.deep.equal([]);
          await flushed(s);
          await expectAgentTrace(ids);
        });
      });

      it('exporter configured only by OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_HEADERS', async () => {
        const names = [
          'OTEL_EXPORTER_OTLP_ENDPOINT',
          'OTEL_EXPORTER_OTLP_HEADERS',
          'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
          'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
          'OTEL_EXPORTER_OTLP_COMPRESSION',
          'OTEL_EXPORTER_OTLP_TRACES_COMPRESSION',
        ];
        const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
        let proto: ProtoExporter;
        let json: JsonExporter;
        try {
          for (const n of names) delete process.env[n];
          process.env.OTEL_EXPORTER_OTLP_ENDPOINT = s.url; // http://127.0.0.1:PORT → /v1/traces appended
          process.env.OTEL_EXPORTER_OTLP_HEADERS = `Authorization=Bearer%20${key}`;
          proto = new ProtoExporter(); // 0.223.1 reads the environment in the constructor
          process.env.OTEL_EXPORTER_OTLP_COMPRESSION = 'gzip';
          json = new JsonExporter();
        } finally {
          for (const n of names) {
            if (saved[n] === undefined) delete process.env[n];
            else process.env[n] = saved[n];
          }
        }
        for (const exporter of [proto, json]) {
          const { provider, rec, tracer } = sdk(exporter, true);
          const ids = emitAgentTrace(tracer);
          await provider.forceFlush();
          expect(
            rec.results.map((r) => r.code),
            String(rec.results[0]?.error),
          ).to.deep.equal([0]);
          await provider.shutdown();
          expect(warnings).to.deep.equal([]);
          await flushed(s);
          await expectAgentTrace(ids);
        }
      });

      it('an exporter with a wrong key gets a failed export (401), not a retry loop', async () => {
        const exporter = new ProtoExporter({
          url: `${s.url}/v1/traces`,
          headers: { Authorization: 'Bearer tg_not_a_key' },
          timeoutMillis: 5000,
        });
        const { provider, rec, tracer } = sdk(exporter, true);
        const ids = emitAgentTrace(tracer);
        const started = Date.now();
        const flushError = await provider.forceFlush().then(
          () => null,
          (e: unknown) => e,
        );
        expect(String(flushError)).to.match(/Unauthorized/); // forceFlush rejects with the export errors
        expect(Date.now() - started).to.be.lessThan(4000);
        expect(rec.results).to.have.length(1);
        expect(rec.results[0]!.code).to.equal(1); // FAILED
        expect(String(rec.results[0]!.error)).to.match(/401|Unauthorized/i);
        await provider.shutdown();
        await flushed(s);
        expect((await getTrace(ids.traceId)).status).to.equal(404);
      });
    });

    describe('response format', () => {
      it('protobuf: 200, Content-Type application/x-protobuf, an ExportTraceServiceResponse the SDK deserializes', async () => {
        const { spans, ids } = sdkSpans();
        const res = await send(
          '/api/integrations/otlp/v1/traces',
          Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!),
          { ...auth, 'content-type': PB },
        );
        expect(res.status).to.equal(200);
        expect(res.headers.get('content-type')).to.equal(PB);
        expect(res.bytes.length).to.equal(0); // full success: the empty message
        const decoded = ProtobufTraceSerializer.deserializeResponse(new Uint8Array(res.bytes));
        expect(decoded.partialSuccess).to.equal(undefined);
        await flushed(s);
        await expectAgentTrace(ids);
      });

      it('the audit record of each request names the path it was sent to (both paths share one handler)', async () => {
        const k = await s.key(); // a workspace of its own: its audit holds these requests only
        const h = { authorization: `Bearer ${k.key}`, 'content-type': JSON_CT };
        for (const path of PATHS)
          expect((await send(path, jsonRequest([plainSpan(hex(16), 'audited')]), h)).status, path).to.equal(200);
        await flushed(s);
        const audit = await get(`${s.url}/api/audit?action=ingest`, { authorization: `Bearer ${k.key}` });
        expect(audit.status).to.equal(200);
        expect(audit.json.items.map((r: { route: string }) => r.route).sort()).to.deep.equal([
          'POST /api/integrations/otlp/v1/traces',
          'POST /v1/traces',
        ]);
      });

      it('JSON: 200, Content-Type application/json, body {}', async () => {
        const { spans, ids } = sdkSpans();
        const res = await send('/v1/traces', Buffer.from(JsonTraceSerializer.serializeRequest(spans)!), {
          ...auth,
          'content-type': JSON_CT,
        });
        expect(res.status).to.equal(200);
        expect(res.headers.get('content-type')).to.equal('application/json');
        expect(res.json).to.deep.equal({});
        expect(JsonTraceSerializer.deserializeResponse(new Uint8Array(res.bytes))).to.deep.equal({});
        await flushed(s);
        await expectAgentTrace(ids);
      });

      it('an empty request ({} / zero-byte protobuf / no resourceSpans) → 200 with the empty response', async () => {
        for (const path of PATHS) {
          const j = await send(path, '{}', { ...auth, 'content-type': JSON_CT });
          expect(j.status).to.equal(200);
          expect(j.json).to.deep.equal({});
          const j2 = await send(path, '{"resourceSpans":[]}', { ...auth, 'content-type': JSON_CT });
          expect(j2.status).to.equal(200);
          expect(j2.json).to.deep.equal({});
          const p = await send(path, Buffer.alloc(0), { ...auth, 'content-type': PB });
          expect(p.status).to.equal(200);
          expect(p.headers.get('content-type')).to.equal(PB);
          expect(p.bytes.length).to.equal(0);
          const gz = await send(path, gzipSync(Buffer.alloc(0)), {
            ...auth,
            'content-type': PB,
            'content-encoding': 'gzip',
          });
          expect(gz.status).to.equal(200);
          // The alternative protobuf media type is accepted too, and echoed as the spec asks.
          const alt = await send(path, Buffer.alloc(0), { ...auth, 'content-type': 'application/protobuf' });
          expect(alt.status).to.equal(200);
          expect(alt.headers.get('content-type')).to.equal('application/protobuf');
          expect(alt.bytes.length).to.equal(0);
        }
      });
    });

    describe('partial success', () => {
      it('JSON: 3 valid + 2 invalid spans → 200 partialSuccess {rejectedSpans: "2"}, the 3 valid stored', async () => {
        const traceId = hex(16);
        const good = [plainSpan(traceId, 'ok-1'), plainSpan(traceId, 'ok-2'), plainSpan(traceId, 'ok-3')];
        const badId = plainSpan(traceId, 'bad-id', { spanId: 'not-a-span-id' });
        const backwards = plainSpan(traceId, 'backwards');
        backwards.endMs = backwards.startMs - 5;
        const res = await send('/v1/traces', jsonRequest([good[0]!, badId, good[1]!, backwards, good[2]!]), {
          ...auth,
          'content-type': JSON_CT,
        });
        expect(res.status).to.equal(200);
        expect(res.headers.get('content-type')).to.match(/^application\/json/);
        expect(res.json.partialSuccess.rejectedSpans).to.equal('2');
        expect(res.json.partialSuccess.errorMessage).to.match(/spanId/);
        expect(res.json.partialSuccess.errorMessage).to.match(/before/);
        await flushed(s);
        const got = await getTrace(traceId);
        expect(got.json.trace.spans.map((x: any) => x.name).sort()).to.deep.equal(['ok-1', 'ok-2', 'ok-3']);
        expect(got.json.trace.spans.map((x: any) => x.spanId).sort()).to.deep.equal(good.map((g) => g.spanId).sort());
      });

      it('protobuf: the same → partialSuccess in a protobuf ExportTraceServiceResponse', async () => {
        const traceId = hex(16);
        const good = [plainSpan(traceId, 'ok-1'), plainSpan(traceId, 'ok-2'), plainSpan(traceId, 'ok-3')];
        const badId = { ...plainSpan(traceId, 'bad-id'), rawSpanId: Buffer.from([1, 2, 3]) };
        const backwards = plainSpan(traceId, 'backwards');
        backwards.endMs = backwards.startMs - 5;
        const res = await send(
          '/api/integrations/otlp/v1/traces',
          pbRequest([good[0]!, badId, good[1]!, backwards, good[2]!]),
          { ...auth, 'content-type': PB },
        );
        expect(res.status).to.equal(200);
        expect(res.headers.get('content-type')).to.equal(PB);
        const decoded = ProtobufTraceSerializer.deserializeResponse(new Uint8Array(res.bytes));
        expect(Number(decoded.partialSuccess?.rejectedSpans)).to.equal(2);
        expect(decoded.partialSuccess?.errorMessage).to.match(/spanId/);
        await flushed(s);
        const got = await getTrace(traceId);
        expect(got.json.trace.spans.map((x: any) => x.spanId).sort()).to.deep.equal(good.map((g) => g.spanId).sort());
      });
    });

    it('idempotent: a request sent 3 times (exporter retries), and 3 more at once, stores each span once', async () => {
      const k = await s.key(); // a fresh workspace, so countSpans sees only this test
      const h = { authorization: `Bearer ${k.key}` };
      const { spans, ids } = sdkSpans();
      const pb = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
      for (let i = 0; i < 3; i++)
        expect((await send('/v1/traces', pb, { ...h, 'content-type': PB })).status).to.equal(200);
      const gz = gzipSync(pb);
      const all = await Promise.all(
        [0, 1, 2].map(() =>
          send('/api/integrations/otlp/v1/traces', gz, { ...h, 'content-type': PB, 'content-encoding': 'gzip' }),
        ),
      );
      expect(all.map((r) => r.status)).to.deep.equal([200, 200, 200]);
      await flushed(s);
      expect(await s.running.storage.countSpans(k.workspaceId)).to.equal(4);
      await expectAgentTrace(ids, h);
    });

    it('long strings are truncated at a UTF-8 boundary and marked, not dropped', async () => {
      const traceId = hex(16);
      const longContent = JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'q'.repeat(10_000) }] }]);
      const span = plainSpan(traceId, 'x'.repeat(300), {
        attrs: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.request.model': 'gpt-4o',
          'app.note': 'n'.repeat(1000),
          'app.accents': 'é'.repeat(300),
          'app.short': 'kept',
          'gen_ai.input.messages': longContent,
        },
      });
      for (const [enc, body] of [
        ['json', jsonRequest([span])],
        ['protobuf', pbRequest([{ ...span, traceId: hex(16) }])],
      ] as const) {
        const res = await send('/v1/traces', body, { ...auth, 'content-type': enc === 'json' ? JSON_CT : PB });
        expect(res.status, enc).to.equal(200);
      }
      await flushed(s);
      const got = await getTrace(traceId);
      expect(got.status).to.equal(200);
      const stored = got.json.trace.spans[0];
      expect(stored.attributes['app.note']).to.equal('n'.repeat(256));
      expect(stored.attributes['app.accents']).to.equal('é'.repeat(128)); // 256 bytes, never half a character
      expect(stored.attributes['app.short']).to.equal('kept');
      expect(stored.name).to.equal('x'.repeat(256));
      expect(Buffer.byteLength(stored.attributes['gen_ai.input.messages'])).to.equal(4096); // content keys: MAX_STRING_BYTES
      expect(stored.attributes['tracegate.truncated']).to.include.members([
        'app.note',
        'app.accents',
        'gen_ai.input.messages',
        'otel.span.name',
      ]);
      expect(stored.prompt.length).to.be.within(1, 4096);
      expect(stored).to.include({ kind: 'llm', model: 'gpt-4o' });
    });

    it('Content-Encoding deflate, x-gzip and upper-case GZIP are inflated (JSON and protobuf)', async () => {
      const traceId = hex(16);
      const cases: Array<[string, (b: Buffer) => Buffer]> = [
        ['deflate', deflateSync],
        ['x-gzip', gzipSync],
        ['GZIP', gzipSync],
        [' Deflate ', deflateSync],
      ];
      const names: string[] = [];
      for (const [encoding, compress] of cases) {
        for (const enc of ['json', 'protobuf'] as const) {
          const name = `${enc} ${encoding.trim()}`;
          names.push(name);
          const span = plainSpan(traceId, name);
          const body = enc === 'json' ? Buffer.from(jsonRequest([span])) : pbRequest([span]);
          const res = await send('/v1/traces', compress(body), {
            ...auth,
            'content-type': enc === 'json' ? JSON_CT : PB,
            'content-encoding': encoding,
          });
          expect(res.status, `${name}: ${res.text}`).to.equal(200);
        }
      }
      await flushed(s);
      const got = await getTrace(traceId);
      expect(got.json.trace.spans.map((x: any) => x.name).sort()).to.deep.equal(names.sort());
    });

    it("stores a client's tracegate.* attributes as client.tracegate.* and cuts over-long keys (marked)", async () => {
      const traceId = hex(16);
      const longKey = 'app.' + 'k'.repeat(100_000);
      const span = plainSpan(traceId, 'forged', {
        attrs: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.request.model': 'gpt-4o-mini',
          'gen_ai.usage.input_tokens': 10,
          'tracegate.cost_source': 'client',
          'tracegate.truncated': 'prompt',
          [longKey]: 'v',
        },
      });
      const res = await send(
        '/v1/traces',
        jsonRequest([span], { 'service.name': 'forger', 'tracegate.workspace': 'other' }),
        { ...auth, 'content-type': JSON_CT },
      );
      expect(res.status, res.text).to.equal(200);
      await flushed(s);
      const stored = (await getTrace(traceId)).json.trace.spans[0];
      expect(stored.attributes).to.include({
        'client.tracegate.cost_source': 'client',
        'client.tracegate.truncated': 'prompt',
      });
      expect(stored.attributes['tracegate.cost_source']).to.be.oneOf(['price_table', 'unpriced']);
      const cut = `${longKey.slice(0, 1015)}~${createHash('sha256').update(longKey).digest('hex').slice(0, 8)}`;
      expect(stored.attributes[cut]).to.equal('v');
      expect(stored.attributes['tracegate.truncated']).to.deep.equal([cut]);
      expect(stored.resourceAttributes).to.deep.equal({
        'service.name': 'forger',
        'client.tracegate.workspace': 'other',
      });
    });

    describe('errors as google.rpc.Status, server stays healthy', () => {
      /** healthz 200, the canary trace is still readable, and a fresh valid request is accepted and stored. */
      async function stillHealthy(): Promise<void> {
        expect((await get(`${s.url}/healthz`)).status).to.equal(200);
        const traceId = hex(16);
        const ok = await send('/v1/traces', jsonRequest([plainSpan(traceId, 'after')]), {
          ...auth,
          'content-type': JSON_CT,
        });
        expect(ok.status).to.equal(200);
        await flushed(s);
        expect((await getTrace(traceId)).json.trace.spans).to.have.length(1);
        expect((await getTrace(canary.traceId)).json.trace.spans).to.have.length(4);
      }

      it('401 without or with a wrong key: Status in the request encoding (protobuf for protobuf)', async () => {
        const pb = pbRequest([plainSpan(hex(16), 'no-auth')]);
        for (const headers of [{}, { authorization: 'Bearer tg_wrong' }] as Array<Record<string, string>>) {
          const p = await send('/v1/traces', pb, { ...headers, 'content-type': PB });
          expect(p.status).to.equal(401);
          expect(p.headers.get('content-type')).to.equal(PB);
          expect(p.headers.get('www-authenticate')).to.match(/^Bearer/);
          const st = decodeStatus(p.bytes);
          expect(st.code).to.equal(16); // UNAUTHENTICATED
          expect(st.message).to.match(/key/i);
          const j = await send('/api/integrations/otlp/v1/traces', jsonRequest([plainSpan(hex(16), 'no-auth')]), {
            ...headers,
            'content-type': JSON_CT,
          });
          expect(j.status).to.equal(401);
          expect(j.headers.get('content-type')).to.match(/^application\/json/);
          expect(j.json).to.include({ code: 16 });
          expect(j.json.message).to.be.a('string');
        }
        await stillHealthy();
      });

      it('415 for text/plain (JSON Status) and for an unknown Content-Encoding', async () => {
        const res = await send('/v1/traces', 'resourceSpans=1', { ...auth, 'content-type': 'text/plain' });
        expect(res.status).to.equal(415);
        expect(res.headers.get('content-type')).to.match(/^application\/json/);
        expect(res.json).to.include({ code: 3 });
        expect(res.json.message).to.match(/Content-Type/);
        const br = await send('/v1/traces', pbRequest([plainSpan(hex(16), 'br')]), {
          ...auth,
          'content-type': PB,
          'content-encoding': 'br',
        });
        expect(br.status).to.equal(415);
        expect(br.headers.get('content-type')).to.equal(PB);
        expect(decodeStatus(br.bytes).code).to.equal(3);
        await stillHealthy();
      });

      it('413 over TRACEGATE_MAX_BODY_BYTES, also after decompression (gzip bomb)', async () => {
        const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024)); // 64 MiB of zeros, ~64 KiB on the wire
        expect(bomb.length).to.be.lessThan(128 * 1024);
        const p = await send('/v1/traces', bomb, { ...auth, 'content-type': PB, 'content-encoding': 'gzip' });
        expect(p.status).to.equal(413);
        expect(p.headers.get('content-type')).to.equal(PB);
        expect(decodeStatus(p.bytes).code).to.equal(11); // OUT_OF_RANGE
        const jbomb = gzipSync(Buffer.from(`{"resourceSpans":[],"x":"${'a'.repeat(8 * 1024 * 1024)}"}`));
        const j = await send('/api/integrations/otlp/v1/traces', jbomb, {
          ...auth,
          'content-type': JSON_CT,
          'content-encoding': 'gzip',
        });
        expect(j.status).to.equal(413);
        expect(j.json).to.include({ code: 11 });
        const plain = await send('/v1/traces', Buffer.alloc(1024 * 1024 + 1), { ...auth, 'content-type': PB });
        expect(plain.status).to.equal(413);
        await stillHealthy();
      });

      it('400 for an undecodable protobuf body, and for malformed JSON', async () => {
        for (const body of [
          Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01]),
          Buffer.from([0x0a, 0x05, 0x12, 0x03]),
          randomBytes(2048),
        ]) {
          const res = await send('/v1/traces', body, { ...auth, 'content-type': PB });
          expect(res.status).to.equal(400);
          expect(res.headers.get('content-type')).to.equal(PB);
          const st = decodeStatus(res.bytes);
          expect(st.code).to.equal(3); // INVALID_ARGUMENT
          expect(st.message).to.be.a('string').and.not.equal('');
        }
        const j = await send('/v1/traces', '{"resourceSpans":[', { ...auth, 'content-type': JSON_CT });
        expect(j.status).to.equal(400);
        expect(j.json).to.include({ code: 3 });
        await stillHealthy();
      });

      it('400 for attribute nesting deeper than TRACEGATE_MAX_DEPTH (JSON and protobuf), fine at the limit', async () => {
        const traceId = hex(16);
        const mk = (depth: number) => {
          const body = JSON.parse(jsonRequest([plainSpan(traceId, `depth-${depth}`)]));
          body.resourceSpans[0].scopeSpans[0].spans[0].attributes.push({ key: 'deep', value: nestedJson(depth) });
          return JSON.stringify(body);
        };
        const tooDeep = await send('/v1/traces', mk(5), { ...auth, 'content-type': JSON_CT });
        expect(tooDeep.status).to.equal(400);
        expect(tooDeep.json.code).to.equal(3);
        expect(tooDeep.json.message).to.match(/nesting/);
        const deepPb = pbRequest([{ ...plainSpan(hex(16), 'deep'), rawAttrs: [{ key: 'deep', value: nestedPb(5) }] }]);
        const p = await send('/v1/traces', deepPb, { ...auth, 'content-type': PB });
        expect(p.status).to.equal(400);
        expect(decodeStatus(p.bytes).message).to.match(/nesting/);
        // A hostile body: 200k levels, tiny on the wire.
        const hostile = Buffer.from('{"resourceSpans":' + '['.repeat(200_000) + ']'.repeat(200_000) + '}');
        expect(
          (
            await send('/v1/traces', gzipSync(hostile), {
              ...auth,
              'content-type': JSON_CT,
              'content-encoding': 'gzip',
            })
          ).status,
        ).to.equal(400);
        const atLimit = await send('/v1/traces', mk(4), { ...auth, 'content-type': JSON_CT });
        expect(atLimit.status).to.equal(200);
        await flushed(s);
        let v = (await getTrace(traceId)).json.trace.spans[0].attributes.deep;
        for (let i = 0; i < 4; i++) v = v[0];
        expect(v).to.equal('leaf');
        await stillHealthy();
      });

      it('400 for invalid UTF-8 (JSON body, protobuf string field)', async () => {
        const json = Buffer.from(jsonRequest([plainSpan(hex(16), 'QQQQ')]));
        const at = json.indexOf('QQQQ');
        json[at] = 0xc3;
        json[at + 1] = 0x28;
        const j = await send('/v1/traces', json, { ...auth, 'content-type': JSON_CT });
        expect(j.status).to.equal(400);
        expect(j.json).to.include({ code: 3 });
        expect(j.json.message).to.match(/UTF-8/);
        const pb = pbRequest([plainSpan(hex(16), 'QQQQ')]);
        const at2 = pb.indexOf('QQQQ');
        pb[at2] = 0xc3;
        pb[at2 + 1] = 0x28;
        const p = await send('/v1/traces', pb, { ...auth, 'content-type': PB });
        expect(p.status).to.equal(400);
        expect(decodeStatus(p.bytes).message).to.match(/UTF-8/);
        await stillHealthy();
      });

      it('400 for __proto__ keys (JSON object keys, attribute keys), and nothing is polluted', async () => {
        const traceId = hex(16);
        const base = jsonRequest([plainSpan(traceId, 'proto')]);
        const asKey = base.replace('"resourceSpans":[{', '"resourceSpans":[{"__proto__":{"polluted":1},');
        const asAttr = base.replace(
          '"attributes":[{',
          '"attributes":[{"key":"__proto__","value":{"kvlistValue":{"values":[{"key":"polluted","value":{"boolValue":true}}]}}},{',
        );
        const asNested = base.replace(
          '"attributes":[{',
          '"attributes":[{"key":"ok","value":{"kvlistValue":{"values":[{"key":"__proto__","value":{"stringValue":"x"}}]}}},{',
        );
        const inArrayWrapper = base.replace(
          '"attributes":[{',
          '"attributes":[{"key":"ok","value":{"arrayValue":{"__proto__":{"polluted":1},"values":[]}}},{',
        );
        const inKvlistWrapper = base.replace(
          '"attributes":[{',
          '"attributes":[{"key":"ok","value":{"kvlistValue":{"__proto__":{"polluted":1},"values":[]}}},{',
        );
        const inKvlistEntry = base.replace(
          '"attributes":[{',
          '"attributes":[{"key":"ok","value":{"kvlistValue":{"values":[{"key":"a","__proto__":{"polluted":1},"value":{"boolValue":true}}]}}},{',
        );
        for (const body of [asKey, asAttr, asNested, inArrayWrapper, inKvlistWrapper, inKvlistEntry]) {
          expect(body).to.not.equal(base);
          const res = await send('/v1/traces', body, { ...auth, 'content-type': JSON_CT });
          expect(res.status, body.slice(0, 120)).to.equal(400);
          expect(res.json.code).to.equal(3);
          expect(res.json.message).to.match(/__proto__/);
        }
        const pb = pbRequest([
          { ...plainSpan(traceId, 'proto'), rawAttrs: [{ key: '__proto__', value: { stringValue: 'x' } }] },
        ]);
        const p = await send('/v1/traces', pb, { ...auth, 'content-type': PB });
        expect(p.status).to.equal(400);
        expect(decodeStatus(p.bytes).message).to.match(/__proto__/);
        expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
        await flushed(s);
        expect((await getTrace(traceId)).status).to.equal(404); // the whole request was refused
        await stillHealthy();
      });
    });

    describe('Status details and unexpected failures', () => {
      it('400 Status carries a google.rpc.BadRequest field violation naming the place (JSON and protobuf)', async () => {
        const traceId = hex(16);
        const spans = [plainSpan(traceId, 'a'), plainSpan(traceId, 'b'), plainSpan(traceId, 'c')];
        const body = JSON.parse(jsonRequest(spans));
        body.resourceSpans[0].scopeSpans[0].spans[2].attributes.push({ key: 'deep', value: nestedJson(5) });
        const j = await send('/v1/traces', JSON.stringify(body), { ...auth, 'content-type': JSON_CT });
        expect(j.status).to.equal(400);
        const field = 'resourceSpans[0].scopeSpans[0].spans[2].attributes["deep"]';
        expect(j.json).to.deep.equal({
          code: 3,
          message: j.json.message,
          details: [{ '@type': BAD_REQUEST_TYPE_URL, fieldViolations: [{ field, description: j.json.message }] }],
        });
        expect(j.json.message).to.match(/nesting/);
        const pbSpans = spans.map((sp, i) =>
          i === 1 ? { ...sp, rawAttrs: [...pbKvs({ a: 1 }), { key: '__proto__', value: { stringValue: 'x' } }] } : sp,
        );
        const p = await send('/v1/traces', pbRequest(pbSpans), { ...auth, 'content-type': PB });
        expect(p.status).to.equal(400);
        expect(statusViolations(p.bytes)).to.deep.equal([
          {
            field: 'resourceSpans[0].scopeSpans[0].spans[1].attributes["__proto__"]',
            description: decodeStatus(p.bytes).message,
          },
        ]);
        const deepPb = await send(
          '/v1/traces',
          pbRequest([spans[0]!, { ...spans[1]!, rawAttrs: [{ key: 'deep', value: nestedPb(5) }] }]),
          { ...auth, 'content-type': PB },
        );
        expect(statusViolations(deepPb.bytes).map((v) => v.field)).to.deep.equal([
          'resourceSpans[0].scopeSpans[0].spans[1].attributes["deep"]',
        ]);
        // no location known → no details
        const bad = await send('/v1/traces', '{"resourceSpans":[', { ...auth, 'content-type': JSON_CT });
        expect(bad.json).to.have.all.keys('code', 'message');
      });

      it('an unexpected failure is a 500 INTERNAL Status in the request encoding, without internals', async () => {
        const pipeline = s.running.pipeline as unknown as { ingest: unknown };
        pipeline.ingest = async () => {
          throw new Error('connect ECONNREFUSED 10.0.0.7:9000 at /srv/tracegate/storage/secret.ts');
        };
        try {
          const j = await send('/v1/traces', jsonRequest([plainSpan(hex(16), 'boom')]), {
            ...auth,
            'content-type': JSON_CT,
          });
          expect(j.status).to.equal(500);
          expect(j.headers.get('content-type')).to.match(/^application\/json/);
          expect(j.json).to.deep.equal({ code: 13, message: 'internal error' });
          const p = await send('/api/integrations/otlp/v1/traces', pbRequest([plainSpan(hex(16), 'boom')]), {
            ...auth,
            'content-type': PB,
          });
          expect(p.status).to.equal(500);
          expect(p.headers.get('content-type')).to.equal(PB);
          expect(decodeStatus(p.bytes)).to.deep.equal({ code: 13, message: 'internal error' });
          expect(p.text).to.not.match(/ECONNREFUSED|secret/);
        } finally {
          delete pipeline.ingest; // the prototype's method again
        }
        expect(
          (await send('/v1/traces', jsonRequest([plainSpan(hex(16), 'fine')]), { ...auth, 'content-type': JSON_CT }))
            .status,
        ).to.equal(200);
        // Documented too, as the Status it is (JSON or protobuf), on both paths.
        const doc = (await get(`${s.url}/openapi.json`)).json;
        for (const path of ['/v1/traces', '/api/integrations/otlp/v1/traces']) {
          expect(doc.paths[path].post.responses, path).to.have.property('500');
          const content = doc.paths[path].post.responses['500'].content;
          expect(content, path).to.have.keys('application/json', 'application/x-protobuf');
          expect(content['application/json'].schema).to.deep.equal({ $ref: '#/components/schemas/Status' });
        }
      });
    });

    describe('spool full while storage is down (separate server)', () => {
      let bp: TestServer;
      before(async () => {
        bp = await startTestServer(backend, { TRACEGATE_SPOOL_MAX_BYTES: String(1024 * 1024) });
      });
      after(() => bp.close());

      it('503 with Retry-After and an UNAVAILABLE Status in the request encoding; accepted spans are stored once storage is back', async () => {
        const k = await bp.key();
        const h = { authorization: `Bearer ${k.key}` };
        await flushed(bp);
        const storage = bp.running.storage as unknown as Record<string, unknown>;
        const down = async () => {
          throw new Error('storage unreachable (test)');
        };
        const patched = ['insertSpans', 'insertEnrichment', 'insertSpoolFiles', 'ping'];
        for (const m of patched) storage[m] = m === 'ping' ? async () => false : down;
        let accepted = 0;
        try {
          let last: Awaited<ReturnType<typeof send>> | null = null;
          for (let i = 0; i < 40; i++) {
            const spans = Array.from({ length: 20 }, () =>
              plainSpan(hex(16), 'filler', { attrs: { 'app.blob': randomBytes(15_000).toString('hex') } }),
            );
            const res = await fetch(`${bp.url}/v1/traces`, {
              method: 'POST',
              headers: { ...h, 'content-type': JSON_CT },
              body: jsonRequest(spans),
            });
            const bytes = Buffer.from(await res.arrayBuffer());
            last = {
              status: res.status,
              headers: res.headers,
              bytes,
              text: bytes.toString('utf8'),
              json: res.status === 200 ? null : JSON.parse(bytes.toString('utf8')),
            };
            if (res.status !== 200) break;
            accepted += 20;
          }
          expect(accepted).to.be.greaterThan(0);
          expect(last!.status, last!.text).to.equal(503);
          expect(Number(last!.headers.get('retry-after'))).to.be.greaterThan(0);
          expect(last!.headers.get('content-type')).to.match(/^application\/json/);
          expect(last!.json).to.include({ code: 14 }); // UNAVAILABLE
          expect(last!.json.message).to.match(/spool is full/);
          const p = await fetch(`${bp.url}/api/integrations/otlp/v1/traces`, {
            method: 'POST',
            headers: { ...h, 'content-type': PB },
            body: new Uint8Array(pbRequest([plainSpan(hex(16), 'refused')])),
          });
          expect(p.status).to.equal(503);
          expect(Number(p.headers.get('retry-after'))).to.be.greaterThan(0);
          expect(p.headers.get('content-type')).to.equal(PB);
          const st = decodeStatus(Buffer.from(await p.arrayBuffer()));
          expect(st.code).to.equal(14);
          expect(st.message).to.match(/spool is full/);
        } finally {
          for (const m of patched) delete storage[m];
        }
        await flushed(bp);
        expect(await bp.running.storage.countSpans(k.workspaceId)).to.equal(accepted);
        expect(
          (
            await fetch(`${bp.url}/v1/traces`, {
              method: 'POST',
              headers: { ...h, 'content-type': JSON_CT },
              body: jsonRequest([plainSpan(hex(16), 'after')]),
            })
          ).status,
        ).to.equal(200);
      });
    });

    describe('rate limit (separate server)', () => {
      let rl: TestServer;
      before(async () => {
        rl = await startTestServer(backend, {
          TRACEGATE_RATE_LIMIT_POINTS: '3',
          TRACEGATE_RATE_LIMIT_WINDOW_SECONDS: '60',
        });
      });
      after(() => rl.close());

      it('429 with Retry-After and a RESOURCE_EXHAUSTED Status once the limit is exceeded', async () => {
        const k = await rl.key();
        const h = { authorization: `Bearer ${k.key}` };
        const traceId = hex(16);
        const body = pbRequest([plainSpan(traceId, 'limited')]);
        for (let i = 0; i < 3; i++) {
          const ok = await fetch(`${rl.url}/v1/traces`, {
            method: 'POST',
            headers: { ...h, 'content-type': PB },
            body: new Uint8Array(body),
          });
          expect(ok.status).to.equal(200);
          await ok.arrayBuffer();
        }
        const res = await fetch(`${rl.url}/v1/traces`, {
          method: 'POST',
          headers: { ...h, 'content-type': PB },
          body: new Uint8Array(body),
        });
        expect(res.status).to.equal(429);
        expect(Number(res.headers.get('retry-after'))).to.be.within(1, 60);
        expect(res.headers.get('content-type')).to.equal(PB);
        expect(decodeStatus(Buffer.from(await res.arrayBuffer())).code).to.equal(8);
        const j = await fetch(`${rl.url}/api/integrations/otlp/v1/traces`, {
          method: 'POST',
          headers: { ...h, 'content-type': JSON_CT },
          body: '{}',
        });
        expect(j.status).to.equal(429);
        expect(await j.json()).to.include({ code: 8 });
        // healthy, and what was accepted before is stored
        expect((await get(`${rl.url}/healthz`)).status).to.equal(200);
        await flushed(rl);
        const got = await get(`${rl.url}/api/traces/${traceId}`, h);
        expect(got.json.trace.spans).to.have.length(1);
      });
    });
  });
}
