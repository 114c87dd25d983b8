// Trainable model calls as each instrumentation stores them (attributes as the mappers keep them), for the
// training export's pure code: one per convention conversationOf reads.
import { emptySpan, type SpanRecord, type Source } from '../../../core/record.ts';

const T0 = 1_795_000_000_000_000_000n;

export function call(over: Partial<SpanRecord> & { source?: Source } = {}): SpanRecord {
  return {
    ...emptySpan('ws', over.source ?? 'otlp'),
    traceId: 'trace-1',
    spanId: 'span-1',
    name: 'chat',
    kind: 'llm',
    startTimeNs: (T0 + 1_000_000n).toString(),
    endTimeNs: (T0 + 2_000_000_000n).toString(),
    status: 'completed',
    model: 'gpt-4o-mini',
    prompt: 'p',
    response: 'r',
    trainable: true,
    ...over,
  };
}

export function toolSpan(
  id: string,
  name: string,
  args: unknown,
  result: unknown,
  startOffsetNs = 500_000_000n,
): SpanRecord {
  return call({
    spanId: `tool-${id}`,
    kind: 'tool',
    name: `execute_tool ${name}`,
    startTimeNs: (T0 + startOffsetNs).toString(),
    attributes: {
      'gen_ai.tool.name': name,
      'gen_ai.tool.call.id': id,
      'gen_ai.tool.call.arguments': JSON.stringify(args),
      'gen_ai.tool.call.result': JSON.stringify(result),
    },
    trainable: false,
  });
}

/** Named calls, each with the conversation (roles, in order) conversationOf must read from it. */
export const CONVENTIONS: Record<string, { span: SpanRecord; roles: string[] }> = {
  'native: the prompt and response only': {
    span: call({ source: 'native', prompt: 'What is 2+2?', response: '4' }),
    roles: ['user', 'assistant'],
  },
  'GenAI semconv parts, system instructions, a tool call and its result': {
    span: call({
      prompt: 'weather?',
      response: 'It is 18 degrees in Paris.',
      attributes: {
        'gen_ai.system_instructions': JSON.stringify([{ type: 'text', content: 'You are terse.' }]),
        'gen_ai.input.messages': JSON.stringify([
          { role: 'user', parts: [{ type: 'text', content: 'Weather in Paris?' }] },
          {
            role: 'assistant',
            parts: [{ type: 'tool_call', id: 'c1', name: 'weather', arguments: { city: 'Paris' } }],
          },
          { role: 'tool', parts: [{ type: 'tool_call_response', id: 'c1', response: { celsius: 18 } }] },
        ]),
        'gen_ai.output.messages': JSON.stringify([
          { role: 'assistant', parts: [{ type: 'text', content: 'It is 18 degrees in Paris.' }] },
        ]),
        'gen_ai.tool.definitions': JSON.stringify([
          { type: 'function', name: 'weather', description: 'Weather', parameters: { type: 'object' } },
        ]),
      },
    }),
    roles: ['system', 'user', 'assistant', 'tool', 'assistant'],
  },
  'OpenAI chat messages (developer role, tool_calls, a tool message)': {
    span: call({
      source: 'proxy',
      prompt: 'sum',
      response: '3',
      attributes: {
        'gen_ai.input.messages': [
          { role: 'developer', content: 'Add numbers.' },
          { role: 'user', content: [{ type: 'text', text: '1+2?' }] },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'add', arguments: '{"a":1,"b":2}' } }],
          },
          { role: 'tool', tool_call_id: 'call_a', content: '3' },
        ] as never,
      },
    }),
    roles: ['system', 'user', 'assistant', 'tool', 'assistant'],
  },
  'Responses items: function_call and function_call_output, reasoning left out': {
    span: call({
      source: 'proxy',
      prompt: 'lookup',
      response: 'Found it.',
      attributes: {
        'gen_ai.input.messages': JSON.stringify([
          { role: 'user', content: [{ type: 'input_text', text: 'Find order 7' }] },
          { type: 'reasoning', summary: [] },
          { type: 'function_call', call_id: 'fc_1', name: 'find_order', arguments: '{"id":7}' },
          { type: 'function_call_output', call_id: 'fc_1', output: '{"status":"shipped"}' },
        ]),
      },
    }),
    roles: ['user', 'assistant', 'tool', 'assistant'],
  },
  'OpenInference flattened messages and tools': {
    span: call({
      prompt: 'hi',
      response: 'hello!',
      attributes: {
        'llm.input_messages.0.message.role': 'system',
        'llm.input_messages.0.message.content': 'Be kind.',
        'llm.input_messages.1.message.role': 'user',
        'llm.input_messages.1.message.content': 'hi',
        'llm.output_messages.0.message.role': 'assistant',
        'llm.output_messages.0.message.content': 'hello!',
        'llm.tools.0.tool.json_schema': JSON.stringify({ type: 'function', function: { name: 'noop' } }),
      },
    }),
    roles: ['system', 'user', 'assistant'],
  },
  'OpenLLMetry gen_ai.prompt.N / gen_ai.completion.N': {
    span: call({
      prompt: 'q',
      response: 'a',
      attributes: {
        'gen_ai.prompt.0.role': 'user',
        'gen_ai.prompt.0.content': 'question one',
        'gen_ai.prompt.1.role': 'assistant',
        'gen_ai.prompt.1.content': 'answer one',
        'gen_ai.prompt.2.role': 'user',
        'gen_ai.prompt.2.content': 'question two',
        'gen_ai.completion.0.role': 'assistant',
        'gen_ai.completion.0.content': 'answer two',
      },
    }),
    roles: ['user', 'assistant', 'user', 'assistant'],
  },
  'legacy events: gen_ai.user.message and gen_ai.choice': {
    span: call({
      prompt: 'ping',
      response: 'pong',
      events: [
        { name: 'gen_ai.user.message', timeNs: '1', attributes: { 'gen_ai.event.content': '{"content":"ping"}' } },
        {
          name: 'gen_ai.choice',
          timeNs: '2',
          attributes: { 'gen_ai.event.content': '{"message":{"role":"assistant","content":"pong"}}' },
        },
      ],
    }),
    roles: ['user', 'assistant'],
  },
  'a call left unanswered and a result of no call are dropped': {
    span: call({
      prompt: 'x',
      response: 'done',
      attributes: {
        'gen_ai.input.messages': JSON.stringify([
          { role: 'user', content: 'do it' },
          {
            role: 'assistant',
            tool_calls: [{ id: 'lost', type: 'function', function: { name: 'f', arguments: '{}' } }],
          },
          { role: 'user', content: 'well?' },
          { role: 'tool', tool_call_id: 'nobody', content: 'stray' },
        ]),
      },
    }),
    roles: ['user', 'user', 'assistant'],
  },
};
