// The local model test infrastructure, checked with the official clients: the node-llama-cpp shim with the `ollama`
// npm client (Ollama's protocol) and the real llama-server with the `openai` npm client (OpenAI's). Both serve the
// tiny deterministic model, so answers, token counts, stream chunks and finish reasons are exact. Also pins what
// each server answers for an unknown model and a garbage body: tracegate's route maps those (local-run.test.ts).
import { expect } from 'chai';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import {
  type ModelServer,
  startLlamaServer,
  startShim,
  TINY_COMPLETION_TOKENS,
  TINY_MODEL,
  TINY_REPLY,
  TINY_REPLY_DELTAS,
} from '../support/local-model/servers.ts';

const history = [
  { role: 'system' as const, content: 'You are terse.' },
  { role: 'user' as const, content: 'Bonjour, ça va ? 你好 🎉' },
  { role: 'assistant' as const, content: TINY_REPLY },
  { role: 'user' as const, content: 'Encore une fois — Ünïcödé!' },
];
const hi = [{ role: 'user' as const, content: 'Hi!' }];

async function postRaw(url: string, body: string): Promise<number> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  await res.arrayBuffer();
  return res.status;
}

describe('local model servers (test infrastructure)', function () {
  this.timeout(120_000);

  describe('node-llama-cpp shim, Ollama protocol, official ollama client', () => {
    let shim: ModelServer;
    let ollama: Ollama;
    before(async () => {
      shim = await startShim();
      ollama = new Ollama({ host: shim.url });
    });
    after(() => shim?.stop());

    it('chat answers the exact reply, 7 completion tokens, done_reason stop', async () => {
      const r = await ollama.chat({ model: TINY_MODEL, messages: hi });
      expect(r.message).to.deep.include({ role: 'assistant', content: TINY_REPLY });
      expect([r.done, r.done_reason, r.eval_count]).to.deep.equal([true, 'stop', TINY_COMPLETION_TOKENS]);
      expect(r.prompt_eval_count).to.be.greaterThan(0);
    });

    it('streamed chat yields one delta per reply token, then the counts', async () => {
      const parts: string[] = [];
      let last: Awaited<ReturnType<typeof ollama.chat>> | undefined;
      for await (const c of await ollama.chat({ model: TINY_MODEL, messages: hi, stream: true })) {
        if (!c.done) parts.push(c.message.content);
        last = c;
      }
      expect(parts).to.deep.equal(TINY_REPLY_DELTAS);
      expect([last?.done, last?.done_reason, last?.eval_count]).to.deep.equal([true, 'stop', TINY_COMPLETION_TOKENS]);
    });

    it('num_predict 3 stops early with done_reason length; system, history and non-ASCII input work', async () => {
      const short = await ollama.chat({ model: TINY_MODEL, messages: hi, options: { num_predict: 3 } });
      expect([short.message.content, short.done_reason, short.eval_count]).to.deep.equal([
        'Hello from the',
        'length',
        3,
      ]);
      expect((await ollama.chat({ model: TINY_MODEL, messages: history })).message.content).to.equal(TINY_REPLY);
    });

    it('list names the model; an unknown model is a 404, a garbage body a 400', async () => {
      const list = await ollama.list();
      expect(list.models.map((m) => m.name)).to.deep.equal([`${TINY_MODEL}:latest`]);
      const err = await ollama.chat({ model: 'no-such-model', messages: hi }).catch((e: unknown) => e);
      expect(err).to.have.property('status_code', 404);
      expect(await postRaw(`${shim.url}/api/chat`, 'this is {not json')).to.equal(400);
    });
  });

  describe('llama-server (built from the llama.cpp source node-llama-cpp ships), official openai client', () => {
    let server: ModelServer;
    let client: OpenAI;
    before(async function () {
      this.timeout(31 * 60_000); // a fresh machine waits for the build make test started
      server = await startLlamaServer();
      client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    });
    after(() => server?.stop());

    it('chat completion: exact reply, finish_reason stop, 7 completion tokens; max_tokens 3 → length', async () => {
      const r = await client.chat.completions.create({ model: TINY_MODEL, messages: hi });
      expect([r.choices[0]!.message.content, r.choices[0]!.finish_reason, r.usage?.completion_tokens]).to.deep.equal([
        TINY_REPLY,
        'stop',
        TINY_COMPLETION_TOKENS,
      ]);
      const s = await client.chat.completions.create({ model: TINY_MODEL, messages: hi, max_tokens: 3 });
      expect([s.choices[0]!.message.content, s.choices[0]!.finish_reason]).to.deep.equal(['Hello from the', 'length']);
    });

    it('streamed: one delta per reply token, finish_reason stop, usage with include_usage', async () => {
      const parts: string[] = [];
      let finish: string | null = null;
      let completion: number | undefined;
      const stream = await client.chat.completions.create({
        model: TINY_MODEL,
        messages: history,
        stream: true,
        stream_options: { include_usage: true },
      });
      for await (const c of stream) {
        if (c.choices[0]?.delta?.content) parts.push(c.choices[0].delta.content);
        if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
        if (c.usage) completion = c.usage.completion_tokens;
      }
      expect(parts).to.deep.equal(TINY_REPLY_DELTAS);
      expect([finish, completion]).to.deep.equal(['stop', TINY_COMPLETION_TOKENS]);
    });

    it('lists the model under its alias; ignores an unknown model name; a garbage body is a 500', async () => {
      expect((await client.models.list()).data.map((m) => m.id)).to.deep.equal([TINY_MODEL]);
      const r = await client.chat.completions.create({ model: 'no-such-model', messages: hi });
      expect(r.choices[0]!.message.content).to.equal(TINY_REPLY);
      expect(await postRaw(`${server.url}/v1/chat/completions`, 'this is {not json')).to.equal(500);
    });
  });
});
