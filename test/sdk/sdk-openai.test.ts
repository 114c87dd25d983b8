// wrapOpenAI with the real `openai` client: directly to the fake providers (Responses and Chat Completions, JSON and
// streamed) and through tracegate's proxy to the fake Responses provider. The application must get exactly what
// the unwrapped client gives, the provider's errors included; the traces land in a running tracegate.
import { expect } from 'chai';
import OpenAI from 'openai';
import { Tracegate, type TracegateError, wrapOpenAI } from '../../packages/sdk/src/index.ts';
import { type FakeResponses, startFakeResponses } from '../support/fake-responses.ts';
import { freePort } from '../support/process.ts';
import { flushed, startTestServer, type TestServer } from '../support/server.ts';
import { type FakeChat, startFakeChat } from './support/fake-chat-completions.ts';
import { countingFetch, listTraces, readTrace } from './support/receiver.ts';

/** A value with its per-call parts (ids, times, request ids) blanked, to compare two calls' answers. */
function shape(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(shape);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v).map(([k, x]) => [
        k,
        /^(id|created|created_at|call_id|item_id|_request_id|sequence_number)$/.test(k) ? '·' : shape(x),
      ]),
    );
  return v;
}

async function drain<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const ev of stream) out.push(ev);
  return out;
}

async function caught(p: Promise<unknown>): Promise<any> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('sdk (TypeScript): wrapOpenAI with the real openai client', function () {
  this.timeout(60_000);
  let s: TestServer;
  let fake: FakeResponses;
  let chat: FakeChat;
  let key: string;
  let tg: Tracegate;
  let errors: TracegateError[];
  const plain = () => new OpenAI({ apiKey: 'sk-test', baseURL: fake.url, maxRetries: 0 });
  const plainChat = () => new OpenAI({ apiKey: 'sk-test', baseURL: chat.url, maxRetries: 0 });
  const stored = async (id: string) => {
    await tg.flush();
    await flushed(s);
    return (await readTrace(s.url, key, id)).spans[0];
  };

  before(async () => {
    fake = await startFakeResponses();
    chat = await startFakeChat();
    s = await startTestServer('duckdb', {
      TRACEGATE_PROVIDER_BASE_URL: fake.url,
      TRACEGATE_PROVIDER_API_KEY: 'sk-fake',
    });
  });
  beforeEach(async () => {
    key = (await s.key()).key;
    errors = [];
    tg = new Tracegate({ apiKey: key, baseUrl: s.url, flushOnExit: false, onError: (e) => errors.push(e) });
  });
  afterEach(async () => {
    await tg.shutdown(1000);
    expect(errors.filter((e) => e.code !== 'already_wrapped')).to.deep.equal([]);
  });
  after(async () => {
    await s.close();
    await fake.close();
    await chat.close();
  });

  it('responses.create (JSON): the same answer as unwrapped, and a trace once it completed', async () => {
    const client = tg.wrapOpenAI(plain(), {
      actionName: 'support_reply',
      environment: 'prod',
      metadata: { team: 'a' },
    });
    const body = {
      model: 'gpt-4o-mini',
      instructions: 'Be brief.',
      input: 'Where is my order?',
      metadata: { ticket: '9' },
    };
    const wrapped = await client.responses.create(body);
    const unwrapped = await plain().responses.create(body);
    expect(shape(wrapped)).to.deep.equal(shape(unwrapped));
    expect(Object.getPrototypeOf(wrapped)).to.equal(Object.getPrototypeOf(unwrapped));
    expect(wrapped.output_text).to.equal(unwrapped.output_text);
    expect(wrapped._request_id).to.match(/^req_/);

    const id = tg.traceIdOf(wrapped)!;
    expect(id).to.match(/^[0-9a-f]{32}$/);
    const span = await stored(id);
    expect(span).to.include({
      source: 'sdk',
      status: 'completed',
      model: 'gpt-4o-mini',
      provider: 'openai',
      prompt: 'system: Be brief.\n\nuser: Where is my order?',
      response: wrapped.output_text,
      promptTokens: wrapped.usage!.input_tokens,
      completionTokens: wrapped.usage!.output_tokens,
      finishReason: 'stop',
      actionName: 'support_reply',
      environment: 'prod',
      trainable: true,
    });
    expect(span.attributes).to.deep.include({
      'gen_ai.operation.name': 'responses',
      'gen_ai.response.id': wrapped.id,
      'gen_ai.request.stream': false,
      metadata: { team: 'a', ticket: '9' },
      parameters: { source: 'sdk' },
    });
  });

  it('responses.create (stream): the same events as unwrapped; the trace is sent when the stream ends', async () => {
    const client = tg.wrapOpenAI(plain());
    const body = {
      model: 'gpt-4o-mini',
      input: 'Stream me a reply',
      stream: true as const,
      metadata: { fake: 'cached' },
    };
    const stream = await client.responses.create(body);
    expect(tg.stats.queued + tg.stats.sent).to.equal(0); // nothing before the stream ended
    const events = await drain(stream);
    const reference = await drain(await plain().responses.create(body));
    expect(shape(events)).to.deep.equal(shape(reference));
    const completed = events.at(-1) as any;
    expect(completed.type).to.equal('response.completed');
    const span = await stored(tg.traceIdOf(stream)!);
    expect(span).to.include({
      status: 'completed',
      response: completed.response.output[0].content[0].text,
      promptTokens: completed.response.usage.input_tokens,
      completionTokens: completed.response.usage.output_tokens,
    });
    expect(span.attributes).to.deep.include({
      'gen_ai.request.stream': true,
      'gen_ai.response.id': completed.response.id,
      'gen_ai.usage.cache_read.input_tokens': completed.response.usage.input_tokens_details.cached_tokens,
      'gen_ai.usage.reasoning.output_tokens': 7,
    });
  });

  it('chat.completions.create (JSON and stream with usage): traced like the Responses calls', async () => {
    const client = tg.wrapOpenAI(plainChat());
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'Hello chat' },
    ];
    const completion = await client.chat.completions.create({ model: 'gpt-4o-mini', messages });
    const reference = await plainChat().chat.completions.create({ model: 'gpt-4o-mini', messages });
    expect(shape(completion)).to.deep.equal(shape(reference));
    const span = await stored(tg.traceIdOf(completion)!);
    expect(span).to.include({
      status: 'completed',
      prompt: 'system: Be brief.\n\nuser: Hello chat',
      response: completion.choices[0]!.message.content,
      promptTokens: completion.usage!.prompt_tokens,
      completionTokens: completion.usage!.completion_tokens,
      finishReason: 'stop',
    });
    expect(span.attributes['gen_ai.operation.name']).to.equal('chat');

    const params = { model: 'gpt-4o-mini', messages, stream: true as const, stream_options: { include_usage: true } };
    const stream = await client.chat.completions.create(params);
    const chunks = await drain(stream);
    expect(shape(chunks)).to.deep.equal(shape(await drain(await plainChat().chat.completions.create(params))));
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    const streamed = await stored(tg.traceIdOf(stream)!);
    expect(streamed).to.include({ status: 'completed', response: text, finishReason: 'stop' });
    expect(streamed.promptTokens).to.equal(chunks.at(-1)!.usage!.prompt_tokens);
  });

  it('tool calls the model asks for are on the trace (finish reason tool_calls, their names and ids)', async () => {
    const client = tg.wrapOpenAI(plainChat());
    const c = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      metadata: { fake: 'tool' },
    });
    const span = await stored(tg.traceIdOf(c)!);
    expect(span.finishReason).to.equal('tool_calls');
    expect(span.attributes['gen_ai.response.tool_calls']).to.deep.equal([
      { name: 'get_weather', call_id: 'call_fake_1' },
    ]);
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      metadata: { fake: 'tool' },
      stream: true,
    });
    await drain(stream);
    const streamed = await stored(tg.traceIdOf(stream)!);
    expect(streamed.attributes['gen_ai.response.tool_calls']).to.deep.equal([
      { name: 'get_weather', call_id: 'call_fake_1' },
    ]);

    const r = await tg
      .wrapOpenAI(plain())
      .responses.create({ model: 'gpt-4o-mini', input: 'Weather?', metadata: { fake: 'tool' } });
    const fromResponses = await stored(tg.traceIdOf(r)!);
    expect(fromResponses.finishReason).to.equal('tool_calls');
    expect(fromResponses.attributes['gen_ai.response.tool_calls']).to.deep.equal([
      { name: 'get_weather', call_id: (r.output[0] as any).call_id },
    ]);
  });

  it("the provider's errors reach the application unchanged, and an error trace is stored", async () => {
    const client = tg.wrapOpenAI(plain());
    const body = { model: 'gpt-4o-mini', input: 'x', metadata: { fake: '429' } };
    const err = await caught(client.responses.create(body));
    const ref = await caught(plain().responses.create(body));
    expect(err).to.be.instanceOf(OpenAI.RateLimitError);
    expect(err.constructor).to.equal(ref.constructor);
    expect([err.status, err.message, err.code, err.type]).to.deep.equal([ref.status, ref.message, ref.code, ref.type]);
    expect(err.headers.get('retry-after')).to.equal('7');
    const span = await stored(tg.traceIdOf(err)!);
    expect(span).to.include({ status: 'error', finishReason: 'rate_limit_exceeded', response: '' });
    expect(span.attributes['http.response.status_code']).to.equal(429);
    expect(span.attributes.error).to.deep.include({ type: 'RateLimitError', code: 'rate_limit_exceeded' });

    const down = `http://127.0.0.1:${await freePort()}/v1`;
    const offline = tg.wrapOpenAI(new OpenAI({ apiKey: 'sk', baseURL: down, maxRetries: 0 }));
    const conn = await caught(
      offline.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
    );
    const connRef = await caught(
      new OpenAI({ apiKey: 'sk', baseURL: down, maxRetries: 0 }).chat.completions.create({ model: 'm', messages: [] }),
    );
    expect(conn).to.be.instanceOf(OpenAI.APIConnectionError);
    expect(conn.constructor).to.equal(connRef.constructor);
    expect((await stored(tg.traceIdOf(conn)!)).status).to.equal('error');
  });

  it('streams that end badly: left early is cancelled, cut is an error the application sees as unwrapped', async () => {
    const client = tg.wrapOpenAI(plain());
    const early = await client.responses.create({ model: 'gpt-4o-mini', input: 'long answer please', stream: true });
    let seen = '';
    for await (const ev of early) {
      if (ev.type === 'response.output_text.delta') {
        seen += ev.delta;
        if (seen.split(' ').length > 3) break;
      }
    }
    const left = await stored(tg.traceIdOf(early)!);
    expect(left).to.include({ status: 'cancelled', finishReason: 'cancelled', response: seen });

    const body = { model: 'gpt-4o-mini', input: 'cut me', stream: true as const, metadata: { fake: 'cut' } };
    const cut = await client.responses.create(body);
    const err = await caught(drain(cut));
    const ref = await caught(drain(await plain().responses.create(body)));
    expect(err.constructor).to.equal(ref.constructor);
    expect(err.message).to.equal(ref.message);
    expect((await stored(tg.traceIdOf(cut)!)).status).to.equal('error');

    const failing = {
      model: 'gpt-4o-mini',
      input: 'fail me',
      stream: true as const,
      metadata: { fake: 'midstream_error' },
    };
    const mid = await client.responses.create(failing);
    const midErr = await caught(drain(mid));
    const midRef = await caught(drain(await plain().responses.create(failing)));
    expect([midErr.constructor, midErr.message]).to.deep.equal([midRef.constructor, midRef.message]);
    const failed = await stored(tg.traceIdOf(mid)!);
    expect(failed).to.include({ status: 'error', finishReason: 'server_error' });
  });

  it("every way of reading an answer works as unwrapped: withResponse, tee, the client's stream and parse helpers", async () => {
    const client = tg.wrapOpenAI(plain());
    const { data, response, request_id } = await client.responses
      .create({ model: 'gpt-4o-mini', input: 'with response' })
      .withResponse();
    expect(response.status).to.equal(200);
    expect(request_id).to.equal(response.headers.get('x-request-id'));
    expect((await stored(tg.traceIdOf(data)!)).response).to.equal(data.output_text);

    const [a, b] = (await client.responses.create({ model: 'gpt-4o-mini', input: 'tee me', stream: true })).tee();
    const [ea, eb] = await Promise.all([drain(a), drain(b)]);
    expect(ea).to.deep.equal(eb);

    const readable = (
      await client.responses.create({ model: 'gpt-4o-mini', input: 'as a readable', stream: true })
    ).toReadableStream();
    let bytes = '';
    for await (const chunk of readable as unknown as AsyncIterable<Uint8Array>)
      bytes += new TextDecoder().decode(chunk);
    expect(bytes).to.contain('"response.completed"');

    const helper = client.responses.stream({ model: 'gpt-4o-mini', input: 'via the stream helper' });
    const final = await helper.finalResponse();
    const parsed = await client.responses.parse({ model: 'gpt-4o-mini', input: 'via parse' });
    const chatHelper = tg.wrapOpenAI(plainChat()).chat.completions.stream({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'via the chat stream helper' }],
    });
    const chatFinal = await chatHelper.finalChatCompletion();
    await tg.flush();
    await flushed(s);
    const responses = (await listTraces(s.url, key)).map((t) => t.traceId);
    const spans = await Promise.all(responses.map(async (id) => (await readTrace(s.url, key, id)).spans[0]));
    const texts = spans.map((x) => x.response);
    expect(texts).to.include.members([final.output_text, parsed.output_text, chatFinal.choices[0]!.message.content]);
    expect(spans.filter((x) => x.prompt === 'tee me')).to.have.length(1); // one trace for both branches
    expect(spans.find((x) => x.prompt === 'as a readable')).to.include({ status: 'completed' });
    expect(spans).to.have.length(6);
  });

  it('asResponse() leaves the raw body to the application (that call is not traced)', async () => {
    const client = tg.wrapOpenAI(plain());
    const raw = await client.responses.create({ model: 'gpt-4o-mini', input: 'raw' }).asResponse();
    const body = (await raw.json()) as any;
    expect(body.object).to.equal('response');
    await tg.flush();
    expect(tg.stats.sent).to.equal(0);
  });

  it('wrapping twice does nothing more (reported); wrapOpenAI(client) alone takes the client from options', async () => {
    const client = tg.wrapOpenAI(plain());
    expect(tg.wrapOpenAI(client)).to.equal(client);
    expect(wrapOpenAI(client, { tracegate: tg })).to.equal(client);
    expect(errors.map((e) => e.code)).to.deep.equal(['already_wrapped', 'already_wrapped']);
    await client.responses.create({ model: 'gpt-4o-mini', input: 'once' });
    await tg.flush();
    expect(tg.stats.sent).to.equal(1);
  });

  it("through tracegate's proxy: the proxy's trace is the only one, labelled by the wrapper; traceIdOf gives X-Trace-Id", async () => {
    const counting = countingFetch();
    const own = new Tracegate({
      apiKey: key,
      baseUrl: s.url,
      flushOnExit: false,
      fetch: counting.fetch,
      onError: (e) => errors.push(e),
    });
    const viaProxy = () => new OpenAI({ apiKey: key, baseURL: `${s.url}/api/proxy/provider`, maxRetries: 0 });
    const client = own.wrapOpenAI(viaProxy(), { actionName: 'proxied_reply', environment: 'prod' });
    const body = { model: 'gpt-4o-mini', input: 'through the proxy' };
    const before = fake.requests.length;
    const { data, response } = await client.responses.create(body).withResponse();
    expect(shape(data)).to.deep.equal(shape(await viaProxy().responses.create(body)));
    expect(own.traceIdOf(data)).to.equal(response.headers.get('x-trace-id'));
    const stream = await client.responses.create({ ...body, stream: true });
    const events = await drain(stream);
    expect(events.at(-1)!.type).to.equal('response.completed');
    await own.shutdown(1000);
    expect(counting.calls).to.deep.equal([]); // the SDK sent nothing: the proxy stored each call

    // The provider got neither label: the proxy keeps them.
    for (const r of fake.requests.slice(before)) expect(Object.keys(r.headers)).to.not.include('x-tracegate-action');
    await flushed(s);
    const traces = await listTraces(s.url, key);
    expect(traces).to.have.length(3); // two wrapped calls and the unwrapped reference, one trace each
    const labelled = traces.filter((t) => t.actionName === 'proxied_reply');
    expect(labelled.map((t) => t.traceId).sort()).to.deep.equal([own.traceIdOf(data), own.traceIdOf(stream)].sort());
    expect(labelled.every((t) => t.source === 'proxy' && t.environment === 'prod')).to.equal(true);
  });
});
