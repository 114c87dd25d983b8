// One-off generator for test/fixtures/otlp/*.json (compact spec → OTLP JSON). Expected values are hand-written.
import fs from 'node:fs';
const av = (v) => {
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (typeof v === 'number') return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  if (Array.isArray(v)) return { arrayValue: { values: v.map(av) } };
  if (v && typeof v === 'object') return { kvlistValue: { values: Object.entries(v).map(([key, x]) => ({ key, value: av(x) })) } };
  return {};
};
const kv = (o) => Object.entries(o).map(([key, v]) => ({ key, value: av(v) }));
const T0 = 1760000000000000000n;
const t = (ms) => String(T0 + BigInt(Math.round(ms * 1e6)));
const span = (s) => ({
  traceId: s.traceId ?? '5b8efff798038103d269b633813fc60c', spanId: s.spanId, ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
  name: s.name, kind: s.kind ?? 3, startTimeUnixNano: t(s.start ?? 0), endTimeUnixNano: t(s.end ?? 1500),
  attributes: kv(s.attributes ?? {}), ...(s.events ? { events: s.events.map((e) => ({ timeUnixNano: t(e.at ?? 10), name: e.name, attributes: kv(e.attributes ?? {}) })) } : {}),
  ...(s.links ? { links: s.links } : {}), status: s.status ?? {},
  ...(s.extra ?? {}),
});
const req = (resource, scope, spans) => ({ resourceSpans: [{ resource: { attributes: kv(resource) }, scopeSpans: [{ scope, spans: spans.map(span) }] }] });
const write = (name, description, request, expected) => fs.writeFileSync(`test/fixtures/otlp/${name}.json`, JSON.stringify({ description, request, expected }, null, 2) + '\n');
const base = (extra) => ({ source: 'otlp', workspaceId: 'ws_fixture', ingestedAtMs: 1760000005000, traceId: '5b8efff798038103d269b633813fc60c', startTimeNs: t(0), endTimeNs: t(1500), durationMs: 1500, status: 'completed', statusMessage: '', trainingPreferred: false, ...extra });

// 1. GenAI current, structured messages
write('genai-current-structured', 'GenAI semconv (v1.37+): structured gen_ai.input.messages / output.messages / system_instructions, cache and reasoning usage',
  req({ 'service.name': 'chatbot', 'deployment.environment.name': 'production' }, { name: 'opentelemetry.instrumentation.openai_v2', version: '2.1b0' }, [{
    spanId: '1111111111111111', name: 'chat gpt-4o',
    attributes: {
      'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.response.model': 'gpt-4o-2024-08-06',
      'gen_ai.response.id': 'chatcmpl-abc123', 'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.usage.input_tokens': 1200, 'gen_ai.usage.output_tokens': 300, 'gen_ai.usage.cache_read.input_tokens': 1000, 'gen_ai.usage.reasoning.output_tokens': 100,
      'gen_ai.usage.some_future_counter': 7,
      'gen_ai.system_instructions': [{ type: 'text', content: 'You are a weather bot.' }],
      'gen_ai.input.messages': [
        { role: 'user', parts: [{ type: 'text', content: 'Weather in Paris?' }] },
        { role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'get_weather', arguments: { city: 'Paris' } }] },
        { role: 'tool', parts: [{ type: 'tool_call_response', id: 'call_1', response: 'rainy, 57°F' }] },
      ],
      'gen_ai.output.messages': [{ role: 'assistant', parts: [{ type: 'text', content: 'It is rainy and 57°F in Paris.' }], finish_reason: 'stop' }],
      'server.address': 'api.openai.com',
    },
  }]),
  [base({
    spanId: '1111111111111111', parentSpanId: '', name: 'chat gpt-4o', kind: 'llm', model: 'gpt-4o-2024-08-06', provider: 'openai',
    prompt: 'system: You are a weather bot.\nuser: Weather in Paris?\ntool: rainy, 57°F',
    response: 'It is rainy and 57°F in Paris.',
    promptTokens: 1200, completionTokens: 300, totalTokens: 1500,
    costUsd: (200 * 2.5 + 1000 * 1.25 + 300 * 10) / 1e6,
    finishReason: 'stop', requestId: 'chatcmpl-abc123', actionName: '', environment: 'production', trainable: true,
    attributesInclude: { 'otel.span_kind': 'client', 'otel.scope.name': 'opentelemetry.instrumentation.openai_v2', 'otel.scope.version': '2.1b0', 'gen_ai.usage.some_future_counter': 7, 'gen_ai.response.finish_reasons': ['stop'] },
    resourceAttributes: { 'service.name': 'chatbot', 'deployment.environment.name': 'production' },
    events: [],
  })]);

// 2. GenAI current, JSON-string messages (+ operation.details event variant)
write('genai-current-json-strings', 'GenAI semconv with messages as JSON strings (most SDKs), cache_creation tokens, and a span whose content is on a gen_ai.client.inference.operation.details event',
  req({ 'service.name': 'assistant', 'deployment.environment': 'staging' }, { name: 'opentelemetry.instrumentation.anthropic', version: '0.40.0' }, [{
    spanId: '2222222222222222', name: 'chat claude-sonnet-4-20250514',
    attributes: {
      'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'anthropic', 'gen_ai.request.model': 'claude-sonnet-4-20250514',
      'gen_ai.usage.input_tokens': 5000, 'gen_ai.usage.output_tokens': 250, 'gen_ai.usage.cache_creation.input_tokens': 4000,
      'gen_ai.response.finish_reasons': '["end_turn"]', 'gen_ai.response.id': 'msg_01XYZ',
      'gen_ai.system_instructions': JSON.stringify([{ type: 'text', content: 'Be concise.' }]),
      'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'Summarize:' }, { type: 'text', content: 'OTLP is a protocol.' }] }]),
      'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'OTLP transports telemetry.' }, { type: 'tool_call', id: 't1', name: 'save', arguments: '{}' }], finish_reason: 'end_turn' }]),
    },
  }, {
    spanId: '2222222222222223', name: 'chat gpt-4o-mini', parentSpanId: '2222222222222222',
    attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4o-mini', 'gen_ai.usage.input_tokens': 10, 'gen_ai.usage.output_tokens': 5 },
    events: [{ name: 'gen_ai.client.inference.operation.details', attributes: {
      'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'Hi' }] }]),
      'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Hello!' }], finish_reason: 'stop' }]),
      'gen_ai.response.id': 'chatcmpl-evt',
    } }],
  }]),
  [base({
    spanId: '2222222222222222', parentSpanId: '', kind: 'llm', model: 'claude-sonnet-4-20250514', provider: 'anthropic',
    prompt: 'system: Be concise.\nuser: Summarize:\nOTLP is a protocol.', response: 'OTLP transports telemetry.',
    promptTokens: 5000, completionTokens: 250, totalTokens: 5250, costUsd: (1000 * 3 + 4000 * 3.75 + 250 * 15) / 1e6,
    finishReason: 'end_turn', requestId: 'msg_01XYZ', environment: 'staging', trainable: true,
  }), base({
    spanId: '2222222222222223', parentSpanId: '2222222222222222', kind: 'llm', model: 'gpt-4o-mini', provider: 'openai',
    prompt: 'user: Hi', response: 'Hello!', promptTokens: 10, completionTokens: 5, totalTokens: 15, costUsd: (10 * 0.15 + 5 * 0.6) / 1e6,
    finishReason: 'stop', requestId: 'chatcmpl-evt', environment: 'staging', trainable: true,
    events: [{ name: 'gen_ai.client.inference.operation.details', timeNs: t(10), attributes: {
      'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'Hi' }] }]),
      'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Hello!' }], finish_reason: 'stop' }]),
      'gen_ai.response.id': 'chatcmpl-evt',
    } }],
  })]);

// 3. Older GenAI: gen_ai.system, prompt/completion tokens, per-message events
write('genai-legacy-events', 'GenAI semconv ≤ v1.36: gen_ai.system, gen_ai.usage.prompt_tokens/completion_tokens, per-message span events',
  req({ 'service.name': 'legacy-app', 'deployment.environment': 'dev' }, { name: 'opentelemetry.instrumentation.openai', version: '0.30b0' }, [{
    spanId: '3333333333333333', name: 'chat gpt-4', traceId: '5B8EFFF798038103D269B633813FC60C',
    attributes: { 'gen_ai.system': 'openai', 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4', 'gen_ai.usage.prompt_tokens': 40, 'gen_ai.usage.completion_tokens': 12 },
    events: [
      { name: 'gen_ai.system.message', attributes: { 'gen_ai.system': 'openai', content: 'You are terse.' } },
      { name: 'gen_ai.user.message', attributes: { 'gen_ai.system': 'openai', content: 'What is 2+2?' } },
      { name: 'gen_ai.assistant.message', attributes: { 'gen_ai.system': 'openai', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'calc', arguments: '{"x":"2+2"}' } }] } },
      { name: 'gen_ai.tool.message', attributes: { 'gen_ai.system': 'openai', content: '4', id: 'c1' } },
      { name: 'gen_ai.choice', attributes: { 'gen_ai.system': 'openai', index: 0, finish_reason: 'stop', message: { role: 'assistant', content: '2+2 is 4.' } } },
    ],
  }]),
  [base({
    spanId: '3333333333333333', kind: 'llm', model: 'gpt-4', provider: 'openai',
    prompt: 'system: You are terse.\nuser: What is 2+2?\ntool: 4', response: '2+2 is 4.',
    promptTokens: 40, completionTokens: 12, totalTokens: 52, costUsd: (40 * 30 + 12 * 60) / 1e6,
    finishReason: 'stop', requestId: '', environment: 'dev', trainable: true,
  })]);

// 4. OpenInference
write('openinference', 'OpenInference (Arize/Phoenix): flattened llm.input_messages / output_messages, token counts, cost; CHAIN and RETRIEVER spans',
  req({ 'service.name': 'rag-app' }, { name: 'openinference.instrumentation.langchain', version: '0.1.30' }, [{
    spanId: '4444444444444441', name: 'ChatOpenAI', kind: 1, parentSpanId: '4444444444444440',
    attributes: {
      'openinference.span.kind': 'LLM', 'llm.model_name': 'gpt-4o-mini', 'llm.provider': 'openai', 'llm.system': 'openai',
      'llm.input_messages.0.message.role': 'system', 'llm.input_messages.0.message.content': 'Answer from context.',
      'llm.input_messages.1.message.role': 'user',
      'llm.input_messages.1.message.contents.0.message_content.type': 'text', 'llm.input_messages.1.message.contents.0.message_content.text': 'What is OTLP?',
      'llm.output_messages.0.message.role': 'assistant', 'llm.output_messages.0.message.content': 'A telemetry protocol.',
      'llm.output_messages.0.message.tool_calls.0.tool_call.function.name': 'lookup',
      'llm.token_count.prompt': 25, 'llm.token_count.completion': 6, 'llm.token_count.total': 31,
      'llm.cost.total': 0.0123,
      'input.value': '{"question":"What is OTLP?"}', 'input.mime_type': 'application/json', 'output.value': 'A telemetry protocol.',
      'session.id': 'sess-1',
    },
  }, {
    spanId: '4444444444444440', name: 'RetrievalQA', kind: 1,
    attributes: { 'openinference.span.kind': 'CHAIN', 'input.value': 'What is OTLP?', 'output.value': 'A telemetry protocol.' },
  }, {
    spanId: '4444444444444442', name: 'VectorStoreRetriever', kind: 1, parentSpanId: '4444444444444440',
    attributes: { 'openinference.span.kind': 'RETRIEVER', 'input.value': 'What is OTLP?', 'retrieval.documents.0.document.content': 'OTLP is…' },
  }]),
  [base({
    spanId: '4444444444444441', parentSpanId: '4444444444444440', name: 'ChatOpenAI', kind: 'llm', model: 'gpt-4o-mini', provider: 'openai',
    prompt: 'system: Answer from context.\nuser: What is OTLP?', response: 'A telemetry protocol.',
    promptTokens: 25, completionTokens: 6, totalTokens: 31, costUsd: 0.0123, finishReason: '', requestId: '', actionName: '', environment: '', trainable: true,
    attributesInclude: { 'otel.span_kind': 'internal', 'session.id': 'sess-1' },
  }), base({
    spanId: '4444444444444440', parentSpanId: '', name: 'RetrievalQA', kind: 'chain', model: '', provider: '',
    prompt: 'What is OTLP?', response: 'A telemetry protocol.', promptTokens: 0, completionTokens: 0, totalTokens: 0, costUsd: 0, trainable: true,
  }), base({
    spanId: '4444444444444442', name: 'VectorStoreRetriever', kind: 'retrieval', prompt: 'What is OTLP?', response: '', trainable: false,
  })]);

// 5. OpenLLMetry legacy
write('openllmetry-legacy', 'OpenLLMetry / Traceloop legacy: gen_ai.prompt.N.* / gen_ai.completion.N.*, llm.usage.total_tokens, traceloop.* workflow span',
  req({ 'service.name': 'traceloop-app' }, { name: 'opentelemetry.instrumentation.openai.v1', version: '0.33.0' }, [{
    spanId: '5555555555555551', parentSpanId: '5555555555555550', name: 'openai.chat',
    attributes: {
      'llm.request.type': 'chat', 'gen_ai.system': 'OpenAI', 'gen_ai.request.model': 'gpt-3.5-turbo', 'gen_ai.response.model': 'gpt-3.5-turbo-0125',
      'gen_ai.prompt.0.role': 'system', 'gen_ai.prompt.0.content': 'You write haiku.',
      'gen_ai.prompt.1.role': 'user', 'gen_ai.prompt.1.content': JSON.stringify([{ type: 'text', text: 'Haiku about logs' }]),
      'gen_ai.completion.0.role': 'assistant', 'gen_ai.completion.0.content': 'Lines of quiet logs', 'gen_ai.completion.0.finish_reason': 'stop',
      'gen_ai.usage.prompt_tokens': 20, 'gen_ai.usage.completion_tokens': 7, 'llm.usage.total_tokens': 27,
      'gen_ai.response.id': 'chatcmpl-ol', 'traceloop.workflow.name': 'haiku_flow',
    },
  }, {
    spanId: '5555555555555550', name: 'haiku_flow.workflow', kind: 1,
    attributes: { 'traceloop.span.kind': 'workflow', 'traceloop.workflow.name': 'haiku_flow', 'traceloop.entity.name': 'haiku_flow', 'traceloop.entity.input': '{"topic":"logs"}', 'traceloop.entity.output': '"Lines of quiet logs"' },
  }]),
  [base({
    spanId: '5555555555555551', parentSpanId: '5555555555555550', kind: 'llm', model: 'gpt-3.5-turbo-0125', provider: 'openai',
    prompt: 'system: You write haiku.\nuser: Haiku about logs', response: 'Lines of quiet logs',
    promptTokens: 20, completionTokens: 7, totalTokens: 27, costUsd: (20 * 0.5 + 7 * 1.5) / 1e6,
    finishReason: 'stop', requestId: 'chatcmpl-ol', actionName: 'haiku_flow', trainable: true,
  }), base({
    spanId: '5555555555555550', parentSpanId: '', kind: 'chain', model: '', prompt: '{"topic":"logs"}', response: '"Lines of quiet logs"',
    totalTokens: 0, costUsd: 0, actionName: 'haiku_flow', trainable: true,
  })]);

// 6. Vercel AI SDK legacy
write('vercel-ai-legacy', 'Vercel AI SDK LegacyOpenTelemetry (v3–v6): ai.generateText / ai.generateText.doGenerate / ai.toolCall; promptTokens (≤v4) and inputTokens (v5+) families',
  req({ 'service.name': 'next-app' }, { name: 'ai', version: '' }, [{
    spanId: '6666666666666660', name: 'ai.generateText', kind: 1,
    attributes: {
      'ai.operationId': 'ai.generateText', 'operation.name': 'ai.generateText support-bot', 'ai.telemetry.functionId': 'support-bot',
      'ai.model.id': 'gpt-4o', 'ai.model.provider': 'openai.chat',
      'ai.prompt': JSON.stringify({ system: 'You help customers.', prompt: 'Where is my order?' }),
      'ai.response.text': 'It ships tomorrow.', 'ai.response.finishReason': 'stop',
      'ai.usage.promptTokens': 30, 'ai.usage.completionTokens': 8,
    },
  }, {
    spanId: '6666666666666661', parentSpanId: '6666666666666660', name: 'ai.generateText.doGenerate',
    attributes: {
      'ai.operationId': 'ai.generateText.doGenerate', 'ai.telemetry.functionId': 'support-bot', 'ai.model.id': 'gpt-4o', 'ai.model.provider': 'openai.chat',
      'ai.prompt.messages': JSON.stringify([{ role: 'system', content: 'You help customers.' }, { role: 'user', content: [{ type: 'text', text: 'Where is my order?' }] }]),
      'ai.response.text': 'It ships tomorrow.', 'ai.response.finishReason': 'stop', 'ai.response.id': 'resp_v1', 'ai.response.model': 'gpt-4o-2024-08-06',
      'ai.usage.inputTokens': 30, 'ai.usage.outputTokens': 8, 'ai.usage.totalTokens': 38,
      'gen_ai.system': 'openai.chat', 'gen_ai.request.model': 'gpt-4o',
    },
  }, {
    spanId: '6666666666666662', parentSpanId: '6666666666666660', name: 'ai.toolCall', kind: 1,
    attributes: { 'ai.operationId': 'ai.toolCall', 'ai.toolCall.name': 'lookupOrder', 'ai.toolCall.id': 'call_9', 'ai.toolCall.args': '{"orderId":"42"}', 'ai.toolCall.result': '{"eta":"tomorrow"}' },
  }]),
  [base({
    spanId: '6666666666666660', kind: 'chain', model: 'gpt-4o', provider: 'openai',
    prompt: 'system: You help customers.\nuser: Where is my order?', response: 'It ships tomorrow.',
    promptTokens: 30, completionTokens: 8, totalTokens: 38, costUsd: 0, finishReason: 'stop', actionName: 'support-bot', requestId: '', trainable: true,
  }), base({
    spanId: '6666666666666661', kind: 'llm', model: 'gpt-4o-2024-08-06', provider: 'openai',
    prompt: 'system: You help customers.\nuser: Where is my order?', response: 'It ships tomorrow.',
    promptTokens: 30, completionTokens: 8, totalTokens: 38, costUsd: (30 * 2.5 + 8 * 10) / 1e6, finishReason: 'stop', requestId: 'resp_v1', actionName: 'support-bot', trainable: true,
  }), base({
    spanId: '6666666666666662', kind: 'tool', model: '', provider: '', prompt: '{"orderId":"42"}', response: '{"eta":"tomorrow"}', actionName: 'lookupOrder', costUsd: 0, trainable: true,
  })]);

// 7. Tool span
write('genai-tool-span', 'GenAI execute_tool span: gen_ai.tool.*; arguments structured, result as JSON string; one failing tool call',
  req({ 'service.name': 'agent-svc' }, { name: 'my-agent-framework', version: '1.0.0' }, [{
    spanId: '7777777777777771', name: 'execute_tool get_weather', kind: 1,
    attributes: {
      'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'get_weather', 'gen_ai.tool.call.id': 'call_1', 'gen_ai.tool.type': 'function',
      'gen_ai.tool.call.arguments': { city: 'Paris', unit: 'C' }, 'gen_ai.tool.call.result': '{"temp":14}', 'gen_ai.agent.name': 'weather-agent',
    },
  }, {
    spanId: '7777777777777772', name: 'execute_tool book_flight', kind: 1,
    attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'book_flight', 'gen_ai.tool.call.arguments': '{"to":"NYC"}', 'error.type': 'TimeoutError' },
    status: { code: 2 },
  }]),
  [base({
    spanId: '7777777777777771', kind: 'tool', model: '', provider: '', prompt: '{"city":"Paris","unit":"C"}', response: '{"temp":14}',
    actionName: 'get_weather', costUsd: 0, totalTokens: 0, trainable: true,
    attributesInclude: { 'otel.span_kind': 'internal', 'gen_ai.tool.call.arguments': { city: 'Paris', unit: 'C' } },
  }), base({
    spanId: '7777777777777772', kind: 'tool', status: 'error', statusMessage: 'TimeoutError', prompt: '{"to":"NYC"}', response: '', actionName: 'book_flight', trainable: false,
    attributesInclude: { 'otel.status_code': 'error' },
  })]);

// 8. Agent span
write('genai-agent-span', 'GenAI invoke_agent span: gen_ai.agent.*, gen_ai.conversation.id, aggregate usage (tokens kept, no computed cost)',
  req({ 'service.name': 'agents', 'deployment.environment.name': 'prod-eu' }, { name: 'openai-agents', version: '0.2.0' }, [{
    spanId: '8888888888888881', name: 'invoke_agent TravelPlanner', kind: 3,
    attributes: {
      'gen_ai.operation.name': 'invoke_agent', 'gen_ai.provider.name': 'openai', 'gen_ai.agent.name': 'TravelPlanner', 'gen_ai.agent.id': 'asst_5',
      'gen_ai.conversation.id': 'conv_77', 'gen_ai.request.model': 'gpt-4o',
      'gen_ai.usage.input_tokens': 900, 'gen_ai.usage.output_tokens': 120,
      'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'Plan 2 days in Rome' }] }]),
      'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Day 1: Colosseum. Day 2: Vatican.' }], finish_reason: 'stop' }]),
    },
  }]),
  [base({
    spanId: '8888888888888881', kind: 'agent', model: 'gpt-4o', provider: 'openai', prompt: 'user: Plan 2 days in Rome', response: 'Day 1: Colosseum. Day 2: Vatican.',
    promptTokens: 900, completionTokens: 120, totalTokens: 1020, costUsd: 0, finishReason: 'stop', actionName: 'TravelPlanner', environment: 'prod-eu', trainable: true,
    attributesInclude: { 'gen_ai.conversation.id': 'conv_77', 'otel.span_kind': 'client' },
  })]);

// 9. Non-LLM HTTP span (full record)
write('http-span', 'Plain OTel HTTP server span: stored with every generic field (scope, kind, links, events, status, dropped counts, trace state)',
  { resourceSpans: [{ resource: { attributes: kv({ 'service.name': 'api-gateway', 'deployment.environment.name': 'production', 'host.name': 'gw-1' }) }, scopeSpans: [{
    scope: { name: '@opentelemetry/instrumentation-http', version: '0.52.0', attributes: kv({ 'lib.flavor': 'node' }) },
    spans: [span({
      spanId: '9999999999999999', parentSpanId: 'AAAAAAAAAAAAAAAA', name: 'GET /orders/:id', kind: 2,
      attributes: { 'http.request.method': 'GET', 'http.route': '/orders/:id', 'http.response.status_code': 500, 'url.path': '/orders/42', 'server.port': 8080, 'http.server.duration_ratio': 0.25, 'retry': false },
      events: [{ name: 'exception', at: 700, attributes: { 'exception.type': 'Error', 'exception.message': 'db down' } }],
      links: [{ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceState: 'vendor=1', attributes: kv({ 'link.kind': 'follows' }) }],
      status: { code: 2, message: 'Internal Server Error' },
      extra: { traceState: 'congo=t61rcWkgMzE', droppedAttributesCount: 2, droppedEventsCount: 1, flags: 769 },
    })],
  }] }] },
  [base({
    spanId: '9999999999999999', parentSpanId: 'aaaaaaaaaaaaaaaa', name: 'GET /orders/:id', kind: 'other', status: 'error', statusMessage: 'Internal Server Error',
    model: '', provider: '', prompt: '', response: '', promptTokens: 0, completionTokens: 0, totalTokens: 0, costUsd: 0, finishReason: '',
    actionName: '', environment: 'production', requestId: '', trainable: false,
    attributes: {
      'http.request.method': 'GET', 'http.route': '/orders/:id', 'http.response.status_code': 500, 'url.path': '/orders/42', 'server.port': 8080, 'http.server.duration_ratio': 0.25, 'retry': false,
      'otel.span_kind': 'server', 'otel.scope.name': '@opentelemetry/instrumentation-http', 'otel.scope.version': '0.52.0', 'otel.scope.attributes': { 'lib.flavor': 'node' },
      'otel.status_code': 'error', 'otel.trace_state': 'congo=t61rcWkgMzE',
      'otel.links': [{ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceState: 'vendor=1', attributes: { 'link.kind': 'follows' } }],
      'otel.dropped_attributes_count': 2, 'otel.dropped_events_count': 1,
    },
    resourceAttributes: { 'service.name': 'api-gateway', 'deployment.environment.name': 'production', 'host.name': 'gw-1' },
    events: [{ name: 'exception', timeNs: t(700), attributes: { 'exception.type': 'Error', 'exception.message': 'db down' } }],
  })]);
console.log('ok');
