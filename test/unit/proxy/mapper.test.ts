// The pure Responses → SpanRecord mapper and the incremental SSE assembler, on fixtures.
import { expect } from 'chai';
import { duplicateKey } from '../../../platform/json-prescan.ts';
import {
  mapProxy,
  providerFor,
  renderPrompt,
  requestStrings,
  requestTextParts,
  responseOutputText,
  ResponsesStreamAssembler,
  withTexts,
  type ProxyExchange,
} from '../../../mappers/proxy.ts';

const usage = {
  input_tokens: 1200,
  input_tokens_details: { cached_tokens: 1000 },
  output_tokens: 300,
  output_tokens_details: { reasoning_tokens: 100 },
  total_tokens: 1500,
};
const message = (text: string) => ({
  type: 'message',
  id: 'msg_1',
  status: 'completed',
  role: 'assistant',
  content: [{ type: 'output_text', text, annotations: [] }],
});
const completed = {
  id: 'resp_1',
  object: 'response',
  status: 'completed',
  model: 'gpt-4o-mini-2024-07-18',
  error: null,
  incomplete_details: null,
  output: [{ type: 'reasoning', id: 'rs_1', summary: [] }, message('Hello '), message('world.')],
  usage,
};

/** An SSE body as the provider sends it. */
function sse(events: Array<Record<string, unknown>>, eol = '\n'): string {
  return events
    .map((e, i) => `event: ${e.type}${eol}data: ${JSON.stringify({ ...e, sequence_number: i })}${eol}${eol}`)
    .join('');
}
const streamEvents = [
  { type: 'response.created', response: { ...completed, status: 'in_progress', output: [], usage: null } },
  { type: 'response.in_progress', response: { ...completed, status: 'in_progress', output: [], usage: null } },
  {
    type: 'response.output_item.added',
    output_index: 0,
    item: { type: 'message', id: 'msg_1', role: 'assistant', content: [] },
  },
  {
    type: 'response.content_part.added',
    item_id: 'msg_1',
    output_index: 0,
    content_index: 0,
    part: { type: 'output_text', text: '' },
  },
  { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hello ' },
  { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'wörld ✓.' },
  { type: 'response.output_text.done', item_id: 'msg_1', output_index: 0, content_index: 0, text: 'Hello wörld ✓.' },
  {
    type: 'response.content_part.done',
    item_id: 'msg_1',
    output_index: 0,
    content_index: 0,
    part: { type: 'output_text', text: 'Hello wörld ✓.' },
  },
  { type: 'response.output_item.done', output_index: 0, item: message('Hello wörld ✓.') },
  { type: 'response.completed', response: { ...completed, output: [message('Hello wörld ✓.')] } },
];

function exchange(over: Partial<ProxyExchange>): ProxyExchange {
  return {
    workspaceId: 'ws',
    traceId: 'a'.repeat(32),
    spanId: 'b'.repeat(16),
    parentSpanId: '',
    startMs: 1_700_000_000_000,
    endMs: 1_700_000_000_250,
    request: { model: 'gpt-4o-mini', input: 'Say hello', temperature: 0.2, metadata: { user: 'u1' } },
    prompt: 'Say hello',
    provider: 'openai',
    environment: 'prod',
    actionName: 'greet',
    stream: false,
    outcome: { kind: 'upstream', httpStatus: 200, requestId: 'req_1', body: completed, stream: null },
    attributes: {},
    ...over,
  };
}

describe('proxy mapper: request text', () => {
  it('reads instructions and a string input', () => {
    const parts = requestTextParts({ model: 'm', instructions: 'Be brief.', input: 'Hi there' });
    expect(parts).to.deep.equal([
      { path: ['instructions'], role: 'system', text: 'Be brief.' },
      { path: ['input'], role: 'user', text: 'Hi there' },
    ]);
    expect(renderPrompt(parts)).to.equal('system: Be brief.\n\nuser: Hi there');
    expect(renderPrompt(parts.slice(1))).to.equal('Hi there');
  });

  it('reads the text parts of an item array and skips images, calls and empty text', () => {
    const body = {
      model: 'm',
      input: [
        { role: 'developer', content: 'Rules.' },
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'Look:' },
            { type: 'input_image', image_url: 'data:…' },
            { type: 'input_text', text: '' },
          ],
        },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Calling a tool.' }] },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'sunny' },
      ],
    };
    const parts = requestTextParts(body);
    expect(parts.map((p) => [p.path.join('.'), p.role, p.text])).to.deep.equal([
      ['input.0.content', 'developer', 'Rules.'],
      ['input.1.content.0.text', 'user', 'Look:'],
      ['input.2.content.0.text', 'assistant', 'Calling a tool.'],
      ['input.4.output', 'tool', 'sunny'],
    ]);
  });

  it('withTexts rewrites only the given fields, on a copy', () => {
    const body = {
      model: 'm',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'mail a@b.co' }] }],
      tools: [{ type: 'function', name: 'f' }],
    };
    const out = withTexts(body, [{ path: ['input', 0, 'content', 0, 'text'], text: 'mail [REDACTED:email]' }]);
    expect(out).to.deep.equal({
      ...body,
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'mail [REDACTED:email]' }] }],
    });
    expect(body.input[0]!.content[0]!.text).to.equal('mail a@b.co');
  });

  it('withTexts renames keys (order kept, deepest first, a clash numbered) after rewriting values under them', () => {
    const body = {
      model: 'm',
      metadata: { 'a@b.co': { 'c@d.co': 'x', k: 'mail e@f.co' }, '[REDACTED:email]': 'taken', z: '1' },
    };
    const out = withTexts(body, [
      { path: ['metadata', 'a@b.co'], text: '[REDACTED:email]', key: true },
      { path: ['metadata', 'a@b.co', 'c@d.co'], text: '[REDACTED:email]', key: true },
      { path: ['metadata', 'a@b.co', 'k'], text: 'mail [REDACTED:email]' },
    ]);
    expect(out).to.deep.equal({
      model: 'm',
      metadata: {
        '[REDACTED:email] (2)': { '[REDACTED:email]': 'x', k: 'mail [REDACTED:email]' },
        '[REDACTED:email]': 'taken',
        z: '1',
      },
    });
    expect(Object.keys(out.metadata as object)).to.deep.equal(['[REDACTED:email] (2)', '[REDACTED:email]', 'z']);
    expect(Object.keys(body.metadata)).to.deep.equal(['a@b.co', '[REDACTED:email]', 'z']);
  });

  it('duplicateKey finds a key repeated in one object, escaped or not, at any depth', () => {
    const dup = (s: string) => duplicateKey(Buffer.from(s));
    expect(dup('{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}')).to.equal(null);
    expect(dup('{"a":1,"b":"a","a":2}')).to.equal('a');
    expect(dup('{"in\\"put":1,"x":{"k":[1,{"y":2,"y":3}]}}')).to.equal('y');
    expect(dup('{"input":1,"\\u0069nput":2}')).to.equal('input');
    expect(dup('[{"k":"{\\"k\\":1,"},{"k":2}]')).to.equal(null);
    expect(dup('{"k":{},"k":[]}')).to.equal('k');
    expect(dup('{"input":1,"INPUT":2}')).to.equal(null);
    expect(duplicateKey(Buffer.from('{"input":1,"INPUT":2}'), true)).to.equal('INPUT');
    expect(duplicateKey(Buffer.from('{"Variableſ":1,"variables":2}'), true)).to.equal('variables');
    // Inside caller-named maps keys are data: compared exactly, at any depth below them.
    const free = new Set(['metadata', 'properties']);
    expect(
      duplicateKey(
        Buffer.from('{"metadata":{"ID":1,"id":2},"tools":[{"properties":{"Name":{},"name":{"a":{"K":1,"k":2}}}}]}'),
        true,
        free,
      ),
    ).to.equal(null);
    expect(duplicateKey(Buffer.from('{"metadata":{"id":1},"Metadata":{}}'), true, free)).to.equal('Metadata');
    expect(duplicateKey(Buffer.from('{"tools":[{"type":"a","TYPE":"b"}]}'), true, free)).to.equal('TYPE');
  });

  it('requestStrings skips only a whole base64 data URL under an inline-data key; other text in one is scanned', () => {
    const png = 'data:image/png;base64,iVBORw0KGgo=';
    const scanned = (v: string) =>
      requestStrings({
        model: 'm',
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_image', image_url: v },
              { type: 'input_file', file_data: v },
            ],
          },
        ],
        metadata: { file_url: v },
      })
        .filter((p) => p.text === v)
        .map((p) => p.path.join('.'));
    expect(scanned(png)).to.deep.equal([]);
    expect(scanned('data:application/pdf;name=a.pdf;base64,JVBERi0xLjQK')).to.deep.equal([]);
    const all = ['input.0.content.0.image_url', 'input.0.content.1.file_data', 'metadata.file_url'];
    for (const v of [
      `${png} sk-proj-Zx9yWv8uTs7rQp6oNm5lKj4iHg3fEd2cBa1Zx9yWv8uTs7rQp6o`,
      `${png}\nmail ann@example.com`,
      'data:image/png;base64,not base64 at all',
      'data:text/plain,sk-proj-Zx9yWv8uTs7rQp6oNm5lKj4iHg3fEd2cBa1Zx9yWv8uTs7rQp6o',
      `${png}==x`,
    ]) {
      expect(scanned(v), v).to.deep.equal(all);
    }
  });
});

describe('proxy mapper: response text and SSE', () => {
  it('concatenates output_text parts of message items only', () => {
    expect(responseOutputText(completed)).to.equal('Hello world.');
    expect(responseOutputText(null)).to.equal('');
  });

  for (const eol of ['\n', '\r\n']) {
    it(`assembles the same result whatever the chunking (${JSON.stringify(eol)} line ends)`, () => {
      const bytes = Buffer.from(sse(streamEvents, eol));
      const whole = new ResponsesStreamAssembler();
      whole.push(bytes, 5);
      const a = whole.end();
      const byte = new ResponsesStreamAssembler();
      for (let i = 0; i < bytes.length; i++) byte.push(bytes.subarray(i, i + 1), 5);
      const b = byte.end();
      expect(a.text).to.equal('Hello wörld ✓.');
      expect(a.events).to.equal(streamEvents.length);
      expect(a.terminal).to.equal(true);
      expect(a.response!.usage).to.deep.equal(usage);
      expect(a.firstDeltaAtMs).to.equal(5);
      expect(b).to.deep.equal(a);
    });
  }

  it('ignores comments, joins multi-line data, tolerates [DONE], reads both error shapes', () => {
    const asm = new ResponsesStreamAssembler();
    asm.push(
      Buffer.from(
        ': keep-alive\n\nevent: response.output_text.delta\ndata: {"type":"response.output_text.delta",\ndata: "delta":"x"}\n\n',
      ),
    );
    asm.push(
      Buffer.from(
        'event: error\ndata: {"type":"error","sequence_number":2,"error":{"code":"server_error","message":"boom","param":null}}\n\ndata: [DONE]\n\n',
      ),
    );
    const s = asm.end();
    expect(s.text).to.equal('x');
    expect(s.error).to.deep.equal({ code: 'server_error', message: 'boom' });
    expect(s.terminal).to.equal(false);
    const flat = new ResponsesStreamAssembler();
    flat.push(
      Buffer.from(
        'event: error\ndata: {"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null}',
      ),
    );
    expect(flat.end().error).to.deep.equal({ code: 'rate_limit_exceeded', message: 'slow down' });
  });
});

describe('proxy mapper: records', () => {
  it('maps a completed JSON response: text, tokens, cache and reasoning, cost, request parameters', () => {
    const r = mapProxy(exchange({}));
    expect(r).to.include({
      source: 'proxy',
      kind: 'llm',
      status: 'completed',
      model: 'gpt-4o-mini-2024-07-18',
      provider: 'openai',
      prompt: 'Say hello',
      response: 'Hello world.',
      promptTokens: 1200,
      completionTokens: 300,
      totalTokens: 1500,
      requestId: 'req_1',
      finishReason: 'stop',
      durationMs: 250,
      environment: 'prod',
      actionName: 'greet',
      trainable: true,
      traceId: 'a'.repeat(32),
      spanId: 'b'.repeat(16),
    });
    expect(r.costUsd).to.be.greaterThan(0);
    expect(r.attributes).to.include({
      'gen_ai.usage.cache_read.input_tokens': 1000,
      'gen_ai.usage.reasoning.output_tokens': 100,
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.request.temperature': 0.2,
      'gen_ai.response.id': 'resp_1',
      'tracegate.cost_source': 'price_table',
      'http.response.status_code': 200,
    });
    expect(r.attributes.metadata).to.deep.equal({ user: 'u1' });
    // Cached input is cheaper than fresh input: the same usage without cache costs more.
    const fresh = mapProxy(
      exchange({
        outcome: {
          kind: 'upstream',
          httpStatus: 200,
          requestId: '',
          body: { ...completed, usage: { ...usage, input_tokens_details: { cached_tokens: 0 } } },
          stream: null,
        },
      }),
    );
    expect(fresh.costUsd).to.be.greaterThan(r.costUsd);
    // Absurd counts from an upstream are stored capped, and priced as stored.
    const huge = {
      input_tokens: 9007199254740993,
      output_tokens: -5,
      total_tokens: 1e300,
      input_tokens_details: { cached_tokens: 2e12 },
    };
    const capped = mapProxy(
      exchange({
        outcome: {
          kind: 'upstream',
          httpStatus: 200,
          requestId: '',
          body: { ...completed, usage: huge },
          stream: null,
        },
      }),
    );
    expect(capped).to.include({ promptTokens: 1e12, completionTokens: 0, totalTokens: 1e12 });
    const asStored = mapProxy(
      exchange({
        outcome: {
          kind: 'upstream',
          httpStatus: 200,
          requestId: '',
          body: {
            ...completed,
            usage: { input_tokens: 1e12, output_tokens: 0, input_tokens_details: { cached_tokens: 1e12 } },
          },
          stream: null,
        },
      }),
    );
    expect(capped.costUsd).to.equal(asStored.costUsd).and.be.at.most(1e9);
  });

  it('reads request parameters in any letter case, as the route checks previous_response_id', () => {
    const r = mapProxy(
      exchange({
        request: {
          model: 'gpt-4o-mini',
          input: 'Say hello',
          Previous_Response_Id: 'resp_0',
          TEMPERATURE: 0.4,
          top_p: null,
          Metadata: { user: 'u2' },
          Tools: [{ type: 'function', name: 'lookup' }],
        },
      }),
    );
    expect(r.attributes).to.include({
      'gen_ai.request.previous_response_id': 'resp_0',
      'gen_ai.request.temperature': 0.4,
    });
    expect(r.attributes.metadata).to.deep.equal({ user: 'u2' });
    expect(r.attributes['gen_ai.request.tools']).to.deep.equal(['lookup']);
    expect(r.attributes).to.not.have.property('gen_ai.request.top_p');
  });

  it('maps incomplete, failed and tool-call responses', () => {
    const inc = mapProxy(
      exchange({
        outcome: {
          kind: 'upstream',
          httpStatus: 200,
          requestId: '',
          body: { ...completed, status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } },
          stream: null,
        },
      }),
    );
    expect(inc).to.include({ status: 'incomplete', finishReason: 'max_output_tokens', trainable: false });
    const failed = mapProxy(
      exchange({
        outcome: {
          kind: 'upstream',
          httpStatus: 200,
          requestId: '',
          body: { ...completed, status: 'failed', output: [], error: { code: 'server_error', message: 'oops' } },
          stream: null,
        },
      }),
    );
    expect(failed).to.include({ status: 'error', finishReason: 'server_error', statusMessage: 'oops' });
    const tool = mapProxy(
      exchange({
        outcome: {
          kind: 'upstream',
          httpStatus: 200,
          requestId: '',
          body: {
            ...completed,
            output: [{ type: 'function_call', name: 'get_weather', call_id: 'c1', arguments: '{}' }],
          },
          stream: null,
        },
      }),
    );
    expect(tool).to.include({ status: 'completed', finishReason: 'tool_calls', response: '' });
    expect(tool.attributes['gen_ai.response.tool_calls']).to.deep.equal([{ name: 'get_weather', call_id: 'c1' }]);
  });

  it('maps an upstream error answer', () => {
    const body = {
      error: { message: 'Rate limit reached', type: 'requests', param: null, code: 'rate_limit_exceeded' },
    };
    const r = mapProxy(
      exchange({ outcome: { kind: 'upstream', httpStatus: 429, requestId: 'req_9', body, stream: null } }),
    );
    expect(r).to.include({
      status: 'error',
      statusMessage: 'Rate limit reached',
      finishReason: 'rate_limit_exceeded',
      requestId: 'req_9',
      promptTokens: 0,
      costUsd: 0,
    });
    expect(r.attributes['http.response.status_code']).to.equal(429);
  });

  it('maps a stream summary the same as the JSON answer', () => {
    const asm = new ResponsesStreamAssembler();
    asm.push(Buffer.from(sse(streamEvents)));
    const r = mapProxy(
      exchange({
        stream: true,
        outcome: { kind: 'upstream', httpStatus: 200, requestId: 'req_1', body: null, stream: asm.end() },
      }),
    );
    expect(r).to.include({
      status: 'completed',
      response: 'Hello wörld ✓.',
      promptTokens: 1200,
      completionTokens: 300,
      finishReason: 'stop',
    });
    expect(r.attributes['proxy.stream.events']).to.equal(streamEvents.length);
  });

  it('marks a stream without a terminal event, or with an error event, as an error', () => {
    const cut = new ResponsesStreamAssembler();
    cut.push(Buffer.from(sse(streamEvents.slice(0, 6))));
    const r = mapProxy(
      exchange({
        stream: true,
        outcome: { kind: 'upstream', httpStatus: 200, requestId: '', body: null, stream: cut.end() },
      }),
    );
    expect(r).to.include({ status: 'error', finishReason: 'stream_truncated', response: 'Hello wörld ✓.' });
  });

  it('maps blocked, cancelled (with what arrived) and transport failures', () => {
    const blocked = mapProxy(
      exchange({
        outcome: { kind: 'blocked', message: 'blocked by policy' },
        attributes: { 'governance.decision': 'block' },
      }),
    );
    expect(blocked).to.include({
      status: 'blocked',
      statusMessage: 'blocked by policy',
      response: '',
      trainable: false,
    });
    expect(blocked.attributes['governance.decision']).to.equal('block');
    const partial = new ResponsesStreamAssembler();
    partial.push(Buffer.from(sse(streamEvents.slice(0, 5))));
    const cancelled = mapProxy(exchange({ stream: true, outcome: { kind: 'cancelled' }, partial: partial.end() }));
    expect(cancelled).to.include({
      status: 'cancelled',
      response: 'Hello ',
      finishReason: 'cancelled',
      promptTokens: 0,
    });
    const down = mapProxy(
      exchange({
        outcome: { kind: 'transport_error', code: 'upstream_timeout', message: 'the provider did not answer in time' },
      }),
    );
    expect(down).to.include({ status: 'error', finishReason: 'upstream_timeout', requestId: '' });
  });

  it('derives the provider from the upstream host', () => {
    expect(providerFor('https://api.openai.com/v1')).to.equal('openai');
    expect(providerFor('https://x.openai.azure.com/openai/v1')).to.equal('azure');
    expect(providerFor('http://127.0.0.1:9999/v1')).to.equal('openai');
  });
});
