// OTLP/HTTP logs (POST /v1/logs) over real HTTP, on both storage backends. The current GenAI conventions, and the
// OpenTelemetry openai instrumentation that follows them, send prompts and completions as log records (events)
// tied to the model call's span, while the span itself carries only model and usage. Sent here with the real
// @opentelemetry/sdk-logs and the official OTLP log exporters (protobuf and JSON), the way that instrumentation
// emits them: each record becomes an event span under its span, and the trace shows the call's prompt and
// response, whichever signal arrives first; governance scans and redacts the log bodies; retries store nothing twice.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SpanKind, context, trace, type Span } from '@opentelemetry/api';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { LoggerProvider, SimpleLogRecordProcessor, type LogRecordExporter } from '@opentelemetry/sdk-logs';
import { OTLPLogExporter as ProtoLogExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { OTLPLogExporter as JsonLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { createKey } from '../../collector/workspaces/admin.ts';
import { BACKENDS, cli, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';

const SYSTEM = 'You are terse.';
const QUESTION = 'What is the capital of France?';
const EMAIL_QUESTION = 'What is the capital of France? Reply to jane.doe@example.com';
const ANSWER = 'The capital of France is Paris.';

interface Sent {
  traceId: string;
  spanId: string;
}

for (const backend of BACKENDS) {
  describe(`OTLP logs: GenAI events on the logs signal (${backend})`, function () {
    this.timeout(120_000);
    let s: TestServer;
    before(async () => {
      s = await startTestServer(backend);
    });
    after(async () => {
      await s?.close();
    });

    const exporters = (key: string, path: string) => {
      const headers = { Authorization: `Bearer ${key}` };
      return {
        proto: new ProtoLogExporter({ url: `${s.url}${path}`, headers }),
        json: new JsonLogExporter({ url: `${s.url}${path}`, headers }),
        traces: new OTLPTraceExporter({ url: `${s.url}/v1/traces`, headers }),
      };
    };

    /** A chat call as the openai instrumentation records it: the span has model and usage, the text is in log events. */
    async function chatCall(
      key: string,
      logExporter: LogRecordExporter,
      opts: { logsFirst?: boolean; question?: string } = {},
    ): Promise<Sent> {
      const ex = exporters(key, '/v1/logs');
      const resource = resourceFromAttributes({ 'service.name': 'logs-test' });
      const spans = new BasicTracerProvider({ resource, spanProcessors: [new SimpleSpanProcessor(ex.traces)] });
      const logs = new LoggerProvider({
        resource,
        processors: [new SimpleLogRecordProcessor({ exporter: logExporter })],
      });
      const tracer = spans.getTracer('@opentelemetry/instrumentation-openai', '0.22.0');
      const logger = logs.getLogger('@opentelemetry/instrumentation-openai', '0.22.0');
      const t0 = Date.now() - 2000;
      const span: Span = tracer.startSpan('chat gpt-4o-mini', {
        kind: SpanKind.CLIENT,
        startTime: t0,
        attributes: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.system': 'openai',
          'gen_ai.request.model': 'gpt-4o-mini',
          'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
          'gen_ai.response.id': `chatcmpl-${randomBytes(4).toString('hex')}`,
          'gen_ai.response.finish_reasons': ['stop'],
          'gen_ai.usage.input_tokens': 21,
          'gen_ai.usage.output_tokens': 7,
        },
      });
      const ctx = trace.setSpan(context.active(), span);
      const ids = { traceId: span.spanContext().traceId, spanId: span.spanContext().spanId };
      const attributes = { 'gen_ai.system': 'openai' };
      const emitLogs = () => {
        logger.emit({
          eventName: 'gen_ai.system.message',
          attributes: { ...attributes, 'event.name': 'gen_ai.system.message' },
          body: { content: SYSTEM },
          context: ctx,
          timestamp: t0 + 1,
        });
        logger.emit({
          eventName: 'gen_ai.user.message',
          attributes: { ...attributes, 'event.name': 'gen_ai.user.message' },
          body: { content: opts.question ?? QUESTION },
          context: ctx,
          timestamp: t0 + 1,
        });
        logger.emit({
          eventName: 'gen_ai.choice',
          attributes: { ...attributes, 'event.name': 'gen_ai.choice' },
          body: { finish_reason: 'stop', index: 0, message: { content: ANSWER } },
          context: ctx,
          timestamp: t0 + 900,
        });
      };
      if (opts.logsFirst) emitLogs();
      span.end(t0 + 1000);
      if (!opts.logsFirst) emitLogs();
      await logs.forceFlush();
      await spans.forceFlush();
      await logs.shutdown();
      await spans.shutdown();
      return ids;
    }

    const detail = async (key: string, traceId: string) => {
      const res = await get(`${s.url}/api/traces/${traceId}`, { authorization: `Bearer ${key}` });
      expect(res.status).to.equal(200);
      return res.json.trace as { summary: Record<string, unknown>; spans: Array<Record<string, any>> };
    };

    for (const [name, logsFirst] of [
      ['protobuf, logs after the span', false],
      ['JSON, logs before the span', true],
    ] as const) {
      it(`the model call shows the prompt and response its events carried (${name})`, async () => {
        const k = await s.key();
        const ex = exporters(k.key, '/v1/logs');
        const ids = await chatCall(k.key, logsFirst ? ex.json : ex.proto, { logsFirst });
        await flushed(s);
        const t = await detail(k.key, ids.traceId);
        const call = t.spans.find((x) => x.spanId === ids.spanId)!;
        expect([call.kind, call.model, call.promptTokens, call.completionTokens]).to.deep.equal([
          'llm',
          'gpt-4o-mini-2024-07-18',
          21,
          7,
        ]);
        expect(call.prompt).to.equal(`system: ${SYSTEM}\nuser: ${QUESTION}`);
        expect(call.response).to.equal(ANSWER);
        expect(call.finishReason).to.equal('stop');
        const events = t.spans.filter((x) => x.attributes['tracegate.signal'] === 'logs');
        expect(
          events.map((e) => [e.name, e.kind, e.parentSpanId, e.promptTokens, e.costUsd, e.trainable]).sort(),
        ).to.deep.equal([
          ['gen_ai.choice', 'other', ids.spanId, 0, 0, false],
          ['gen_ai.system.message', 'other', ids.spanId, 0, 0, false],
          ['gen_ai.user.message', 'other', ids.spanId, 0, 0, false],
        ]);
        expect(events.find((e) => e.name === 'gen_ai.choice')!.attributes['otel.log.body']).to.deep.equal({
          finish_reason: 'stop',
          index: 0,
          message: { content: ANSWER },
        });
        // The summary: the call's text; usage counted once (the event spans carry none).
        expect([
          t.summary.prompt,
          t.summary.response,
          t.summary.promptTokens,
          t.summary.completionTokens,
          t.summary.spanCount,
        ]).to.deep.equal([call.prompt, ANSWER, 21, 7, 4]);
        const list = await get(`${s.url}/api/traces?limit=10`, { authorization: `Bearer ${k.key}` });
        expect(
          list.json.items.map((x: { traceId: string; totalTokens: number }) => [x.traceId, x.totalTokens]),
        ).to.deep.equal([[ids.traceId, 28]]);
      });
    }

    it('governance scans the log bodies: findings, and redaction under a redact policy, before anything is stored', async () => {
      const k = await createKey(s.running.storage, `logs-gov-${backend}`);
      const file = join(s.dataDir, 'logs-policy.json');
      writeFileSync(file, JSON.stringify({ version: 2, actions: { email: 'redact' } }));
      const policy = await cli(s, ['policy', 'set', '--workspace', k.workspace, '--file', file]);
      expect(policy.code, policy.stderr).to.equal(0);
      const ids = await chatCall(k.key, exporters(k.key, '/v1/logs').proto, { question: EMAIL_QUESTION });
      await flushed(s);
      const t = await detail(k.key, ids.traceId);
      const user = t.spans.find((x) => x.name === 'gen_ai.user.message')!;
      expect(JSON.stringify(user)).to.not.include('jane.doe@example.com');
      expect(user.attributes['otel.log.body'].content).to.include('[REDACTED');
      expect(t.spans.find((x) => x.spanId === ids.spanId)!.prompt).to.match(
        /^system: You are terse\.\nuser: What is the capital of France\? Reply to \[REDACTED/,
      );
      const findings = await get(`${s.url}/api/findings?traceId=${ids.traceId}`, { authorization: `Bearer ${k.key}` });
      expect(
        findings.json.items.map((f: { category: string; spanId: string }) => [f.category, f.spanId]),
      ).to.deep.equal([['email', user.spanId]]);
      const v = await get(`${s.url}/api/traces/${ids.traceId}/verification`, { authorization: `Bearer ${k.key}` });
      expect([v.json.ok, v.json.problems]).to.deep.equal([true, []]);
    });

    it('an exporter retry stores nothing twice; a record without a span context is rejected in partialSuccess', async () => {
      const k = await s.key();
      const traceId = randomBytes(16).toString('hex');
      const spanId = randomBytes(8).toString('hex');
      const body = {
        resourceLogs: [
          {
            resource: { attributes: [{ key: 'service.name', value: { stringValue: 'raw' } }] },
            scopeLogs: [
              {
                scope: { name: 'raw-json' },
                logRecords: [
                  {
                    timeUnixNano: String(BigInt(Date.now()) * 1_000_000n),
                    severityNumber: 'SEVERITY_NUMBER_INFO',
                    eventName: 'gen_ai.client.inference.operation.details',
                    traceId,
                    spanId,
                    attributes: [
                      {
                        key: 'gen_ai.input.messages',
                        value: {
                          stringValue: JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'hello' }] }]),
                        },
                      },
                      {
                        key: 'gen_ai.output.messages',
                        value: {
                          stringValue: JSON.stringify([
                            {
                              role: 'assistant',
                              parts: [{ type: 'text', content: 'hi there' }],
                              finish_reason: 'stop',
                            },
                          ]),
                        },
                      },
                    ],
                  },
                  {
                    observedTimeUnixNano: String(BigInt(Date.now()) * 1_000_000n),
                    body: { stringValue: 'an application log with no span' },
                  },
                ],
              },
            ],
          },
        ],
      };
      const auth = { authorization: `Bearer ${k.key}` };
      for (let i = 0; i < 2; i++) {
        const res = await post(`${s.url}/api/integrations/otlp/v1/logs`, body, auth);
        expect(res.status).to.equal(200);
        expect(res.json.partialSuccess.rejectedLogRecords).to.equal('1');
        expect(res.json.partialSuccess.errorMessage).to.match(
          /^1 log record\(s\) rejected: log record #1: no span context/,
        );
      }
      await flushed(s);
      const t = await detail(k.key, traceId);
      expect(
        t.spans.map((x) => [
          x.name,
          x.kind,
          x.parentSpanId,
          x.prompt,
          x.response,
          x.finishReason,
          x.attributes['otel.log.severity_number'],
        ]),
      ).to.deep.equal([
        ['gen_ai.client.inference.operation.details', 'other', spanId, 'user: hello', 'hi there', 'stop', 9],
      ]);
    });

    it('bad log requests get a google.rpc.Status 400 and leave the server healthy', async () => {
      const k = await s.key();
      const auth = { authorization: `Bearer ${k.key}` };
      const res = await post(`${s.url}/v1/logs`, '{"resourceLogs":[{"scopeLogs":[{"logRecords":"nope"}]}]}', auth);
      expect([res.status, res.json.code]).to.deep.equal([400, 3]);
      expect(res.json.message).to.match(/logRecords is not an array/);
      const deep = {
        resourceLogs: [
          {
            scopeLogs: [
              {
                logRecords: [
                  {
                    traceId: randomBytes(16).toString('hex'),
                    spanId: randomBytes(8).toString('hex'),
                    timeUnixNano: '1',
                    body: nest(200),
                  },
                ],
              },
            ],
          },
        ],
      };
      const tooDeep = await post(`${s.url}/v1/logs`, deep, auth);
      expect([tooDeep.status, tooDeep.json.code]).to.deep.equal([400, 3]);
      const pb = await fetch(`${s.url}/v1/logs`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/x-protobuf' },
        body: new Uint8Array([0x0a, 0xff, 0xff]),
      });
      expect(pb.status).to.equal(400);
      expect((await get(`${s.url}/readyz`)).status).to.equal(200);
    });
  });
}

function nest(depth: number): unknown {
  let v: unknown = { stringValue: 'x' };
  for (let i = 0; i < depth; i++) v = { arrayValue: { values: [v] } };
  return v;
}
