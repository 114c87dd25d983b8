// Fixture-driven tests for mappers/otlp.ts: each test/fixtures/otlp/*.json holds an OTLP/JSON
// request and the expected records. Every field listed in an expected record is asserted
// exactly (costUsd to 1e-12); `attributesInclude` asserts only the listed attribute keys.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { expect } from 'chai';
import { decodeOtlpRequest, otlpLimits, type OtlpLimits } from '../../../protocols/otlp/decode.ts';
import { mapOtlp } from '../../../mappers/otlp.ts';
import { configSchema } from '../../../config/index.ts';
import { SPAN_KINDS, type SpanRecord } from '../../../core/record.ts';
import { priceUsd } from '../../../processors/cost.ts';

const dir = fileURLToPath(new URL('../../fixtures/otlp/', import.meta.url));
const limits: OtlpLimits = otlpLimits(configSchema.parse({}));

interface Fixture {
  description: string;
  request: unknown;
  expected: Array<Record<string, unknown>>;
}

function run(request: unknown, lim = limits): SpanRecord[] {
  const norm = decodeOtlpRequest(Buffer.from(JSON.stringify(request)), 'json', lim);
  return mapOtlp(norm, 'ws_fixture', 1760000005000, lim);
}

describe('OTLP mapper fixtures', () => {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort();
  it('has one fixture per convention', () => {
    expect(files).to.include.members([
      'genai-current-structured.json',
      'genai-current-json-strings.json',
      'genai-legacy-events.json',
      'openinference.json',
      'openllmetry-legacy.json',
      'vercel-ai-legacy.json',
      'genai-tool-span.json',
      'genai-agent-span.json',
      'http-span.json',
    ]);
  });

  for (const file of files) {
    const fx = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Fixture;
    describe(file.replace(/\.json$/, ''), () => {
      const records = run(fx.request);
      it('maps every span', () => {
        expect(records).to.have.length(fx.expected.length);
      });
      fx.expected.forEach((exp, i) => {
        it(`span ${String(exp.spanId)} (${String(exp.kind ?? '')}): ${fx.description.slice(0, 60)}`, () => {
          const rec = records.find((r) => r.spanId === exp.spanId);
          expect(rec, `record for span ${String(exp.spanId)}`).to.exist;
          for (const [field, want] of Object.entries(exp)) {
            if (field === 'attributesInclude') {
              for (const [k, v] of Object.entries(want as Record<string, unknown>)) {
                expect(rec!.attributes[k], `attributes["${k}"]`).to.deep.equal(v);
              }
            } else if (field === 'costUsd') {
              expect(rec!.costUsd, 'costUsd').to.be.closeTo(want as number, 1e-12);
            } else {
              expect((rec as unknown as Record<string, unknown>)[field], field).to.deep.equal(want);
            }
          }
          expect(SPAN_KINDS).to.include(rec!.kind);
          expect(rec!.source).to.equal('otlp');
          void i;
        });
      });
    });
  }
});

describe('OTLP mapper rules', () => {
  const T = '1760000000000000000';
  const E = '1760000000250000000';
  const one = (attributes: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    resourceSpans: [
      {
        scopeSpans: [
          {
            spans: [
              {
                traceId: '0102030405060708090a0b0c0d0e0f10',
                spanId: '0102030405060708',
                name: 's',
                kind: 1,
                startTimeUnixNano: T,
                endTimeUnixNano: E,
                attributes: Object.entries(attributes).map(([key, v]) => ({
                  key,
                  value: typeof v === 'number' ? { intValue: v } : { stringValue: v },
                })),
                ...extra,
              },
            ],
          },
        ],
      },
    ],
  });

  // Shapes real instrumentations emit (captured from ai 7.0, @arizeai/openinference-instrumentation-openai 4.2 and
  // -openai-agents 0.2, @traceloop/instrumentation-openai 0.22).
  it('leaves tool results out of a model output message; renders an AI SDK tool output by its value', () => {
    const out = JSON.stringify([
      {
        role: 'assistant',
        parts: [
          { type: 'text', content: 'It is 21°C and sunny in Paris.' },
          { type: 'tool_call', id: 'call_1', name: 'weather', arguments: { city: 'Paris' } },
          { type: 'tool_call_response', id: 'call_1', response: { city: 'Paris', tempC: 21 } },
        ],
      },
    ]);
    const [agent] = run(one({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.output.messages': out }));
    expect(agent!.response).to.equal('It is 21°C and sunny in Paris.');
    const messages = JSON.stringify([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'call_1',
            toolName: 'weather',
            output: { type: 'json', value: { tempC: 21 } },
          },
        ],
      },
    ]);
    const [legacy] = run(
      one({
        'ai.operationId': 'ai.generateText.doGenerate',
        'ai.model.id': 'gpt-4o-mini',
        'ai.prompt.messages': messages,
      }),
    );
    expect(legacy!.prompt).to.equal('user: Weather in Paris?\ntool: {"tempC":21}');
    // The OpenTelemetry openai instrumentation sends a Responses function_call_output as a user message of tool results.
    const input = JSON.stringify([
      { role: 'user', parts: [{ type: 'text', content: 'Weather in Paris?' }] },
      { role: 'user', parts: [{ type: 'tool_call_response', id: 'c1', response: '21C and sunny' }] },
    ]);
    const [responses] = run(one({ 'gen_ai.operation.name': 'chat', 'gen_ai.input.messages': input }));
    expect(responses!.prompt).to.equal('user: Weather in Paris?\ntool: 21C and sunny');
  });

  it('reads OpenInference embedding texts and JSON message lists in input.value / output.value', () => {
    const [emb] = run(
      one({
        'openinference.span.kind': 'EMBEDDING',
        'embedding.model_name': 'text-embedding-3-small',
        'input.value': '["hello world","second text"]',
        'embedding.embeddings.1.embedding.text': 'second text',
        'embedding.embeddings.0.embedding.text': 'hello world',
      }),
    );
    expect([emb!.kind, emb!.prompt]).to.deep.equal(['embedding', 'hello world\nsecond text']);
    const [agent] = run(
      one({
        'openinference.span.kind': 'AGENT',
        'input.mime_type': 'application/json',
        'input.value': '[{"type":"message","role":"user","content":"Weather in Paris?"}]',
        'output.value':
          '[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Sunny, 21°C."}]}]',
      }),
    );
    expect([agent!.prompt, agent!.response]).to.deep.equal(['user: Weather in Paris?', 'Sunny, 21°C.']);
    const [plain] = run(
      one({ 'openinference.span.kind': 'CHAIN', 'input.value': '["just","strings"]', 'output.value': '{"a":1}' }),
    );
    expect([plain!.prompt, plain!.response]).to.deep.equal(['["just","strings"]', '{"a":1}']);
  });

  it('takes an OpenLLMetry assistant message whose content is "null" (tool calls only) as empty', () => {
    const [r] = run(
      one({
        'llm.request.type': 'chat',
        'gen_ai.prompt.0.role': 'user',
        'gen_ai.prompt.0.content': 'Weather in Paris?',
        'gen_ai.prompt.1.role': 'assistant',
        'gen_ai.prompt.1.content': 'null',
        'gen_ai.prompt.2.role': 'tool',
        'gen_ai.prompt.2.content': '{"tempC":21}',
        'gen_ai.prompt.3.role': 'user',
        'gen_ai.prompt.3.content': 'null',
      }),
    );
    expect(r!.prompt).to.equal('user: Weather in Paris?\ntool: {"tempC":21}\nuser: null');
  });

  it('derives total tokens and never loses a span over unknown gen_ai.usage keys', () => {
    const [r] = run(
      one({
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.input_tokens': 10,
        'gen_ai.usage.output_tokens': 5,
        'gen_ai.usage.weird.thing': 'x',
        'gen_ai.usage.total_tokens': 'not-a-number',
      }),
    );
    expect(r!.kind).to.equal('llm');
    expect(r!.totalTokens).to.equal(15);
    expect(r!.durationMs).to.equal(250);
  });

  it('accepts numeric strings for token counts', () => {
    const [r] = run(
      one({
        'gen_ai.operation.name': 'chat',
        'gen_ai.usage.input_tokens': '12',
        'gen_ai.usage.output_tokens': '3',
        'gen_ai.usage.total_tokens': '20',
      }),
    );
    expect([r!.promptTokens, r!.completionTokens, r!.totalTokens]).to.deep.equal([12, 3, 20]);
  });

  it('takes decimal strings only as token counts and costs, and no cost above 1e9 USD', () => {
    const [r] = run(
      one({
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'my-model',
        'gen_ai.usage.input_tokens': '0x10',
        'gen_ai.usage.output_tokens': ' 7 ',
        'gen_ai.usage.total_tokens': '1e3',
        'gen_ai.usage.cost': '0x1',
      }),
    );
    expect([r!.promptTokens, r!.completionTokens, r!.totalTokens, r!.costUsd]).to.deep.equal([0, 0, 0, 0]);
    const [big] = run(
      one({
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'my-model',
        'gen_ai.usage.cost': 1e300,
        'llm.cost.total': '2e9',
      }),
    );
    expect(big!.costUsd).to.equal(0);
    const [ok] = run(
      one({ 'gen_ai.operation.name': 'chat', 'gen_ai.usage.input_tokens': '12.0', 'gen_ai.usage.cost': '1.5e-7' }),
    );
    expect([ok!.promptTokens, ok!.costUsd]).to.deep.equal([12, 1.5e-7]);
  });

  it('prices a count as stored: capped at 10^12, the cost at most 1e9 USD', () => {
    const [r] = run(
      one({
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.input_tokens': '1000000000001',
        'gen_ai.usage.output_tokens': 9007199254740991,
      }),
    );
    expect([r!.promptTokens, r!.completionTokens]).to.deep.equal([1e12, 1e12]);
    expect(r!.costUsd).to.equal(priceUsd('gpt-4o', '', { input: 1e12, output: 1e12 }));
    expect(r!.costUsd).to.be.greaterThan(1e6).and.at.most(1e9);
    expect(priceUsd('gpt-4o', 'openai', { input: 0, output: 1e15 })).to.equal(
      priceUsd('gpt-4o', 'openai', { input: 0, output: 1e12 }),
    );
    expect(priceUsd('claude-opus-4', 'anthropic', { input: 1e12, output: 1e12, cacheRead: 1e12 })).to.be.at.most(1e9);
  });

  it('ignores token counts beyond 2^53 (they would not fit storage) and keeps the span', () => {
    const [r] = run(
      one({
        'gen_ai.operation.name': 'chat',
        'gen_ai.usage.input_tokens': '9223372036854775807',
        'gen_ai.usage.output_tokens': 1e300,
        'llm.token_count.total': '9.3e18',
      }),
    );
    expect([r!.promptTokens, r!.completionTokens, r!.totalTokens]).to.deep.equal([0, 0, 0]);
    expect(r!.attributes['gen_ai.usage.input_tokens']).to.equal('9223372036854775807');
  });

  it('uses a sent cost over the price table, and prices local models at 0', () => {
    const [sent] = run(
      one({
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.input_tokens': 1000,
        'gen_ai.usage.output_tokens': 10,
        'gen_ai.usage.cost': '0.5',
      }),
    );
    expect(sent!.costUsd).to.equal(0.5);
    const [local] = run(
      one({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'ollama',
        'gen_ai.request.model': 'llama3.1:8b',
        'gen_ai.usage.input_tokens': 1000,
        'gen_ai.usage.output_tokens': 10,
      }),
    );
    expect(local!.costUsd).to.equal(0);
    const [unknown] = run(
      one({
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'my-finetune-xyz',
        'gen_ai.usage.input_tokens': 1000,
      }),
    );
    expect(unknown!.costUsd).to.equal(0);
  });

  it('keeps what the envelopes carry: schema URLs, flags and dropped-attribute counts', () => {
    const [r] = run({
      resourceSpans: [
        {
          resource: { attributes: [], droppedAttributesCount: 3 },
          schemaUrl: 'https://opentelemetry.io/schemas/1.37.0',
          scopeSpans: [
            {
              scope: { name: 'lib', droppedAttributesCount: 1 },
              schemaUrl: 'https://opentelemetry.io/schemas/1.36.0',
              spans: [
                {
                  traceId: '0102030405060708090a0b0c0d0e0f10',
                  spanId: '0102030405060708',
                  name: 's',
                  kind: 1,
                  flags: 257,
                  startTimeUnixNano: T,
                  endTimeUnixNano: E,
                  events: [{ name: 'e', timeUnixNano: T, droppedAttributesCount: 4 }],
                  links: [
                    {
                      traceId: '0102030405060708090a0b0c0d0e0f11',
                      spanId: '0102030405060709',
                      flags: 1,
                      droppedAttributesCount: 5,
                    },
                  ],
                },
              ],
            },
          ],
        },
      ],
    });
    expect(r!.attributes).to.include({
      'otel.flags': 257,
      'otel.resource.schema_url': 'https://opentelemetry.io/schemas/1.37.0',
      'otel.resource.dropped_attributes_count': 3,
      'otel.scope.schema_url': 'https://opentelemetry.io/schemas/1.36.0',
      'otel.scope.dropped_attributes_count': 1,
    });
    expect(r!.attributes['otel.links']).to.deep.equal([
      { traceId: '0102030405060708090a0b0c0d0e0f11', spanId: '0102030405060709', flags: 1, droppedAttributesCount: 5 },
    ]);
    expect(r!.events[0]!.attributes).to.deep.equal({ 'otel.dropped_attributes_count': 4 });
  });

  it('keeps a sent cost of 0 (marked, so the cost processor leaves it alone)', () => {
    for (const key of ['llm.cost.total', 'gen_ai.usage.cost']) {
      const [r] = run(
        one({
          'gen_ai.operation.name': 'chat',
          'gen_ai.request.model': 'gpt-4o',
          'gen_ai.usage.input_tokens': 1_000_000,
          [key]: 0,
        }),
      );
      expect(r!.costUsd, key).to.equal(0);
      expect(r!.attributes['tracegate.cost_source'], key).to.equal('client');
    }
    const [priced] = run(
      one({
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.input_tokens': 1_000_000,
        'tracegate.cost_source': 'x',
      }),
    );
    expect(priced!.costUsd).to.be.closeTo(2.5, 1e-9);
    expect(priced!.attributes['tracegate.cost_source']).to.equal('price_table');
  });

  it('maps gen_ai.operation.name values to kinds', () => {
    const cases: Array<[string, string]> = [
      ['chat', 'llm'],
      ['text_completion', 'llm'],
      ['generate_content', 'llm'],
      ['embeddings', 'embedding'],
      ['execute_tool', 'tool'],
      ['invoke_agent', 'agent'],
      ['create_agent', 'agent'],
      ['invoke_workflow', 'chain'],
      ['retrieval', 'retrieval'],
    ];
    for (const [op, kind] of cases) expect(run(one({ 'gen_ai.operation.name': op }))[0]!.kind, op).to.equal(kind);
    expect(run(one({ 'openinference.span.kind': 'guardrail' }))[0]!.kind).to.equal('guardrail');
    expect(run(one({ 'openinference.span.kind': 'EMBEDDING' }))[0]!.kind).to.equal('embedding');
    expect(run(one({ 'gen_ai.tool.name': 'x' }))[0]!.kind).to.equal('tool');
    expect(run(one({ 'gen_ai.agent.name': 'x' }))[0]!.kind).to.equal('agent');
    expect(run(one({ 'http.route': '/x' }))[0]!.kind).to.equal('other');
  });

  it('uses an unparsable (e.g. truncated) JSON message string verbatim', () => {
    const [r] = run(
      one({
        'gen_ai.operation.name': 'chat',
        'gen_ai.input.messages': '[{"role":"user","parts":[{"type":"te',
        'gen_ai.output.messages': 'plain answer',
      }),
    );
    expect(r!.prompt).to.equal('user: [{"role":"user","parts":[{"type":"te');
    expect(r!.response).to.equal('plain answer');
  });

  it('cuts prompt and response to maxStringBytes and marks them', () => {
    const small = { ...limits, maxStringBytes: 32, maxAttributeValueBytes: 1024 };
    const [r] = run(
      one({ 'gen_ai.operation.name': 'chat', 'input.value': 'é'.repeat(40), 'output.value': 'ok' }),
      small,
    );
    expect(Buffer.byteLength(r!.prompt)).to.be.at.most(32);
    expect(r!.prompt).to.equal('é'.repeat(16));
    expect(r!.attributes['tracegate.truncated']).to.include('tracegate.prompt');
  });

  it('reads unflattened OpenInference message arrays', () => {
    const msg = (role: string, content: string) => ({
      kvlistValue: {
        values: [
          {
            key: 'message',
            value: {
              kvlistValue: {
                values: [
                  { key: 'role', value: { stringValue: role } },
                  { key: 'content', value: { stringValue: content } },
                ],
              },
            },
          },
        ],
      },
    });
    const body = one({ 'openinference.span.kind': 'LLM' });
    const sp = body.resourceSpans[0]!.scopeSpans[0]!.spans[0]! as { attributes: unknown[] };
    sp.attributes.push({ key: 'llm.input_messages', value: { arrayValue: { values: [msg('user', 'hi')] } } });
    sp.attributes.push({ key: 'llm.output_messages', value: { arrayValue: { values: [msg('assistant', 'hello')] } } });
    const [r] = run(body);
    expect([r!.kind, r!.prompt, r!.response, r!.trainable]).to.deep.equal(['llm', 'user: hi', 'hello', true]);
  });

  it('prepends system instructions whatever the message source', () => {
    const body = one(
      { 'gen_ai.operation.name': 'chat', 'gen_ai.system_instructions': 'Be brief.' },
      {
        events: [
          {
            name: 'gen_ai.user.message',
            timeUnixNano: T,
            attributes: [{ key: 'content', value: { stringValue: 'hi' } }],
          },
        ],
      },
    );
    expect(run(body)[0]!.prompt).to.equal('system: Be brief.\nuser: hi');
  });

  it('accepts a JSON body with a UTF-8 BOM', () => {
    const body = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from(JSON.stringify(one({ 'gen_ai.operation.name': 'chat' }))),
    ]);
    expect(mapOtlp(decodeOtlpRequest(body, 'json', limits), 'w', 1, limits)).to.have.length(1);
  });

  /** Several spans of one trace: [spanId, parentSpanId, attributes]. */
  const tree = (...spans: Array<[string, string, Record<string, unknown>]>) => ({
    resourceSpans: [
      {
        scopeSpans: [
          {
            spans: spans.map(([spanId, parentSpanId, attributes]) => ({
              traceId: '0102030405060708090a0b0c0d0e0f10',
              spanId,
              parentSpanId,
              name: 's',
              kind: 3,
              startTimeUnixNano: T,
              endTimeUnixNano: E,
              attributes: Object.entries(attributes).map(([key, v]) => ({
                key,
                value:
                  typeof v === 'number'
                    ? { intValue: v }
                    : Array.isArray(v)
                      ? { arrayValue: { values: v.map((x) => ({ stringValue: x })) } }
                      : { stringValue: v },
              })),
            })),
          },
        ],
      },
    ],
  });
  const byId = (rs: SpanRecord[], id: string) => rs.find((r) => r.spanId === id)!;

  it('reads AI SDK legacy embeddings: ai.usage.tokens and ai.value / ai.values', () => {
    const rs = run(
      tree(
        [
          '00000000000000e1',
          '',
          {
            'ai.operationId': 'ai.embed',
            'ai.model.id': 'text-embedding-3-small',
            'ai.model.provider': 'openai.embedding',
            'ai.value': '"sunny day at the beach"',
            'ai.usage.tokens': 1000,
          },
        ],
        [
          '00000000000000e2',
          '00000000000000e1',
          {
            'ai.operationId': 'ai.embed.doEmbed',
            'ai.model.id': 'text-embedding-3-small',
            'ai.model.provider': 'openai.embedding',
            'ai.values': ['"sunny day at the beach"', '"rainy night"'],
            'ai.usage.tokens': 1000,
          },
        ],
      ),
    );
    const call = byId(rs, '00000000000000e2');
    expect([call.kind, call.promptTokens, call.totalTokens, call.prompt]).to.deep.equal([
      'embedding',
      1000,
      1000,
      'sunny day at the beach\nrainy night',
    ]);
    expect(call.costUsd)
      .to.be.closeTo(priceUsd('text-embedding-3-small', 'openai', { input: 1000, output: 0 }), 1e-12)
      .and.to.be.above(0);
    const root = byId(rs, '00000000000000e1');
    expect([root.kind, root.costUsd, root.prompt]).to.deep.equal(['chain', 0, 'sunny day at the beach']);
  });

  it('makes a model span whose usage its model spans below carry a wrapper, so sums do not count it twice', () => {
    // AI SDK 7: an `embeddings` operation span over its provider call, both with the same usage.
    const embed = {
      'gen_ai.operation.name': 'embeddings',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'text-embedding-3-large',
      'gen_ai.usage.input_tokens': 1_000_000,
    };
    const rs = run(tree(['00000000000000a1', '', embed], ['00000000000000a2', '00000000000000a1', embed]));
    const [root, call] = [byId(rs, '00000000000000a1'), byId(rs, '00000000000000a2')];
    expect([
      root.kind,
      root.costUsd,
      root.totalTokens,
      root.attributes['tracegate.wrapper'],
      root.attributes['tracegate.cost_source'],
    ]).to.deep.equal(['chain', 0, 1_000_000, true, undefined]);
    expect([call.kind, call.attributes['tracegate.wrapper']]).to.deep.equal(['embedding', undefined]);
    expect(call.costUsd).to.be.closeTo(0.13, 1e-9);
    // Through a non-model span in between (framework LLM span → step → client LLM span), and a client-sent cost stays as sent.
    const chat = {
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'gpt-4o',
      'gen_ai.usage.input_tokens': 100,
      'gen_ai.usage.output_tokens': 10,
    };
    const nested = run(
      tree(
        ['00000000000000b1', '', { ...chat, 'llm.cost.total': '0.01' }],
        ['00000000000000b2', '00000000000000b1', { 'gen_ai.operation.name': 'agent_step' }],
        ['00000000000000b3', '00000000000000b2', chat],
      ),
    );
    expect(nested.map((r) => r.kind)).to.deep.equal(['chain', 'chain', 'llm']);
    expect(byId(nested, '00000000000000b1').costUsd).to.equal(0.01);
    // A model span with more usage than the ones below it is a call of its own.
    const own = run(
      tree(
        ['00000000000000c1', '', { ...chat, 'gen_ai.usage.input_tokens': 5000 }],
        ['00000000000000c2', '00000000000000c1', chat],
      ),
    );
    expect(own.map((r) => r.kind)).to.deep.equal(['llm', 'llm']);
    // A model span below without usage changes nothing.
    const bare = run(
      tree(
        ['00000000000000d1', '', chat],
        ['00000000000000d2', '00000000000000d1', { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o' }],
      ),
    );
    expect(bare.map((r) => r.kind)).to.deep.equal(['llm', 'llm']);
  });

  it('reads the OpenInference embedding model name', () => {
    const [r] = run(
      one({
        'openinference.span.kind': 'EMBEDDING',
        'embedding.model_name': 'text-embedding-3-small',
        'llm.token_count.prompt': 1_000_000,
        'llm.token_count.total': 1_000_000,
      }),
    );
    expect([r!.kind, r!.model, r!.attributes['tracegate.cost_source']]).to.deep.equal([
      'embedding',
      'text-embedding-3-small',
      'price_table',
    ]);
    expect(r!.costUsd).to.be.closeTo(0.02, 1e-9);
  });

  it('names an OpenLLMetry tool span after its entity, not the enclosing workflow', () => {
    const [r] = run(
      one({
        'traceloop.span.kind': 'tool',
        'traceloop.entity.name': 'get_weather',
        'traceloop.workflow.name': 'weather_flow',
      }),
    );
    expect([r!.kind, r!.actionName]).to.deep.equal(['tool', 'get_weather']);
    const [task] = run(
      one({
        'traceloop.span.kind': 'task',
        'traceloop.entity.name': 'plan',
        'traceloop.workflow.name': 'weather_flow',
      }),
    );
    expect(task!.actionName).to.equal('weather_flow');
  });

  it('prices AI SDK cache writes (ai.usage.inputTokenDetails.cacheWriteTokens)', () => {
    const [r] = run(
      one({
        'ai.operationId': 'ai.generateText.doGenerate',
        'ai.model.id': 'claude-3-5-sonnet-20241022',
        'ai.model.provider': 'anthropic.messages',
        'ai.usage.inputTokens': 10_000,
        'ai.usage.cachedInputTokens': 8000,
        'ai.usage.inputTokenDetails.cacheWriteTokens': 1000,
        'ai.usage.outputTokens': 100,
      }),
    );
    const want = priceUsd('claude-3-5-sonnet-20241022', 'anthropic', {
      input: 10_000,
      output: 100,
      cacheRead: 8000,
      cacheWrite: 1000,
    });
    expect(want).to.be.above(
      priceUsd('claude-3-5-sonnet-20241022', 'anthropic', { input: 10_000, output: 100, cacheRead: 8000 }),
    );
    expect(r!.costUsd).to.be.closeTo(want, 1e-12);
  });

  it('shows OpenInference image parts as [image], and leaves a tool-call-only response empty', () => {
    const [r] = run(
      one({
        'openinference.span.kind': 'LLM',
        'llm.model_name': 'gpt-4o',
        'llm.input_messages.0.message.role': 'user',
        'llm.input_messages.0.message.contents.0.message_content.type': 'text',
        'llm.input_messages.0.message.contents.0.message_content.text': 'What is in this image?',
        'llm.input_messages.0.message.contents.1.message_content.type': 'image',
        'llm.input_messages.0.message.contents.1.message_content.image.image.url': 'https://example.com/cat.png',
        'llm.input_messages.1.message.role': 'user',
        'llm.input_messages.1.message.contents.0.message_content.type': 'image',
        'llm.output_messages.0.message.role': 'assistant',
        'llm.output_messages.0.message.tool_calls.0.tool_call.function.name': 'describe',
        'output.value': '{"id":"chatcmpl-1","choices":[{"message":{"tool_calls":[{"function":{"name":"describe"}}]}}]}',
      }),
    );
    expect(r!.prompt).to.equal('user: What is in this image?\n[image]\nuser: [image]');
    expect(r!.response).to.equal('');
    // Without output messages the raw output is still the response.
    expect(run(one({ 'openinference.span.kind': 'LLM', 'output.value': 'plain' }))[0]!.response).to.equal('plain');
  });

  it('maps the AI SDK 7 step and rerank operations, and reads an ai.prompt system message object', () => {
    expect(run(one({ 'gen_ai.operation.name': 'agent_step' }))[0]!.kind).to.equal('chain');
    expect(run(one({ 'gen_ai.operation.name': 'rerank', 'gen_ai.request.model': 'rerank-v3.5' }))[0]!.kind).to.equal(
      'retrieval',
    );
    for (const system of [[{ role: 'system', content: 'Be brief.' }], { role: 'system', content: 'Be brief.' }]) {
      const prompt = JSON.stringify({ system, prompt: 'hi' });
      expect(run(one({ 'ai.operationId': 'ai.generateText', 'ai.prompt': prompt }))[0]!.prompt).to.equal(
        'system: Be brief.\nuser: hi',
      );
    }
  });

  it('does not mutate the normalized request', () => {
    const norm = decodeOtlpRequest(
      Buffer.from(JSON.stringify(one({ 'gen_ai.operation.name': 'chat' }))),
      'json',
      limits,
    );
    const before = JSON.stringify(norm);
    mapOtlp(norm, 'w', 1, limits);
    expect(JSON.stringify(norm)).to.equal(before);
  });
});

describe('priceUsd', () => {
  it('matches calcPrice for flat-priced models, with cache reads and writes', async () => {
    const { calcPrice } = await import('@pydantic/genai-prices');
    const cases: Array<[string, string, number, number, number, number]> = [
      ['gpt-4o', 'openai', 1000, 100, 400, 0],
      ['gpt-4o-mini', 'openai', 5000, 50, 0, 0],
      ['claude-3-5-haiku-20241022', 'anthropic', 5000, 300, 1000, 2000],
      ['gemini-2.0-flash', 'google', 800, 80, 0, 0],
      ['mistral-large-latest', 'mistral', 800, 80, 0, 0],
    ];
    for (const [model, provider, input, output, cacheRead, cacheWrite] of cases) {
      const ref = calcPrice(
        { input_tokens: input, output_tokens: output, cache_read_tokens: cacheRead, cache_write_tokens: cacheWrite },
        model,
        { providerId: provider },
      );
      expect(ref, model).to.not.equal(null);
      expect(priceUsd(model, provider, { input, output, cacheRead, cacheWrite }), model).to.be.closeTo(
        ref!.total_price,
        1e-12,
      );
    }
  });

  it('is 0 for local providers, empty or unknown models', () => {
    expect(priceUsd('llama3', 'ollama', { input: 100, output: 100 })).to.equal(0);
    expect(priceUsd('gpt-4o', 'lmstudio', { input: 100, output: 100 })).to.equal(0);
    expect(priceUsd('', 'openai', { input: 100, output: 100 })).to.equal(0);
    expect(priceUsd('definitely-not-a-model', '', { input: 100, output: 100 })).to.equal(0);
  });

  it('prices a dated snapshot the catalog does not know as its undated model; a known snapshot at its own price', () => {
    const base = priceUsd('gpt-4o-mini', 'openai', { input: 1e6, output: 1e6 });
    expect(base).to.be.greaterThan(0);
    for (const m of ['gpt-4o-mini-2031-02-03', 'gpt-4o-mini-20310203'])
      expect(priceUsd(m, 'openai', { input: 1e6, output: 1e6 }), m).to.be.closeTo(base, 1e-12);
    expect(priceUsd('claude-3-5-haiku@20310203', 'anthropic', { input: 1e6, output: 0 })).to.be.closeTo(
      priceUsd('claude-3-5-haiku', 'anthropic', { input: 1e6, output: 0 }),
      1e-12,
    );
    // gpt-4o-2024-05-13 is in the catalog at a higher price than gpt-4o: its own price, not the alias'.
    expect(priceUsd('gpt-4o-2024-05-13', 'openai', { input: 1e6, output: 0 })).to.be.greaterThan(
      priceUsd('gpt-4o', 'openai', { input: 1e6, output: 0 }),
    );
    expect(priceUsd('definitely-not-a-model-2031-02-03', '', { input: 100, output: 100 })).to.equal(0);
  });

  it('treats cache counts larger than input as reported on top of uncached input', () => {
    const a = priceUsd('claude-3-5-haiku-20241022', 'anthropic', { input: 100, output: 0, cacheRead: 1000 });
    const b = priceUsd('claude-3-5-haiku-20241022', 'anthropic', { input: 1100, output: 0, cacheRead: 1000 });
    expect(a).to.be.greaterThan(0);
    expect(a).to.be.closeTo(b, 1e-15);
  });

  it('understands GenAI provider names and falls back to the model name', () => {
    expect(priceUsd('gpt-4o', 'azure.ai.openai', { input: 1e6, output: 0 })).to.be.closeTo(2.5, 1e-9);
    expect(priceUsd('gpt-4o', 'some-proxy', { input: 1e6, output: 0 })).to.be.closeTo(2.5, 1e-9);
  });

  it('is fast once memoized', () => {
    priceUsd('gpt-4o', 'openai', { input: 1, output: 1 });
    const t = performance.now();
    for (let i = 0; i < 100_000; i++) priceUsd('gpt-4o', 'openai', { input: i, output: 10, cacheRead: 1 });
    expect(performance.now() - t).to.be.below(500);
  });
});
