// The training export's pure parts: a stored model call read as the conversation it answered, in every
// convention the collector stores (test/unit/training/fixtures.ts), each line format checked with OpenAI's
// fine-tuning checks (test/support/openai-ft-check.ts), the split, and the policy's redaction of a line.
import { expect } from 'chai';
import { parsePolicy } from '../../../processors/governance/policy.ts';
import { chatLine, dpoLine, ktoLine, lineRedactor, splitOf } from '../../../training/lines.ts';
import { conversationOf } from '../../../training/messages.ts';
import {
  chatLineProblems,
  dpoLineProblems,
  expectValidChatLines,
  expectValidDpoLines,
} from '../../support/openai-ft-check.ts';
import { CONVENTIONS, call, toolSpan } from './fixtures.ts';

describe('training export: conversations and lines', () => {
  for (const [name, { span, roles }] of Object.entries(CONVENTIONS))
    it(`${name}: ${roles.join(' → ')}, a valid openai_chat line`, () => {
      const line = chatLine(conversationOf(span));
      expectValidChatLines([line]);
      const messages = line.messages as Array<{ role: string; content?: string; weight?: number }>;
      expect(messages.map((m) => m.role)).to.deep.equal(roles);
      const last = messages.at(-1)!;
      expect(last.weight, 'the answer is trained on').to.equal(undefined);
      // Earlier assistant turns are history, not trained on.
      for (const m of messages.slice(0, -1)) if (m.role === 'assistant') expect(m.weight).to.equal(0);
    });

  it('reads the tool calls and their arguments as JSON text, the tool definitions, the system prompt', () => {
    const c = conversationOf(CONVENTIONS['GenAI semconv parts, system instructions, a tool call and its result']!.span);
    expect(c.messages[0]).to.deep.equal({ role: 'system', content: 'You are terse.' });
    expect(c.messages[2]).to.deep.include({
      role: 'assistant',
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }],
    });
    expect(c.messages[3]).to.deep.equal({ role: 'tool', tool_call_id: 'c1', content: '{"celsius":18}' });
    expect(c.answer).to.deep.equal({ role: 'assistant', content: 'It is 18 degrees in Paris.' });
    expect(c.tools).to.deep.equal([
      { type: 'function', function: { name: 'weather', description: 'Weather', parameters: { type: 'object' } } },
    ]);
  });

  it("a single-call source's tool spans become the assistant's calls and tool results, before the answer", () => {
    const span = call({ source: 'native', prompt: 'Order 7?', response: 'Shipped.' });
    const line = chatLine(
      conversationOf(span, [
        toolSpan('t1', 'find_order', { id: 7 }, { status: 'shipped' }),
        toolSpan('t2', 'eta', {}, 'Monday'),
      ]),
    );
    expectValidChatLines([line]);
    expect((line.messages as Array<{ role: string }>).map((m) => m.role)).to.deep.equal([
      'user',
      'assistant',
      'tool',
      'tool',
      'assistant',
    ]);
    // An OTLP trace's tool span started after the call ended belongs to a later call.
    const later = toolSpan('t3', 'late', {}, 'x', 5_000_000_000n);
    expect(chatLine(conversationOf(call({ prompt: 'a', response: 'b' }), [later])).messages).to.have.length(2);
  });

  it('the checks refuse what OpenAI refuses (so that passing them means something)', () => {
    const ok = {
      messages: [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b' },
      ],
    };
    expect(chatLineProblems(ok)).to.deep.equal([]);
    const bad: Array<[unknown, RegExp]> = [
      [{}, /missing_messages_list/],
      [{ messages: [{ role: 'user', content: 'a' }] }, /last message/],
      [
        {
          messages: [
            { role: 'robot', content: 'a' },
            { role: 'assistant', content: 'b' },
          ],
        },
        /unrecognized_role/,
      ],
      [{ messages: [{ role: 'user' }, { role: 'assistant', content: 'b' }] }, /missing_content/],
      [
        {
          messages: [
            { role: 'user', content: '' },
            { role: 'assistant', content: 'b' },
          ],
        },
        /empty content/,
      ],
      [
        {
          messages: [
            { role: 'user', content: [{ type: 'text' }] },
            { role: 'assistant', content: 'b' },
          ],
        },
        /not text/,
      ],
      [
        {
          messages: [
            { role: 'user', content: 'a', extra: 1 },
            { role: 'assistant', content: 'b' },
          ],
        },
        /unrecognized_key/,
      ],
      [
        {
          messages: [
            { role: 'user', content: 'a' },
            { role: 'assistant', content: 'b', weight: 2 },
          ],
        },
        /weight/,
      ],
      [
        {
          messages: [
            { role: 'user', content: 'a' },
            { role: 'assistant', tool_calls: [{ id: 'x', type: 'function', function: { name: 'f', arguments: {} } }] },
            { role: 'tool', tool_call_id: 'x', content: 'r' },
            { role: 'assistant', content: 'b' },
          ],
        },
        /JSON text/,
      ],
      [
        {
          messages: [
            { role: 'user', content: 'a' },
            { role: 'tool', tool_call_id: 'y', content: 'r' },
            { role: 'assistant', content: 'b' },
          ],
        },
        /answers no earlier call/,
      ],
    ];
    for (const [line, problem] of bad)
      expect(chatLineProblems(line).join('; '), JSON.stringify(line)).to.match(problem);
  });

  it('openai_dpo: one input without SFT weights, one preferred and one other answer', () => {
    const c = conversationOf(CONVENTIONS['OpenLLMetry gen_ai.prompt.N / gen_ai.completion.N']!.span);
    const line = dpoLine(c, c.answer, { role: 'assistant', content: 'no idea' });
    expectValidDpoLines([line]);
    expect(JSON.stringify(line)).to.not.include('weight');
    expect(line.preferred_output).to.deep.equal([{ role: 'assistant', content: 'answer two' }]);
    expect(line.non_preferred_output).to.deep.equal([{ role: 'assistant', content: 'no idea' }]);
    expect(dpoLineProblems({ input: { messages: [] }, preferred_output: [], non_preferred_output: [] })).to.not.be
      .empty;
  });

  it('hf_kto: the prompt as messages, the answer as the completion, the label', () => {
    const c = conversationOf(call({ source: 'native', prompt: 'hi', response: 'hey' }));
    expect(ktoLine(c, false)).to.deep.equal({
      prompt: [{ role: 'user', content: 'hi' }],
      completion: [{ role: 'assistant', content: 'hey' }],
      label: false,
    });
  });

  it('split: the same key lands on the same side for a seed; the share close to evalFraction; seeds differ', () => {
    const keys = Array.from({ length: 4000 }, (_, i) => `conv-${i}`);
    const sides = keys.map((k) => splitOf(k, 0.2, ''));
    expect(keys.map((k) => splitOf(k, 0.2, ''))).to.deep.equal(sides);
    const share = sides.filter((s) => s === 'eval').length / keys.length;
    expect(share).to.be.within(0.17, 0.23);
    const other = keys.map((k) => splitOf(k, 0.2, 'seed-2'));
    expect(other).to.not.deep.equal(sides);
  });

  it('redaction: what the current policy redacts or blocks is masked in every text of a line, ids kept', () => {
    const email = 'ana.silva@example.com';
    const line = {
      messages: [
        { role: 'user', content: `mail ${email}` },
        {
          role: 'assistant',
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'send', arguments: JSON.stringify({ to: email }) } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: `sent to ${email}` },
        { role: 'assistant', content: 'done' },
      ],
    };
    expect(lineRedactor(parsePolicy({ version: 1 })), 'a policy that only flags masks nothing').to.equal(null);
    const redact = lineRedactor(parsePolicy({ version: 2, actions: { email: 'redact' } }))!;
    const out = redact(structuredClone(line));
    expect(JSON.stringify(out)).to.not.include(email);
    expect(JSON.stringify(out)).to.include('[REDACTED:email]');
    expect((out.messages as Array<Record<string, unknown>>)[2]!.tool_call_id).to.equal('c1');
    expect(line.messages[0]!.content, 'the input is not changed').to.include(email);
  });
});
