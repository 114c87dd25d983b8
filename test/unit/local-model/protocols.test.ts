// Reading a local model server's streamed answer strictly, byte chunks as they may arrive (split anywhere, a UTF-8
// character across two chunks): Ollama's NDJSON and OpenAI's server-sent events, and what each refuses.
import { expect } from 'chai';
import { TracegateError } from '../../../core/errors.ts';
import { LineSplitter } from '../../../collector/local-model/lines.ts';
import { ollama } from '../../../collector/local-model/ollama.ts';
import { openai } from '../../../collector/local-model/openai.ts';
import { errorText, type Protocol } from '../../../collector/local-model/protocol.ts';

const enc = new TextEncoder();

/** The answer's bytes cut into chunks of `size` bytes: every split point the network could make. */
function read(p: Protocol, text: string, size = 1, maxLine = 1 << 20) {
  const parser = p.answer(maxLine);
  const bytes = enc.encode(text);
  const deltas: string[] = [];
  for (let i = 0; i < bytes.length && !parser.finished; i += size)
    deltas.push(...parser.push(bytes.subarray(i, i + size)));
  if (!parser.finished) deltas.push(...parser.end());
  return { deltas, summary: parser.summary() };
}

function refused(fn: () => unknown): TracegateError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(TracegateError);
    return err as TracegateError;
  }
  throw new Error('expected a refusal');
}

const ndjson = (...lines: object[]) => lines.map((l) => `${JSON.stringify(l)}\n`).join('');
const sse = (...events: (object | string)[]) =>
  events.map((e) => `data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`).join('');

describe('local model answers: lines', () => {
  it('splits on LF and CRLF, holds a character cut between chunks, keeps a last line without its end', () => {
    const s = new LineSplitter(100);
    const bytes = enc.encode('a\r\nbé\n€c');
    const lines: string[] = [];
    for (const b of bytes) lines.push(...s.push(new Uint8Array([b])));
    expect(lines).to.deep.equal(['a', 'bé']);
    expect(s.end()).to.deep.equal(['€c']);
  });

  it('refuses bytes that are not UTF-8, and a line past the bound', () => {
    expect(refused(() => new LineSplitter(100).push(new Uint8Array([0x61, 0xff, 0x0a]))).code).to.equal(
      'local_model_bad_response',
    );
    const cut = new LineSplitter(100);
    cut.push(new Uint8Array([0xe2, 0x82]));
    expect(refused(() => cut.end()).message).to.match(/UTF-8/);
    expect(refused(() => new LineSplitter(10).push(enc.encode('x'.repeat(11)))).message).to.match(/longer than 10/);
  });
});

describe('local model answers: Ollama /api/chat NDJSON', () => {
  const model = 'llama3.2';
  const chunk = (content: string) => ({ model, message: { role: 'assistant', content }, done: false });
  const last = {
    model,
    message: { role: 'assistant', content: '' },
    done: true,
    done_reason: 'stop',
    prompt_eval_count: 5,
    eval_count: 7,
  };
  const good = ndjson(chunk('Héllo'), chunk(' wörld 🎉'), last);

  it('yields each piece of text, then the counts and reason of the last line, whatever the chunking', () => {
    for (const size of [1, 2, 3, 7, 64, 4096]) {
      const r = read(ollama, good, size);
      expect(r.deltas.join('')).to.equal('Héllo wörld 🎉');
      expect(r.summary).to.deep.equal({ model, promptTokens: 5, completionTokens: 7, finishReason: 'stop' });
    }
    expect(read(ollama, good, 4096).deltas).to.deep.equal(['Héllo', ' wörld 🎉']);
  });

  it('a last line without counts or reason: zero tokens, stop', () => {
    const r = read(ollama, ndjson(chunk('x'), { model, done: true }));
    expect(r.summary).to.deep.equal({ model, promptTokens: 0, completionTokens: 0, finishReason: 'stop' });
  });

  it('an error line is the server reporting an error; anything off protocol is a bad answer', () => {
    const e = refused(() => read(ollama, ndjson(chunk('x'), { error: 'model "x" not found' })));
    expect([e.kind, e.code]).to.deep.equal(['upstream_failed', 'local_model_error']);
    expect(e.message).to.include('model "x" not found');
    const bad = (text: string) => refused(() => read(ollama, text)).code;
    expect(bad('<html>502 Bad Gateway</html>\n')).to.equal('local_model_bad_response');
    expect(bad('[1,2]\n')).to.equal('local_model_bad_response');
    expect(bad(ndjson({ model, message: { content: 'x' } }))).to.equal('local_model_bad_response'); // no done
    expect(bad(ndjson({ model, done: false }))).to.equal('local_model_bad_response'); // no message
    expect(bad(ndjson({ model, message: { content: 42 }, done: false }))).to.equal('local_model_bad_response');
    expect(bad(ndjson({ ...last, eval_count: -1 }))).to.equal('local_model_bad_response');
    expect(bad(ndjson({ ...last, eval_count: 1.5 }))).to.equal('local_model_bad_response');
    expect(refused(() => read(ollama, ndjson(chunk('cut'), chunk(' short')))).message).to.match(/ended before/);
    expect(refused(() => read(ollama, '')).message).to.match(/ended before/);
  });

  it('stops reading at the last line (done: true)', () => {
    const r = read(ollama, `${good}garbage after the end\n`, 4096);
    expect(r.deltas.join('')).to.equal('Héllo wörld 🎉');
  });

  it('asks for a streamed chat, with the generation options Ollama names', () => {
    const messages = [{ role: 'user' as const, content: 'Hi' }];
    expect(ollama.chatBody({ model, messages })).to.deep.equal({ model, messages, stream: true });
    expect(ollama.chatBody({ model, messages, maxTokens: 3, temperature: 0 })).to.deep.equal({
      model,
      messages,
      stream: true,
      options: { num_predict: 3, temperature: 0 },
    });
  });

  it('lists models from /api/tags; refuses another shape', () => {
    expect(ollama.models({ models: [{ name: 'a:latest', size: 3, modified_at: 'T' }, { name: 'b' }] })).to.deep.equal([
      { id: 'a:latest', sizeBytes: 3, modifiedAt: 'T' },
      { id: 'b' },
    ]);
    expect(refused(() => ollama.models({ data: [] })).code).to.equal('local_model_bad_response');
    expect(refused(() => ollama.models({ models: [{ size: 1 }] })).code).to.equal('local_model_bad_response');
  });
});

describe('local model answers: OpenAI /v1/chat/completions server-sent events', () => {
  const model = 'tracegate-tiny';
  const chunk = (content: string | null, finish: string | null = null) => ({
    object: 'chat.completion.chunk',
    model,
    choices: [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish }],
  });
  const usage = {
    object: 'chat.completion.chunk',
    model,
    choices: [],
    usage: { prompt_tokens: 9, completion_tokens: 7 },
  };
  const good = `: comment\nevent: ignored\n${sse({ ...chunk(''), choices: [{ index: 0, delta: { role: 'assistant', content: null } }] }, chunk('Héllo'), chunk(' 🎉'), chunk(null, 'stop'), usage, '[DONE]')}`;

  it('yields each piece of text, the finish reason and the usage chunk, whatever the chunking', () => {
    for (const size of [1, 2, 5, 4096]) {
      const r = read(openai, good, size);
      expect(r.deltas.join('')).to.equal('Héllo 🎉');
      expect(r.summary).to.deep.equal({ model, promptTokens: 9, completionTokens: 7, finishReason: 'stop' });
    }
  });

  it('reads CRLF events and data split over several lines', () => {
    const text = `data: {"model":"m","choices":[{"index":0,"delta":{"content":"a"},\r\ndata: "finish_reason":"length"}]}\r\n\r\ndata: [DONE]\r\n\r\n`;
    const r = read(openai, text);
    expect(r.deltas).to.deep.equal(['a']);
    expect(r.summary.finishReason).to.equal('length');
  });

  it('a stream that ends after its finishing chunk without [DONE] is whole; one cut before it is not', () => {
    expect(read(openai, sse(chunk('a'), chunk(null, 'stop'))).summary.finishReason).to.equal('stop');
    expect(refused(() => read(openai, sse(chunk('a')))).message).to.match(/ended before it finished/);
  });

  it('an error event is the server reporting an error; anything off protocol is a bad answer', () => {
    const e = refused(() => read(openai, sse(chunk('a'), { error: { message: 'context too long', type: 'x' } })));
    expect([e.code, e.message.includes('context too long')]).to.deep.equal(['local_model_error', true]);
    const bad = (text: string) => refused(() => read(openai, text)).code;
    expect(bad('data: not json\n\n')).to.equal('local_model_bad_response');
    expect(bad(sse({ model }))).to.equal('local_model_bad_response'); // no choices
    expect(bad(sse({ choices: [{ delta: { content: 5 } }] }))).to.equal('local_model_bad_response');
    expect(bad(sse({ choices: [{ delta: 'x' }] }))).to.equal('local_model_bad_response');
    expect(bad(sse({ choices: [], usage: { prompt_tokens: 'many' } }))).to.equal('local_model_bad_response');
    expect(bad(sse({ choices: [{ finish_reason: 3 }] }))).to.equal('local_model_bad_response');
  });

  it('asks for a streamed chat with the usage, and the generation options OpenAI names', () => {
    const messages = [{ role: 'user' as const, content: 'Hi' }];
    expect(openai.chatBody({ model, messages, maxTokens: 3, temperature: 0.5 })).to.deep.equal({
      model,
      messages,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 3,
      temperature: 0.5,
    });
  });

  it('lists models from /v1/models', () => {
    expect(openai.models({ object: 'list', data: [{ id: 'a', object: 'model' }] })).to.deep.equal([{ id: 'a' }]);
    expect(refused(() => openai.models({ models: [] })).code).to.equal('local_model_bad_response');
  });

  it("reads an error answer's message in either protocol's shape, or its text", () => {
    expect(errorText('{"error":"model not found"}')).to.equal('model not found');
    expect(errorText('{"error":{"message":"bad request","type":"x"}}')).to.equal('bad request');
    expect(errorText('Internal Server Error')).to.equal('Internal Server Error');
    expect(errorText('')).to.equal('(no message)');
  });
});
