// The real @openai/agents end to end: an agent with an input guardrail and a function tool, its model calls going
// through tracegate's proxy to the fake provider, its trace exported by the SDK's own OpenAITracingExporter (a
// BatchTraceProcessor, forceFlush) to POST /api/integrations/provider-agents with a workspace key.
import { expect } from 'chai';
import {
  Agent,
  BatchTraceProcessor,
  getGlobalTraceProvider,
  type InputGuardrail,
  InputGuardrailTripwireTriggered,
  OpenAIProvider,
  OpenAITracingExporter,
  Runner,
  setTraceProcessors,
  setTracingDisabled,
  tool,
  withTrace,
} from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { startFakeResponses, type FakeResponses } from '../support/fake-responses.ts';
import { flushed, get, startTestServer, type Backend, type TestServer } from '../support/server.ts';

const ROUTE = '/api/integrations/provider-agents';

/** The SDK's tracing pipeline pointed at this server with a workspace key, as the tracing guide documents it. */
function exportTo(
  s: TestServer,
  key: string,
  over: Partial<ConstructorParameters<typeof OpenAITracingExporter>[0]> = {},
) {
  const exporter = new OpenAITracingExporter({ apiKey: key, endpoint: `${s.url}${ROUTE}`, ...over });
  setTraceProcessors([new BatchTraceProcessor(exporter, { scheduleDelay: 60_000 })]);
  setTracingDisabled(false);
}

function weatherAgent(guardrail: InputGuardrail) {
  const getWeather = tool({
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => `Sunny in ${city}, 21°C`,
  });
  return new Agent({
    name: 'Weather agent',
    instructions: 'Answer weather questions with the tool.',
    model: 'gpt-4o-mini',
    tools: [getWeather],
    inputGuardrails: [guardrail],
    modelSettings: { providerData: { metadata: { fake: 'tool' } } },
  });
}

const polite: InputGuardrail = {
  name: 'No shouting',
  execute: async ({ input }) => {
    const text = typeof input === 'string' ? input : JSON.stringify(input);
    return { outputInfo: { shouting: text === text.toUpperCase() }, tripwireTriggered: text === text.toUpperCase() };
  },
};

async function traceOf(s: TestServer, auth: Record<string, string>, traceId: string, spans: number) {
  for (let i = 0; i < 50; i++) {
    await flushed(s);
    const res = await get(`${s.url}/api/traces/${traceId}`, auth);
    if (res.status === 200 && res.json.trace.spans.length >= spans) return res.json.trace;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`trace ${traceId} did not reach ${spans} spans`);
}

for (const backend of ['duckdb', 'clickhouse'] as Backend[]) {
  describe(`agents route with the real @openai/agents (${backend})`, function () {
    let fake: FakeResponses;
    let s: TestServer;
    let key: string;
    let auth: Record<string, string>;
    let runner: Runner;

    before(async () => {
      fake = await startFakeResponses();
      s = await startTestServer(backend, {
        TRACEGATE_PROVIDER_BASE_URL: fake.url,
        TRACEGATE_PROVIDER_API_KEY: 'sk-fake',
      });
      ({ key } = await s.key());
      auth = { authorization: `Bearer ${key}` };
      // Model calls through tracegate's proxy, with the same workspace key.
      const openAIClient = new OpenAI({ apiKey: key, baseURL: `${s.url}/api/proxy/provider`, maxRetries: 0 });
      runner = new Runner({ modelProvider: new OpenAIProvider({ openAIClient, useResponses: true }) });
    });
    after(async () => {
      setTracingDisabled(true);
      await s?.close();
      await fake?.close();
    });

    it('stores the run as one tree: agent, guardrail, response spans joined to the proxied calls, and the tool', async () => {
      exportTo(s, key);
      let traceId = '';
      const result = await withTrace(
        'Weather workflow',
        async (trace) => {
          traceId = trace.traceId;
          return runner.run(weatherAgent(polite), 'What is the weather in Paris?');
        },
        { groupId: 'conversation-42', metadata: { customer: 'acme', tier: 'gold' } },
      );
      expect(result.finalOutput).to.equal('The tool said: Sunny in Paris, 21°C');
      await getGlobalTraceProvider().forceFlush();
      const trace = await traceOf(s, auth, traceId, 5);

      expect(trace.summary.name).to.equal('Weather workflow');
      expect(trace.session).to.equal('conversation-42');
      expect(trace.metadata).to.deep.equal({ customer: 'acme', tier: 'gold' });
      const byType = (t: string) => trace.spans.filter((x: any) => x.attributes['agents.span_type'] === t);
      // The run's task span is the root, with the run's usage (kind chain: shown, not summed with the calls).
      const task = trace.spans.find((x: any) => x.parentSpanId === '');
      expect(task).to.include({ kind: 'chain', name: 'task (Agent workflow)', source: 'agents' });
      expect(task.attributes['gen_ai.usage.requests']).to.equal(2);
      expect(task.totalTokens).to.be.greaterThan(0);
      const [agentSpan] = byType('agent');
      expect(agentSpan).to.include({
        kind: 'agent',
        name: 'Weather agent',
        parentSpanId: task.spanId,
        source: 'agents',
      });
      expect(agentSpan.spanId).to.match(/^span_[0-9a-f]{24}$/);
      expect(agentSpan.attributes['agents.tools']).to.deep.equal(['get_weather']);
      const [guard] = byType('guardrail');
      expect(guard).to.include({ kind: 'guardrail', name: 'No shouting', parentSpanId: agentSpan.spanId });
      expect(guard.attributes['guardrail.tripwire_triggered']).to.equal(false);
      const turns = trace.spans.filter((x: any) => x.name.startsWith('turn '));
      expect(turns.map((x: any) => [x.name, x.parentSpanId])).to.deep.equal([
        ['turn 1 (Weather agent)', agentSpan.spanId],
        ['turn 2 (Weather agent)', agentSpan.spanId],
      ]);
      const [toolSpan] = byType('function');
      expect(toolSpan).to.include({ kind: 'tool', name: 'get_weather', prompt: '{"city":"Paris"}' });
      expect(toolSpan.parentSpanId).to.equal(turns[0].spanId);
      expect(toolSpan.response).to.equal('Sunny in Paris, 21°C');
      const responses = byType('response');
      expect(responses).to.have.length(2);
      // Each response span points at the call the proxy recorded: its text and usage are there, counted once.
      for (const r of responses) {
        expect(r.kind).to.equal('chain');
        expect(r.attributes['tracegate.proxied']).to.equal(true);
        expect(r.link.traceId).to.equal(r.attributes['tracegate.proxy.trace_id']);
        expect(r.link.model).to.equal('gpt-4o-mini');
        expect(r.link.totalTokens).to.be.greaterThan(0);
        expect(r.link.prompt).to.contain('What is the weather in Paris?');
      }
      expect(responses.map((r: any) => r.link.response)).to.include('The tool said: Sunny in Paris, 21°C');
      expect(trace.guardrails).to.deep.equal([
        { spanId: guard.spanId, name: 'No shouting', stage: null, tripped: false, executionFailed: false },
      ]);
      // One tree under the agent span.
      const ids = new Set(trace.spans.map((x: any) => x.spanId));
      for (const x of trace.spans) if (x !== task) expect(ids.has(x.parentSpanId), x.name).to.equal(true);
      expect(trace.tree).to.have.length(1);

      // The proxied calls are the model calls of the workspace's usage: two, not four.
      const usage = await get(`${s.url}/api/analytics/usage?groupBy=source&bucket=day`, auth);
      expect(usage.status, usage.text).to.equal(200);
      const requests = (src: string) =>
        (usage.json.rows as any[]).filter((x) => x.key === src).reduce((n, x) => n + x.requests, 0);
      expect(requests('proxy')).to.equal(2);
      expect(requests('agents')).to.equal(0);
    });

    it('a tripped input guardrail is marked in the trace read and raises a finding', async () => {
      exportTo(s, key);
      let traceId = '';
      const err = await withTrace('Shouting workflow', async (trace) => {
        traceId = trace.traceId;
        return runner.run(weatherAgent(polite), 'WHAT IS THE WEATHER').then(
          () => null,
          (e: unknown) => e,
        );
      });
      expect(err).to.be.instanceOf(InputGuardrailTripwireTriggered);
      await getGlobalTraceProvider().forceFlush();
      const trace = await traceOf(s, auth, traceId, 2);
      const tripped = trace.guardrails.find((g: any) => g.name === 'No shouting');
      expect(tripped.tripped).to.equal(true);
      const findings = await get(`${s.url}/api/findings?traceId=${traceId}`, auth);
      expect(findings.json.items.map((f: any) => [f.detector, f.rule, f.spanId])).to.deep.include([
        'guardrail',
        'guardrail.no_shouting',
        tripped.spanId,
      ]);
    });
  });
}
