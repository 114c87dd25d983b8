// A fake OpenAI Chat Completions API on loopback (the provider's cloud cannot run here; test/support/fake-responses.ts
// fakes the Responses API). POST /v1/chat/completions answers JSON, or SSE chunks ending in `data: [DONE]` with a
// usage chunk when `stream_options.include_usage` is set. Behaviour by `metadata.fake`:
//   (none)  a normal answer         'tool'  a tool call (finish_reason tool_calls)
//   '429'   rate limited, retry-after 7      'cut'  a few chunks, then the connection is destroyed
import { randomBytes } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';

export interface FakeChat {
  url: string;
  requests: Array<{ path: string; body: any }>;
  close(): Promise<void>;
}

const id = (prefix: string) => `${prefix}-${randomBytes(10).toString('hex')}`;

/** The text of the last user message, the way the fake "reads" it. */
function said(body: any): string {
  const users = (Array.isArray(body.messages) ? body.messages : []).filter((m: any) => m.role === 'user');
  const last = users.at(-1)?.content;
  return (typeof last === 'string' ? last : Array.isArray(last) ? last.map((p: any) => p.text ?? '').join(' ') : '')
    .slice(0, 60)
    .trim();
}

export function fakeChatAnswer(body: any): string[] {
  return `Hi from the fake chat model. You said: "${said(body)}".`.split(/(?= )/);
}

function usage(body: any, text: string) {
  const prompt = (Array.isArray(body.messages) ? body.messages : []).length * 4 + said(body).split(/\s+/).length;
  const completion = text.split(/\s+/).filter(Boolean).length;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0 },
  };
}

const TOOL_CALL = {
  id: 'call_fake_1',
  type: 'function',
  function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
};

export async function startFakeChat(): Promise<FakeChat> {
  const requests: FakeChat['requests'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: any = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        /* kept empty */
      }
      requests.push({ path: req.url ?? '', body });
      if (req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error', code: null } }));
        return;
      }
      answer(body, res);
    });
  });

  function answer(body: any, res: ServerResponse): void {
    const mode = body.metadata?.fake;
    const headers = { 'x-request-id': id('req') };
    if (mode === '429') {
      res.writeHead(429, { ...headers, 'content-type': 'application/json', 'retry-after': '7' });
      res.end(
        JSON.stringify({
          error: {
            message: 'Rate limit reached for requests',
            type: 'requests',
            param: null,
            code: 'rate_limit_exceeded',
          },
        }),
      );
      return;
    }
    const completionId = id('chatcmpl');
    const deltas = fakeChatAnswer(body);
    const text = deltas.join('');
    const created = Math.floor(Date.now() / 1000);
    const tool = mode === 'tool';
    if (body.stream !== true) {
      res.writeHead(200, { ...headers, 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: completionId,
          object: 'chat.completion',
          created,
          model: body.model,
          choices: [
            {
              index: 0,
              message: tool
                ? { role: 'assistant', content: null, tool_calls: [TOOL_CALL], refusal: null }
                : { role: 'assistant', content: text, refusal: null },
              finish_reason: tool ? 'tool_calls' : 'stop',
              logprobs: null,
            },
          ],
          usage: usage(body, tool ? '' : text),
          system_fingerprint: 'fp_fake',
        }),
      );
      return;
    }
    res.writeHead(200, { ...headers, 'content-type': 'text/event-stream' });
    const chunk = (delta: any, finish: string | null, extra: any = {}) =>
      `data: ${JSON.stringify({
        id: completionId,
        object: 'chat.completion.chunk',
        created,
        model: body.model,
        choices: delta === null ? [] : [{ index: 0, delta, finish_reason: finish, logprobs: null }],
        ...extra,
      })}\n\n`;
    res.write(chunk({ role: 'assistant', content: '' }, null));
    if (tool) {
      res.write(
        chunk({ tool_calls: [{ index: 0, ...TOOL_CALL, function: { ...TOOL_CALL.function, arguments: '' } }] }, null),
      );
      res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: TOOL_CALL.function.arguments } }] }, null));
    } else {
      for (const [i, d] of deltas.entries()) {
        if (i === 3 && mode === 'cut') {
          res.destroy();
          return;
        }
        res.write(chunk({ content: d }, null));
      }
    }
    res.write(chunk({}, tool ? 'tool_calls' : 'stop'));
    if (body.stream_options?.include_usage) res.write(chunk(null, null, { usage: usage(body, tool ? '' : text) }));
    res.end('data: [DONE]\n\n');
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
