// Realistic data for the web UI's tests and screenshots, sent through the real ingest routes: an agent run (agent →
// model calls with messages → a tool call → a guardrail that trips) with PII the governance finds, a failed run,
// native traces over several models, actions and environments, votes, a security alert naming the agent run, and a
// 5,000-span trace.
import { randomBytes } from 'node:crypto';
import { post } from './server.ts';

type Attr = string | number | boolean;
const kv = (key: string, v: Attr) => ({
  key,
  value:
    typeof v === 'string'
      ? { stringValue: v }
      : typeof v === 'boolean'
        ? { boolValue: v }
        : Number.isInteger(v)
          ? { intValue: String(v) }
          : { doubleValue: v },
});
const hex = (bytes: number) => randomBytes(bytes).toString('hex');

interface OtlpSpan {
  spanId: string;
  parentSpanId?: string;
  name: string;
  startMs: number;
  durMs: number;
  attrs?: Record<string, Attr>;
  error?: string;
}

function otlp(traceId: string, spans: OtlpSpan[], env = 'prod') {
  return {
    resourceSpans: [
      {
        resource: { attributes: [kv('service.name', 'support-bot'), kv('deployment.environment.name', env)] },
        scopeSpans: [
          {
            scope: { name: 'ui-seed' },
            spans: spans.map((s) => ({
              traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              name: s.name,
              kind: 1,
              startTimeUnixNano: String(BigInt(Math.round(s.startMs * 1000)) * 1000n),
              endTimeUnixNano: String(BigInt(Math.round((s.startMs + s.durMs) * 1000)) * 1000n),
              attributes: Object.entries(s.attrs ?? {}).map(([k, v]) => kv(k, v)),
              status: s.error ? { code: 2, message: s.error } : { code: 1 },
            })),
          },
        ],
      },
    ],
  };
}

const ANSWER = [
  'Your order **#4521** shipped this morning. Here is what happens next:',
  '',
  '1. The carrier scans it tonight.',
  '2. You get a tracking link by email.',
  '',
  '```json',
  '{ "carrier": "DHL", "eta": "2 days" }',
  '```',
].join('\n');

export interface Seeded {
  agentTraceId: string;
  llmSpanId: string;
  toolSpanId: string;
  failedTraceId: string;
  bigTraceId: string;
  bigSpanCount: number;
  nativeIds: string[];
}

async function ok(a: { status: number; text: string }, what: string) {
  if (a.status >= 300) throw new Error(`${what}: ${a.status} ${a.text}`);
}

/** Sends the data with the workspace key; `big` spans in the large trace (0: none). */
export async function seed(base: string, key: string, big = 5000): Promise<Seeded> {
  const auth = { authorization: `Bearer ${key}` };
  const now = Date.now() - 60_000;
  const agentTraceId = hex(16);
  const [root, llm, tool, llm2, guard] = [hex(8), hex(8), hex(8), hex(8), hex(8)];
  const messages = JSON.stringify([
    { role: 'system', parts: [{ type: 'text', content: 'You are a helpful support agent.' }] },
    {
      role: 'user',
      parts: [{ type: 'text', content: 'Where is my order #4521? You can reach me at jane.doe@example.com' }],
    },
  ]);
  const agent: OtlpSpan[] = [
    {
      spanId: root,
      name: 'invoke_agent support',
      startMs: now,
      durMs: 2400,
      attrs: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'support' },
    },
    {
      spanId: llm,
      parentSpanId: root,
      name: 'chat gpt-4o-mini',
      startMs: now + 40,
      durMs: 820,
      attrs: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'gpt-4o-mini',
        'gen_ai.provider.name': 'openai',
        'gen_ai.input.messages': messages,
        'gen_ai.output.messages': JSON.stringify([
          {
            role: 'assistant',
            parts: [{ type: 'tool_call', id: 'call_1', name: 'lookup_order', arguments: { order: '4521' } }],
          },
        ]),
        'gen_ai.usage.input_tokens': 182,
        'gen_ai.usage.output_tokens': 24,
      },
    },
    {
      spanId: tool,
      parentSpanId: root,
      name: 'execute_tool lookup_order',
      startMs: now + 880,
      durMs: 310,
      attrs: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'lookup_order',
        'gen_ai.tool.call.id': 'call_1',
        'gen_ai.tool.call.arguments': JSON.stringify({ order: '4521' }),
        'gen_ai.tool.call.result': JSON.stringify({ status: 'shipped', carrier: 'DHL', eta: '2 days' }),
      },
    },
    {
      spanId: llm2,
      parentSpanId: root,
      name: 'chat gpt-4o-mini',
      startMs: now + 1220,
      durMs: 1010,
      attrs: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'gpt-4o-mini',
        'gen_ai.provider.name': 'openai',
        'gen_ai.input.messages': messages,
        'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: ANSWER }] }]),
        'gen_ai.usage.input_tokens': 241,
        'gen_ai.usage.output_tokens': 96,
        'gen_ai.response.finish_reasons': 'stop',
      },
    },
    {
      spanId: guard,
      parentSpanId: root,
      name: 'guardrail pii_output',
      startMs: now + 2250,
      durMs: 120,
      attrs: {
        'openinference.span.kind': 'GUARDRAIL',
        'guardrail.name': 'pii_output',
        'guardrail.tripwire_triggered': true,
        'guardrail.stage': 'output',
      },
    },
  ];
  await ok(await post(`${base}/v1/traces`, otlp(agentTraceId, agent), auth), 'agent trace');

  const failedTraceId = hex(16);
  const f1 = hex(8);
  await ok(
    await post(
      `${base}/v1/traces`,
      otlp(
        failedTraceId,
        [
          {
            spanId: f1,
            name: 'invoke_agent billing',
            startMs: now + 5000,
            durMs: 30_500,
            attrs: { 'gen_ai.agent.name': 'billing' },
          },
          {
            spanId: hex(8),
            parentSpanId: f1,
            name: 'chat claude-3-5-haiku',
            startMs: now + 5010,
            durMs: 30_000,
            error: 'upstream timed out after 30 s',
            attrs: {
              'gen_ai.operation.name': 'chat',
              'gen_ai.request.model': 'claude-3-5-haiku',
              'gen_ai.provider.name': 'anthropic',
              'gen_ai.input.messages': JSON.stringify([
                { role: 'user', parts: [{ type: 'text', content: 'Refund invoice 88?' }] },
              ]),
              'gen_ai.usage.input_tokens': 40,
            },
          },
        ],
        'staging',
      ),
      auth,
    ),
    'failed trace',
  );

  const models = ['gpt-4o-mini', 'gpt-4o', 'claude-3-5-haiku', 'llama3.2'];
  const actions = ['support_reply', 'summarize', 'classify'];
  const nativeIds: string[] = [];
  // Model calls spread over the last day (OTLP carries their times), and a few native traces received now.
  const calls = Array.from({ length: 36 }, (_, i) => {
    const traceId = hex(16);
    nativeIds.push(traceId);
    const env = i % 4 === 0 ? 'staging' : 'prod';
    const span: OtlpSpan = {
      spanId: hex(8),
      name: `chat ${models[i % models.length]}`,
      startMs: now - (i + 1) * 37 * 60_000,
      durMs: 300 + ((i * 137) % 1700),
      attrs: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': models[i % models.length]!,
        'gen_ai.agent.name': actions[i % actions.length]!,
        'gen_ai.input.messages': JSON.stringify([
          { role: 'user', parts: [{ type: 'text', content: `Summarize ticket ${1000 + i}` }] },
        ]),
        'gen_ai.output.messages': JSON.stringify([
          { role: 'assistant', parts: [{ type: 'text', content: `Ticket ${1000 + i} is about a *late delivery*.` }] },
        ]),
        'gen_ai.usage.input_tokens': 100 + i * 13,
        'gen_ai.usage.output_tokens': 20 + i * 3,
      },
      ...(i % 7 === 3 ? { error: 'rate limited by provider' } : {}),
    };
    return otlp(traceId, [span], env).resourceSpans[0]!;
  });
  await ok(await post(`${base}/v1/traces`, { resourceSpans: calls }, auth), 'model calls');
  const natives = actions.map((actionName, i) => ({
    requestId: `req-${hex(4)}-${i}`,
    actionName,
    environment: 'prod',
    model: models[i]!,
    prompt: `Classify: "my parcel never arrived" (${i})`,
    response: 'category: **delivery**',
    metrics: { promptTokens: 30 + i, completionTokens: 5, latencyMs: 240 + i * 50, finishReason: 'stop' },
  }));
  await ok(await post(`${base}/api/traces`, natives, auth), 'native traces');

  for (const [i, id] of nativeIds.slice(0, 6).entries())
    await ok(
      await post(
        `${base}/api/ingest/feedback`,
        { trace_id: id, value: i % 3 === 2 ? 'down' : 'up', user_id: 'seed' },
        auth,
      ),
      'vote',
    );
  await ok(
    await post(
      `${base}/api/ingest/webhooks`,
      JSON.stringify({
        source: 'lakera',
        severity: 'high',
        title: 'Prompt injection attempt',
        category: 'prompt_injection',
        trace_id: agentTraceId,
      }),
      auth,
    ),
    'alert',
  );

  const bigTraceId = hex(16);
  if (big > 0) {
    const spans: OtlpSpan[] = [];
    const rootId = hex(8);
    spans.push({ spanId: rootId, name: 'batch job', startMs: now - 3_600_000, durMs: big * 2 + 10 });
    let parent = rootId;
    for (let i = 1; i < big; i++) {
      const id = hex(8);
      // Steps of 50 under the root, each step holding its items.
      const isStep = i % 50 === 1;
      spans.push({
        spanId: id,
        parentSpanId: isStep ? rootId : parent,
        name: isStep ? `step ${Math.floor(i / 50)}` : `item ${i}`,
        startMs: now - 3_600_000 + i * 2,
        durMs: isStep ? 98 : 1.5,
        attrs: isStep
          ? {}
          : { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'fetch_item', 'item.index': i },
      });
      if (isStep) parent = id;
    }
    await ok(await post(`${base}/v1/traces`, otlp(bigTraceId, spans, 'batch'), auth), 'big trace');
  }
  return { agentTraceId, llmSpanId: llm2, toolSpanId: tool, failedTraceId, bigTraceId, bigSpanCount: big, nativeIds };
}
