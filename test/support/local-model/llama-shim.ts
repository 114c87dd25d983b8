// A small HTTP server around node-llama-cpp (real llama.cpp inference, prebuilt, CPU only) that speaks Ollama's
// /api/chat, /api/generate, /api/tags (JSON or NDJSON streaming) and OpenAI's /v1/chat/completions (JSON or SSE)
// and /v1/models. For tests: one model, one sequence, requests served one at a time. node-llama-cpp is this
// folder's own dependency (package.json here; `npm ci --prefix test/support/local-model`), so this file is type-checked
// with this folder's tsconfig.json, not the root one. servers.ts starts it.
//
//   node test/support/local-model/llama-shim.ts --model tiny.gguf [--port 0] [--host 127.0.0.1] [--name tracegate-tiny]
// prints "llama-shim ready http://HOST:PORT model=NAME" on stdout once it listens (port 0 picks a free port).
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { type ChatHistoryItem, getLlama, resolveChatWrapper, type Token } from 'node-llama-cpp';

const { values: opt } = parseArgs({
  options: {
    model: { type: 'string', default: '' },
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    name: { type: 'string', default: 'tracegate-tiny' },
  },
});
if (!opt.model) throw new Error('usage: node llama-shim.ts --model FILE.gguf [--port N] [--host H] [--name NAME]');
const llama = await getLlama({ gpu: false, build: 'never', progressLogs: false });
const model = await llama.loadModel({ modelPath: opt.model, gpuLayers: 0 });
const sequence = (await model.createContext({ contextSize: 2048, threads: 1, sequences: 1 })).getSequence();
const chatWrapper = resolveChatWrapper(model); // once: building a Jinja wrapper costs ~0.7 s
const tag = `${opt.name}:latest`;
const tags = {
  models: [
    {
      name: tag,
      model: tag,
      size: statSync(opt.model).size,
      modified_at: statSync(opt.model).mtime,
      digest: createHash('sha256').update(readFileSync(opt.model)).digest('hex'),
      details: { format: 'gguf', family: 'llama' },
    },
  ],
};

type Body = Record<string, any>;

// Chat messages (OpenAI or Ollama shape) -> the model's chat template -> tokens.
function chatTokens(messages: { role: string; content: unknown }[]): Token[] {
  const text = (c: unknown): string => (Array.isArray(c) ? c.map((p) => p?.text ?? '').join('') : String(c ?? ''));
  const history = messages.map((m): ChatHistoryItem => {
    if (m.role === 'system') return { type: 'system', text: text(m.content) };
    if (m.role === 'assistant') return { type: 'model', response: [text(m.content)] };
    return { type: 'user', text: text(m.content) };
  });
  history.push({ type: 'model', response: [] });
  return chatWrapper.generateContextState({ chatHistory: history }).contextText.tokenize(model.tokenizer);
}

// Greedy generation until EOS, maxTokens (<= 0: no limit) or the client going away; onText gets each new piece of
// text. evalCount counts the sampled tokens, the EOS included, as llama-server does.
let queue: Promise<unknown> = Promise.resolve();
function generate(prompt: Token[], maxTokens: number, onText: (delta: string) => unknown, gone: () => boolean) {
  const run = queue.then(async () => {
    const start = performance.now();
    const out: Token[] = [];
    let firstToken = start;
    let text = '';
    let evalCount = 0;
    let doneReason: 'stop' | 'length' = 'length';
    await sequence.clearHistory();
    for await (const token of sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
      if (evalCount++ === 0) firstToken = performance.now();
      if (model.isEogToken(token)) {
        doneReason = 'stop';
        break;
      }
      out.push(token);
      const full = model.detokenize(out);
      if (!full.endsWith('\uFFFD')) {
        // (holds back a UTF-8 character split across tokens)
        onText(full.slice(text.length));
        text = full;
      }
      if ((maxTokens > 0 && out.length >= maxTokens) || gone()) break;
    }
    const ns = (ms: number) => Math.round(ms * 1e6);
    return {
      text,
      doneReason,
      promptTokens: prompt.length,
      evalCount,
      promptNs: ns(firstToken - start),
      evalNs: ns(performance.now() - firstToken),
    };
  });
  queue = run.catch(() => {});
  return run;
}

class HttpError extends Error {
  status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}
async function readJson(req: IncomingMessage): Promise<Body> {
  let raw = '';
  for await (const chunk of req) raw += chunk;
  try {
    const body = JSON.parse(raw);
    if (body && typeof body === 'object' && !Array.isArray(body)) return body;
  } catch {}
  throw new HttpError(400, 'invalid JSON body: expected a JSON object');
}
function check(b: Body, needMessages: boolean) {
  if (typeof b.model !== 'string' || !b.model) throw new HttpError(400, 'model is required');
  if (b.model !== opt.name && b.model !== tag)
    throw new HttpError(404, `model "${b.model}" not found, try pulling it first`);
  if (needMessages && !(Array.isArray(b.messages) && b.messages.length))
    throw new HttpError(400, 'messages must be a non-empty array');
}
const json = (res: ServerResponse, status: number, body: unknown) =>
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

// Ollama: stream unless "stream": false; NDJSON lines, the last one with done: true and the counts.
async function ollama(path: string, b: Body, res: ServerResponse) {
  const isChat = path === '/api/chat';
  check(b, isChat);
  const prompt = isChat
    ? chatTokens(b.messages)
    : b.raw
      ? [...(model.tokens.bos == null ? [] : [model.tokens.bos]), ...model.tokenize(String(b.prompt ?? ''))]
      : chatTokens([...(b.system ? [{ role: 'system', content: b.system }] : []), { role: 'user', content: b.prompt }]);
  const stream = b.stream !== false;
  const line = (text: string, rest: object) => ({
    model: b.model,
    created_at: new Date().toISOString(),
    ...(isChat ? { message: { role: 'assistant', content: text } } : { response: text }),
    ...rest,
  });
  if (stream) res.writeHead(200, { 'content-type': 'application/x-ndjson' });
  const r = await generate(
    prompt,
    Number(b.options?.num_predict ?? -1),
    (t) => stream && res.write(`${JSON.stringify(line(t, { done: false }))}\n`),
    () => res.destroyed,
  );
  const done = line(stream ? '' : r.text, {
    done: true,
    done_reason: r.doneReason,
    total_duration: r.promptNs + r.evalNs,
    load_duration: 0,
    prompt_eval_count: r.promptTokens,
    prompt_eval_duration: r.promptNs,
    eval_count: r.evalCount,
    eval_duration: r.evalNs,
  });
  stream ? res.end(`${JSON.stringify(done)}\n`) : json(res, 200, done);
}

// OpenAI: SSE when "stream": true (a role chunk, one chunk per piece, a finish chunk, a usage chunk on request, [DONE]).
async function openai(b: Body, res: ServerResponse) {
  check(b, true);
  const stream = b.stream === true;
  const base = { id: `chatcmpl-${Date.now().toString(36)}`, created: Math.floor(Date.now() / 1000), model: b.model };
  const chunk = (choices: unknown[], rest = {}) =>
    res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...rest })}\n\n`);
  if (stream) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
  }
  const maxTokens = Number(b.max_completion_tokens ?? b.max_tokens ?? -1);
  const r = await generate(
    chatTokens(b.messages),
    maxTokens,
    (t) => stream && chunk([{ index: 0, delta: { content: t }, finish_reason: null }]),
    () => res.destroyed,
  );
  const usage = {
    prompt_tokens: r.promptTokens,
    completion_tokens: r.evalCount,
    total_tokens: r.promptTokens + r.evalCount,
  };
  if (!stream) {
    const choice = { index: 0, message: { role: 'assistant', content: r.text }, finish_reason: r.doneReason };
    return json(res, 200, { ...base, object: 'chat.completion', choices: [choice], usage });
  }
  chunk([{ index: 0, delta: {}, finish_reason: r.doneReason }]);
  if (b.stream_options?.include_usage) chunk([], { usage });
  res.end('data: [DONE]\n\n');
}

const server = createServer(async (req, res) => {
  const route = `${req.method} ${(req.url ?? '/').split('?')[0]}`;
  try {
    if (route === 'GET /') return res.end('Ollama is running');
    if (route === 'GET /api/tags') return json(res, 200, tags);
    if (route === 'GET /v1/models')
      return json(res, 200, {
        object: 'list',
        data: [{ id: opt.name, object: 'model', created: 0, owned_by: 'tracegate' }],
      });
    if (route === 'POST /api/chat' || route === 'POST /api/generate')
      return await ollama(route.slice(5), await readJson(req), res);
    if (route === 'POST /v1/chat/completions') return await openai(await readJson(req), res);
    throw new HttpError(404, `no route ${route}`);
  } catch (e) {
    const status = e instanceof HttpError ? e.status : 500;
    const message = e instanceof Error ? e.message : String(e);
    if (res.headersSent) return res.end(); // mid-stream: all we can do is close
    const type = status === 404 ? 'not_found_error' : status === 400 ? 'invalid_request_error' : 'api_error';
    json(
      res,
      status,
      route.includes(' /v1/') ? { error: { message, type, param: null, code: null } } : { error: message },
    );
  }
});
server.listen(Number(opt.port), opt.host, () => {
  console.log(`llama-shim ready http://${opt.host}:${(server.address() as AddressInfo).port} model=${opt.name}`);
});
for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => process.exit(0));
