// A fake OpenAI Responses API on loopback: realistic JSON bodies and SSE sequences, error answers, slow and
// broken streams, and a log of what it received. Behaviour is chosen per request by `metadata.fake`:
//   (none)            a normal answer; `metadata.delay_ms` delays each SSE event (and the JSON answer)
//   '429' | '500'     an error answer in the provider's shape (429 with retry-after and x-ratelimit-*)
//   'midstream_error' a few deltas, then an `error` event and response.failed
//   'cut'             a few deltas, then the connection is destroyed
//   'hang'            never answers
//   'incomplete'      status incomplete (max_output_tokens)
//   'tool'            a function_call output item (to the request's first function tool, else get_weather, with
//                     {"city":"Paris"}); once the input holds a function_call_output, the answer quotes that result
//   'cached'          usage with cached and reasoning tokens
// Responses are kept (a streamed one from response.created on): GET/DELETE /v1/responses/{id}, POST /v1/responses/{id}/cancel and
// GET /v1/responses/{id}/input_items answer about them (404 in the provider's shape for unknown ids).
// `stamp: true` in the options adds `t` (performance.now() at send) to every event, for the benchmark.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';

export interface FakeRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  raw: string;
  /** The client (the proxy) went away before the answer was complete. */
  aborted: boolean;
  done: boolean;
}

export interface FakeResponses {
  url: string;
  requests: FakeRequest[];
  /** Resolves when `n` requests have ended (completed or aborted). */
  settled(n: number): Promise<void>;
  close(): Promise<void>;
}

export interface FakeOptions {
  port?: number;
  delayMs?: number;
  stamp?: boolean;
  /** Keep a log of requests (default true; the benchmark turns it off). */
  record?: boolean;
}

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;
const words = (s: string) => s.split(/\s+/).filter(Boolean).length;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The text of a request's input, the way the fake "reads" it. */
function inputText(body: any): string {
  if (typeof body.input === 'string') return body.input;
  if (!Array.isArray(body.input)) return '';
  return body.input
    .map((i: any) =>
      typeof i.content === 'string'
        ? i.content
        : Array.isArray(i.content)
          ? i.content.map((c: any) => c.text ?? '').join(' ')
          : '',
    )
    .join(' ');
}

/** A deterministic answer, in deltas of one word each (with the leading space, as the real API does). */
export function fakeAnswer(body: any): string[] {
  const said = inputText(body).slice(0, 60).trim();
  const text = `Hello from the fake model. You said: "${said}". Have a nice day!`;
  return text.split(/(?= )/);
}

function usage(body: any, outputText: string) {
  const input = words(inputText(body)) + words(typeof body.instructions === 'string' ? body.instructions : '') + 5;
  const output = words(outputText);
  const cached = body.metadata?.fake === 'cached' ? Math.floor(input / 2) : 0;
  const reasoning = body.metadata?.fake === 'cached' ? 7 : 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output + reasoning,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output + reasoning,
  };
}

function responseObject(
  body: any,
  respId: string,
  status: string,
  output: unknown[],
  usageObj: unknown,
  extra: Record<string, unknown> = {},
) {
  return {
    id: respId,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: body.model,
    output,
    parallel_tool_calls: true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: body.temperature ?? 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: body.tools ?? [],
    top_p: 1,
    truncation: 'disabled',
    usage: usageObj,
    user: null,
    metadata: body.metadata ?? {},
    ...extra,
  };
}

function message(msgId: string, text: string, status = 'completed') {
  return {
    type: 'message',
    id: msgId,
    status,
    role: 'assistant',
    content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
  };
}

function commonHeaders(): Record<string, string> {
  return {
    'x-request-id': id('req'),
    'openai-processing-ms': '187',
    'openai-version': '2020-10-01',
    'x-ratelimit-limit-requests': '10000',
    'x-ratelimit-remaining-requests': '9999',
    'x-ratelimit-reset-requests': '6ms',
    'x-ratelimit-limit-tokens': '2000000',
    'x-ratelimit-remaining-tokens': '1999900',
    'x-ratelimit-reset-tokens': '3ms',
    'set-cookie': '__cf_bm=should-not-pass; path=/',
    'openai-organization': 'org-secret-name',
  };
}

function errorBody(message: string, type: string, code: string | null) {
  return JSON.stringify({ error: { message, type, param: null, code } });
}

/** The output of the last function_call_output item of the input (a tool-call turn answered), else null. */
function toolResult(body: any): string | null {
  if (!Array.isArray(body.input)) return null;
  const out = body.input.filter((i: any) => i?.type === 'function_call_output').at(-1);
  if (!out) return null;
  return typeof out.output === 'string' ? out.output : JSON.stringify(out.output);
}

function finalResponse(body: any, respId: string, msgId: string, text: string) {
  const mode = body.metadata?.fake;
  if (mode === 'tool') {
    const result = toolResult(body);
    if (result !== null) {
      const answer = `The tool said: ${result}`;
      return responseObject(body, respId, 'completed', [message(msgId, answer)], usage(body, answer));
    }
    const tool = Array.isArray(body.tools) ? body.tools.find((t: any) => t?.type === 'function') : undefined;
    const call = {
      type: 'function_call',
      id: id('fc'),
      call_id: id('call'),
      name: typeof tool?.name === 'string' ? tool.name : 'get_weather',
      arguments: '{"city":"Paris"}',
      status: 'completed',
    };
    return responseObject(body, respId, 'completed', [call], usage(body, 'x x x'));
  }
  if (mode === 'incomplete') {
    return responseObject(body, respId, 'incomplete', [message(msgId, text, 'incomplete')], usage(body, text), {
      incomplete_details: { reason: 'max_output_tokens' },
    });
  }
  return responseObject(body, respId, 'completed', [message(msgId, text)], usage(body, text));
}

export async function startFakeResponses(opts: FakeOptions = {}): Promise<FakeResponses> {
  const requests: FakeRequest[] = [];
  const waiters: Array<() => void> = [];
  const notify = () => {
    for (const w of waiters.splice(0)) w();
  };

  const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any = {};
      try {
        body = JSON.parse(raw);
      } catch {
        /* recorded as is */
      }
      const rec: FakeRequest = { path: req.url ?? '', headers: req.headers, body, raw, aborted: false, done: false };
      if (opts.record !== false) requests.push(rec);
      res.on('close', () => {
        if (!res.writableFinished) rec.aborted = true;
        rec.done = true;
        notify();
      });
      const key = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      if (key.startsWith('sk-rejected')) {
        // as the provider answers a wrong key: quoting part of it
        res.writeHead(401, { ...commonHeaders(), 'content-type': 'application/json' });
        res.end(
          errorBody(
            `Incorrect API key provided: ${key.slice(0, 3)}********${key.slice(-4)}. You can find your API key at https://platform.openai.com/account/api-keys.`,
            'invalid_request_error',
            'invalid_api_key',
          ),
        );
        return;
      }
      const m = /^\/v1\/responses\/([^/?]+)(\/[a-z_]+)?(\?.*)?$/.exec(req.url ?? '');
      if (m) {
        stored(req.method ?? '', m[1]!, m[2] ?? '', res);
        return;
      }
      void answer(body, res).catch(() => res.destroy());
    });
  });

  const kept = new Map<string, { response: any; input: any }>();
  function stored(method: string, respId: string, sub: string, res: ServerResponse): void {
    const hit = kept.get(respId);
    const json = (status: number, v: unknown) => {
      res.writeHead(status, { ...commonHeaders(), 'content-type': 'application/json' });
      res.end(typeof v === 'string' ? v : JSON.stringify(v));
    };
    if (!hit) return json(404, errorBody(`Response with id '${respId}' not found.`, 'invalid_request_error', null));
    if (method === 'GET' && sub === '') return json(200, hit.response);
    if (method === 'DELETE' && sub === '') {
      kept.delete(respId);
      return json(200, { id: respId, object: 'response', deleted: true });
    }
    if (method === 'POST' && sub === '/cancel') return json(200, { ...hit.response, status: 'cancelled' });
    if (method === 'GET' && sub === '/input_items') {
      const items =
        typeof hit.input === 'string'
          ? [
              {
                id: id('msg'),
                type: 'message',
                role: 'user',
                status: 'completed',
                content: [{ type: 'input_text', text: hit.input }],
              },
            ]
          : (hit.input ?? []);
      return json(200, {
        object: 'list',
        data: items,
        first_id: items[0]?.id ?? null,
        last_id: items.at(-1)?.id ?? null,
        has_more: false,
      });
    }
    json(404, errorBody('Not found', 'invalid_request_error', null));
  }

  async function answer(body: any, res: ServerResponse): Promise<void> {
    const mode = body.metadata?.fake;
    const delay = Number(body.metadata?.delay_ms ?? opts.delayMs ?? 0);
    if (mode === 'hang') return;
    if (mode === '429') {
      res.writeHead(429, {
        ...commonHeaders(),
        'content-type': 'application/json',
        'retry-after': '7',
        'x-ratelimit-remaining-requests': '0',
      });
      res.end(
        errorBody(
          'Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3, Used 3, Requested 1.',
          'requests',
          'rate_limit_exceeded',
        ),
      );
      return;
    }
    if (mode === '500') {
      res.writeHead(500, { ...commonHeaders(), 'content-type': 'application/json' });
      res.end(
        errorBody('The server had an error while processing your request. Sorry about that!', 'server_error', null),
      );
      return;
    }
    const respId = id('resp');
    const msgId = id('msg');
    const deltas = fakeAnswer(body);
    const text = deltas.join('');
    if (body.stream !== true) {
      if (delay) await sleep(delay);
      const final = finalResponse(body, respId, msgId, text);
      if (opts.record !== false) kept.set(respId, { response: final, input: body.input });
      res.writeHead(200, { ...commonHeaders(), 'content-type': 'application/json' });
      res.end(JSON.stringify(final));
      return;
    }

    res.writeHead(200, {
      ...commonHeaders(),
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
    });
    res.flushHeaders();
    let seq = 0;
    const send = async (type: string, data: Record<string, unknown>) => {
      if (delay) await sleep(delay);
      if (res.destroyed) throw new Error('client gone');
      const ev = { type, sequence_number: seq++, ...data, ...(opts.stamp ? { t: performance.now() } : {}) };
      res.write(`event: ${type}\ndata: ${JSON.stringify(ev)}\n\n`);
    };
    const inProgress = responseObject(body, respId, 'in_progress', [], null);
    // Retrievable (and cancellable) from response.created on, as a background response is at the provider.
    if (opts.record !== false) kept.set(respId, { response: inProgress, input: body.input });
    await send('response.created', { response: inProgress });
    await send('response.in_progress', { response: inProgress });
    await send('response.output_item.added', {
      output_index: 0,
      item: { ...message(msgId, '', 'in_progress'), content: [] },
    });
    await send('response.content_part.added', {
      item_id: msgId,
      output_index: 0,
      content_index: 0,
      part: { type: 'output_text', text: '', annotations: [] },
    });
    for (const [i, d] of deltas.entries()) {
      if (i === 3 && mode === 'cut') {
        res.destroy();
        return;
      }
      if (i === 3 && mode === 'midstream_error') {
        await send('error', { code: 'server_error', message: 'The model failed mid-generation.', param: null });
        const failed = responseObject(body, respId, 'failed', [], null, {
          error: { code: 'server_error', message: 'The model failed mid-generation.' },
        });
        await send('response.failed', { response: failed });
        res.end();
        return;
      }
      await send('response.output_text.delta', {
        item_id: msgId,
        output_index: 0,
        content_index: 0,
        delta: d,
        logprobs: [],
      });
    }
    await send('response.output_text.done', { item_id: msgId, output_index: 0, content_index: 0, text, logprobs: [] });
    await send('response.content_part.done', {
      item_id: msgId,
      output_index: 0,
      content_index: 0,
      part: { type: 'output_text', text, annotations: [] },
    });
    const final = finalResponse(body, respId, msgId, text);
    if (opts.record !== false) kept.set(respId, { response: final, input: body.input }); // streamed responses are stored too
    await send('response.output_item.done', { output_index: 0, item: (final.output as unknown[])[0] });
    await send(final.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: final });
    if (mode === 'linger') await sleep(1500); // the connection stays open after the terminal event
    res.end();
  }

  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    settled: async (n) => {
      while (requests.filter((r) => r.done).length < n) await new Promise<void>((r) => waiters.push(r));
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
