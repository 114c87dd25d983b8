// POST /api/local/run and GET /api/local/models against real locally hosted models: Ollama's protocol served by
// node-llama-cpp (the shim), OpenAI's by llama.cpp's own llama-server, both running the tiny deterministic model
// (test/support/local-model), on both storage engines. Then the model server down, refusing, answering garbage,
// going silent or dying mid-answer, and the request's own failures.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  freePort,
  type ModelServer,
  startLlamaServer,
  startShim,
  TINY_COMPLETION_TOKENS,
  TINY_MODEL,
  TINY_REPLY,
  TINY_REPLY_DELTAS,
} from '../support/local-model/servers.ts';
import { BACKENDS, type Backend, flushed, startTestServer, type TestServer } from '../support/server.ts';
import { type Answer, call, signIn } from '../support/sessions.ts';

const QUIET = { TRACEGATE_AUTH_FAILURE_LIMIT: '100000' };

/** Server-sent events of an answer: [event, data] in order. */
function events(text: string): Array<[string, any]> {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split('\n');
      const event =
        lines.find((l) => l.startsWith('event: '))?.slice(7) ?? (lines[0]!.startsWith(':') ? 'comment' : '');
      const data = lines.find((l) => l.startsWith('data: '))?.slice(6);
      return [event, data === undefined ? lines[0] : JSON.parse(data)];
    });
}

interface Bench {
  s: TestServer;
  cookie: string;
  workspaceId: string;
  run(body: unknown, o?: Parameters<typeof call>[2]): Promise<Answer>;
  span(traceId: string): Promise<any>;
  stored(): Promise<number>;
}

async function bench(backend: Backend, env: Record<string, string>): Promise<Bench> {
  const s = await startTestServer(backend, { ...QUIET, ...env });
  const key = await s.key(`bench-${Math.random().toString(36).slice(2, 8)}`);
  const cookie = await signIn(s.url, key.key);
  return {
    s,
    cookie,
    workspaceId: key.workspaceId,
    run: (body, o = {}) => call(s.url, '/api/local/run', { cookie, body, ...o }),
    async span(traceId) {
      await flushed(s);
      const a = await call(s.url, `/api/traces/${traceId}`, { cookie });
      expect(a.status, a.text).to.equal(200);
      expect(a.json.trace.spans).to.have.length(1);
      return a.json.trace.spans[0];
    },
    async stored() {
      await flushed(s);
      return s.running.storage.countSpans(key.workspaceId);
    },
  };
}

const PROTOCOLS: Array<{ name: string; api: 'ollama' | 'openai'; start: () => Promise<ModelServer> }> = [
  { name: "Ollama's protocol, node-llama-cpp", api: 'ollama', start: startShim },
  { name: "OpenAI's protocol, llama.cpp's llama-server", api: 'openai', start: startLlamaServer },
];

for (const protocol of PROTOCOLS) {
  describe(`local run: ${protocol.name}`, function () {
    this.timeout(120_000);
    let model: ModelServer;
    before(async function () {
      this.timeout(31 * 60_000); // a fresh machine waits here for the llama-server build make test started
      model = await protocol.start();
    });
    after(() => model?.stop());

    for (const backend of BACKENDS) {
      describe(`stored in ${backend}`, () => {
        let b: Bench;
        before(async () => {
          b = await bench(backend, {
            TRACEGATE_LOCAL_MODEL_URL: model.url,
            TRACEGATE_LOCAL_MODEL_API: protocol.api,
            TRACEGATE_LOCAL_MODEL: TINY_MODEL,
          });
        });
        after(() => b?.s.close());

        it('a run answers the model’s exact reply, usage, finish reason and latency; recordTrace absent: nothing stored', async () => {
          const before = await b.stored();
          const a = await b.run({ prompt: 'Say hello', actionName: 'greet' });
          expect(a.status, a.text).to.equal(200);
          expect(a.json).to.have.all.keys('output', 'model', 'usage', 'latencyMs', 'finishReason');
          expect(a.json).to.deep.include({ output: TINY_REPLY, model: TINY_MODEL, finishReason: 'stop' });
          expect(a.json.usage.completionTokens).to.equal(TINY_COMPLETION_TOKENS);
          expect(a.json.usage.promptTokens).to.be.greaterThan(0);
          expect(a.json.usage.totalTokens).to.equal(a.json.usage.promptTokens + TINY_COMPLETION_TOKENS);
          expect(a.json.latencyMs).to.be.a('number').and.at.least(0);
          const off = await b.run({ prompt: 'Say hello', recordTrace: false });
          expect([off.status, off.json.traceId]).to.deep.equal([200, undefined]);
          expect(await b.stored()).to.equal(before);
        });

        it('a recorded run: traceId, durable and readable as an agent_lab trace at cost 0', async () => {
          const a = await b.run({
            prompt: 'Say hello',
            instructions: 'You are a greeter.',
            actionName: 'greet',
            recordTrace: true,
            parameters: { trainingPreferred: true, experiment: 'e1' },
          });
          expect(a.status, a.text).to.equal(200);
          expect(a.json.traceId).to.match(/^[0-9a-f]{32}$/);
          const span = await b.span(a.json.traceId);
          expect(span).to.deep.include({
            source: 'agent_lab',
            kind: 'llm',
            status: 'completed',
            model: TINY_MODEL,
            provider: protocol.api === 'ollama' ? 'ollama' : 'local',
            prompt: 'system: You are a greeter.\nuser: Say hello',
            response: TINY_REPLY,
            promptTokens: a.json.usage.promptTokens,
            completionTokens: TINY_COMPLETION_TOKENS,
            costUsd: 0,
            finishReason: 'stop',
            actionName: 'greet',
            trainable: true,
            trainingPreferred: true,
            durationMs: a.json.latencyMs,
          });
          expect(span.attributes).to.deep.include({
            parameters: { trainingPreferred: true, experiment: 'e1', source: 'agent_lab' },
            messages: [{ role: 'user', content: 'Say hello' }],
            instructions: 'You are a greeter.',
            'local_model.api': protocol.api,
          });
        });

        it('a chat: the turns go to the model and are kept as messages; maxTokens 3 stops at "Hello from the"', async () => {
          const messages = [
            { role: 'user', content: 'Bonjour ! 你好 🎉' },
            { role: 'assistant', content: TINY_REPLY },
            { role: 'user', content: 'Encore — Ünïcödé?' },
          ];
          const a = await b.run({ messages, maxTokens: 3, temperature: 0.7, recordTrace: true, actionName: 'chat' });
          expect(a.status, a.text).to.equal(200);
          expect(a.json).to.deep.include({ output: 'Hello from the', finishReason: 'length' });
          expect(a.json.usage.completionTokens).to.equal(3);
          const span = await b.span(a.json.traceId);
          expect(span.attributes.messages).to.deep.equal(messages);
          expect(span.attributes['local_model.generation']).to.deep.equal({ maxTokens: 3, temperature: 0.7 });
          expect(span.prompt).to.equal(messages.map((m) => `${m.role}: ${m.content}`).join('\n'));
          expect([span.response, span.finishReason]).to.deep.equal(['Hello from the', 'length']);
        });

        it('streaming: a delta event per piece of text as it comes, then done with the usage and traceId', async () => {
          const a = await b.run({ prompt: 'Hi', stream: true, recordTrace: true });
          expect(a.status, a.text).to.equal(200);
          expect(a.headers.get('content-type')).to.equal('text/event-stream; charset=utf-8');
          expect(a.headers.get('x-ratelimit-remaining')).to.match(/^\d+$/);
          const ev = events(a.text);
          expect(ev.filter(([e]) => e === 'delta').map(([, d]) => d.text)).to.deep.equal(TINY_REPLY_DELTAS);
          const [last, done] = ev.at(-1)!;
          expect(last).to.equal('done');
          expect(done).to.deep.include({ output: TINY_REPLY, model: TINY_MODEL, finishReason: 'stop' });
          expect(done.usage.completionTokens).to.equal(TINY_COMPLETION_TOKENS);
          expect((await b.span(done.traceId)).response).to.equal(TINY_REPLY);
          // Not recorded: done without traceId, nothing stored.
          const n = await b.stored();
          const off = events((await b.run({ prompt: 'Hi', stream: true })).text).at(-1)!;
          expect([off[0], off[1].traceId]).to.deep.equal(['done', undefined]);
          expect(await b.stored()).to.equal(n);
        });

        it('coach: a draft (coach_local_draft), then its curated answer (coach_curated, preferred), one coach session', async () => {
          const coach = { source: 'coach', coachSessionId: `cs-${backend}-${protocol.api}` };
          const draft = await b.run({ prompt: 'How do I greet?', parameters: coach, recordTrace: true });
          expect(draft.status, draft.text).to.equal(200);
          const d = await b.span(draft.json.traceId);
          expect(d).to.deep.include({ source: 'coach', actionName: 'coach_local_draft', trainingPreferred: false });
          expect(d.attributes.parameters).to.deep.equal(coach);
          // Accepted as it is (right away: the draft may still be in the spool)...
          const accepted = await b.run({ parameters: { ...coach, curate: { draftTraceId: draft.json.traceId } } });
          expect(accepted.status, accepted.text).to.equal(200);
          expect(accepted.json).to.deep.include({ output: TINY_REPLY, model: TINY_MODEL, latencyMs: 0 });
          const c = await b.span(accepted.json.traceId);
          expect(c).to.deep.include({
            source: 'coach',
            actionName: 'coach_curated',
            response: TINY_REPLY,
            prompt: d.prompt,
            trainingPreferred: true,
            trainable: true,
            costUsd: 0,
          });
          expect(c.attributes.parameters.coachSessionId).to.equal(coach.coachSessionId);
          expect(c.attributes['coach.draft_trace_id']).to.equal(draft.json.traceId);
          // ...or edited.
          const curate = { draftTraceId: draft.json.traceId, response: 'Say: hello there!' };
          const edited = await b.run({ parameters: { ...coach, curate }, recordTrace: true });
          expect(edited.json.output).to.equal('Say: hello there!');
          const e = await b.span(edited.json.traceId);
          expect([e.actionName, e.response, e.trainingPreferred, e.attributes['coach.edited']]).to.deep.equal([
            'coach_curated',
            'Say: hello there!',
            true,
            true,
          ]);
          // The curated traces are what a training export of preferred examples picks.
          const listed = await call(b.s.url, '/api/traces?actionName=coach_curated&source=coach', { cookie: b.cookie });
          expect(listed.json.items.map((t: { traceId: string }) => t.traceId)).to.include.members([
            accepted.json.traceId,
            edited.json.traceId,
          ]);
          // Another coach session's draft, or no draft: refused.
          const other = await b.run({
            parameters: { ...coach, coachSessionId: 'other', curate: { draftTraceId: draft.json.traceId } },
          });
          expect([other.status, other.json.error.code]).to.deep.equal([409, 'coach_session_mismatch']);
          const none = await b.run({ parameters: { ...coach, curate: { draftTraceId: 'no-such-trace' } } });
          expect([none.status, none.json.error.details[0].field]).to.deep.equal([
            404,
            'parameters.curate.draftTraceId',
          ]);
        });

        it('GET /api/local/models lists what the server offers', async () => {
          const a = await call(b.s.url, '/api/local/models', { cookie: b.cookie });
          expect(a.status, a.text).to.equal(200);
          expect(a.json).to.deep.include({ api: protocol.api, defaultModel: TINY_MODEL });
          const ids = a.json.models.map((m: { id: string }) => m.id);
          expect(ids).to.deep.equal(protocol.api === 'ollama' ? [`${TINY_MODEL}:latest`] : [TINY_MODEL]);
        });
      });
    }
  });
}

/** A model server that misbehaves in one way: answers `handler`'s way on every request. */
async function misbehaving(handler: Parameters<typeof createServer>[1]): Promise<{ url: string; server: Server }> {
  const server = createServer(handler!).listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

for (const backend of BACKENDS) {
  describe(`local run failures: stored in ${backend}`, function () {
    this.timeout(120_000);
    let shim: ModelServer;
    const closers: Array<() => Promise<unknown>> = [];
    before(async () => {
      shim = await startShim();
    });
    after(async () => {
      for (const c of closers.reverse()) await c();
      await shim?.stop();
    });
    const benchOn = async (url: string, api = 'ollama', env: Record<string, string> = {}) => {
      const b = await bench(backend, {
        TRACEGATE_LOCAL_MODEL_URL: url,
        TRACEGATE_LOCAL_MODEL_API: api,
        TRACEGATE_LOCAL_MODEL: TINY_MODEL,
        ...env,
      });
      closers.push(() => b.s.close());
      return b;
    };
    const serve = async (handler: Parameters<typeof createServer>[1]) => {
      const m = await misbehaving(handler);
      closers.push(() => new Promise((r) => m.server.close(r)));
      m.server.on('connection', (sock) => closers.push(async () => sock.destroy()));
      return m.url;
    };

    it('the model server down: 503 local_model_unavailable with Retry-After; a recorded run is stored as an error', async () => {
      const b = await benchOn(`http://127.0.0.1:${await freePort()}`);
      const a = await b.run({ prompt: 'Hi', recordTrace: true, actionName: 'down' });
      expect(a.status, a.text).to.equal(503);
      expect(a.headers.get('retry-after')).to.equal('5');
      expect(a.json.error.code).to.equal('local_model_unavailable');
      expect(a.json.error.message).to.match(/cannot be reached \(ECONNREFUSED\): is it running\?/);
      const span = await b.span(a.json.error.details.traceId);
      expect(span).to.deep.include({ status: 'error', trainable: false, response: '', actionName: 'down' });
      expect(span.statusMessage).to.match(/ECONNREFUSED/);
      // Not recorded: nothing stored; the models route says the same.
      const n = await b.stored();
      expect((await b.run({ prompt: 'Hi' })).json.error).to.deep.include({
        code: 'local_model_unavailable',
        details: null,
      });
      expect(await b.stored()).to.equal(n);
      expect((await call(b.s.url, '/api/local/models', { cookie: b.cookie })).status).to.equal(503);
      // Streamed: nothing was sent yet, so the same status and JSON error.
      const streamed = await b.run({ prompt: 'Hi', stream: true });
      expect([streamed.status, streamed.json.error.code]).to.deep.equal([503, 'local_model_unavailable']);
    });

    it('the model server refusing the request (an unknown model): 502 local_model_error with its message', async () => {
      const b = await benchOn(shim.url);
      const a = await b.run({ prompt: 'Hi', model: 'no-such-model' });
      expect(a.status, a.text).to.equal(502);
      expect(a.json.error.code).to.equal('local_model_error');
      expect(a.json.error.message).to.match(/answered 404: model "no-such-model" not found/);
      expect(a.json.error.details).to.deep.equal({ upstreamStatus: 404 });
    });

    it('the model server answering garbage: 502 local_model_bad_response, in either protocol', async () => {
      const html = await serve((_req, res) =>
        res.writeHead(200, { 'content-type': 'text/html' }).end('<html>hi</html>'),
      );
      for (const api of ['ollama', 'openai']) {
        const b = await benchOn(html, api);
        const a = await b.run({ prompt: 'Hi', recordTrace: true });
        expect(a.status, `${api}: ${a.text}`).to.equal(502);
        expect(a.json.error.code).to.equal('local_model_bad_response');
        expect((await b.span(a.json.error.details.traceId)).status).to.equal('error');
        const models = await call(b.s.url, '/api/local/models', { cookie: b.cookie });
        expect([models.status, models.json.error.code]).to.deep.equal([502, 'local_model_bad_response']);
      }
    });

    it('the model server silent past TRACEGATE_LOCAL_MODEL_IDLE_TIMEOUT_MS, or a run past _TIMEOUT_MS: 504 local_model_timeout', async () => {
      const silent = await serve(() => {}); // takes the request, never answers
      const b = await benchOn(silent, 'ollama', { TRACEGATE_LOCAL_MODEL_IDLE_TIMEOUT_MS: '300' });
      const t0 = Date.now();
      const a = await b.run({ prompt: 'Hi' });
      expect(a.status, a.text).to.equal(504);
      expect(a.json.error.code).to.equal('local_model_timeout');
      expect(Date.now() - t0).to.be.within(250, 5000);
      // Never silent, never done: the run's own limit.
      const line = `${JSON.stringify({ model: TINY_MODEL, message: { role: 'assistant', content: '.' }, done: false })}\n`;
      const endless = await serve((req, res) => {
        req.resume();
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        const tick = setInterval(() => res.write(line), 50);
        res.once('close', () => clearInterval(tick));
      });
      const c = await benchOn(endless, 'ollama', { TRACEGATE_LOCAL_MODEL_TIMEOUT_MS: '600' });
      const e = await c.run({ prompt: 'Hi' });
      expect([e.status, e.json.error.code]).to.deep.equal([504, 'local_model_timeout']);
      expect(e.json.error.message).to.match(/did not finish within TRACEGATE_LOCAL_MODEL_TIMEOUT_MS/);
    });

    it('the model server dying mid-answer, streamed: the deltas so far, an error event; the partial run stored as an error', async () => {
      const line = (o: object) => `${JSON.stringify(o)}\n`;
      const dying = await serve((req, res) => {
        req.resume();
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        res.write(line({ model: TINY_MODEL, message: { role: 'assistant', content: 'Hello' }, done: false }));
        setTimeout(() => res.socket?.destroy(), 50);
      });
      const b = await benchOn(dying);
      const a = await b.run({ prompt: 'Hi', stream: true, recordTrace: true });
      expect(a.status).to.equal(200);
      const ev = events(a.text);
      expect(ev[0]).to.deep.equal(['delta', { text: 'Hello' }]);
      const [kind, err] = ev.at(-1)!;
      expect(kind).to.equal('error');
      expect(err.error.code).to.equal('local_model_bad_response');
      const span = await b.span(err.error.details.traceId);
      expect([span.status, span.response, span.trainable]).to.deep.equal(['error', 'Hello', false]);
    });

    it('the client leaving mid-answer: the model server’s request is closed too; the run stored as cancelled', async () => {
      let upstreamClosed: () => void = () => {};
      const closed = new Promise<void>((r) => (upstreamClosed = r));
      const slow = await serve((req, res) => {
        req.resume();
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        res.write(
          `${JSON.stringify({ model: TINY_MODEL, message: { role: 'assistant', content: 'Hello' }, done: false })}\n`,
        );
        res.once('close', () => upstreamClosed()); // and never finishes on its own
      });
      const b = await benchOn(slow);
      const leave = new AbortController();
      const res = await fetch(`${b.s.url}/api/local/run`, {
        method: 'POST',
        headers: { cookie: b.cookie, origin: b.s.url, 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'Hi', stream: true, recordTrace: true, actionName: 'cancel-me' }),
        signal: leave.signal,
      });
      const reader = res.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      expect(first).to.include('event: delta');
      leave.abort();
      await closed;
      let span: any;
      for (let i = 0; i < 50 && !span; i++) {
        await flushed(b.s);
        const page = await b.s.running.storage.listTraces(b.workspaceId, { actionName: 'cancel-me', limit: 1 });
        if (page.items[0]) span = (await b.s.running.storage.getTrace(b.workspaceId, page.items[0].traceId))[0];
        else await new Promise((r) => setTimeout(r, 100));
      }
      expect([span.status, span.response, span.trainable]).to.deep.equal(['cancelled', 'Hello', false]);
      // Not streamed: the same, the client leaving while the model answers.
      const closedAgain = new Promise<void>((r) => (upstreamClosed = r));
      const gone = new AbortController();
      const pending = fetch(`${b.s.url}/api/local/run`, {
        method: 'POST',
        headers: { cookie: b.cookie, origin: b.s.url, 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'Hi', recordTrace: true, actionName: 'cancel-me-too' }),
        signal: gone.signal,
      }).catch((e: Error) => e);
      await new Promise((r) => setTimeout(r, 300));
      gone.abort();
      expect(await pending).to.be.instanceOf(Error);
      await closedAgain;
      await new Promise((r) => setTimeout(r, 200));
      await flushed(b.s);
      const page = await b.s.running.storage.listTraces(b.workspaceId, { actionName: 'cancel-me-too', limit: 1 });
      expect(page.items.map((t) => t.status)).to.deep.equal(['cancelled']);
    });

    it('the request’s own faults: 400 naming the field, 413, 415; rate-limited per session (429)', async () => {
      const b = await benchOn(shim.url, 'ollama', {
        TRACEGATE_RATE_LIMIT_POINTS: '6',
        TRACEGATE_MAX_STRING_BYTES: '64',
      });
      const bad = async (body: unknown, status: number, field?: string) => {
        const a = await b.run(body);
        expect(a.status, a.text).to.equal(status);
        if (field) expect(a.json.error.details[0].field).to.equal(field);
      };
      await bad({ model: TINY_MODEL }, 400, 'prompt');
      await bad(
        {
          messages: [
            { role: 'user', content: 'a' },
            { role: 'bot', content: 'b' },
          ],
        },
        400,
        'messages.1.role',
      );
      await bad({ messages: [{ role: 'user', content: 'a' }], prompt: 'x' }, 400, 'messages');
      await bad('{"prompt": ', 400);
      await bad({ prompt: 'x'.repeat(65) }, 413);
      expect((await b.run('prompt=Hi', { contentType: 'text/plain' })).status).to.equal(415); // refused before the limit
      // Six runs a window for this session (the five refused above count): the seventh is refused, with when to retry.
      expect((await b.run({ prompt: 'Hi' })).json.output).to.equal(TINY_REPLY);
      const limited = await b.run({ prompt: 'Hi' });
      expect(limited.status).to.equal(429);
      expect(Number(limited.headers.get('retry-after'))).to.be.within(1, 60);
      expect(limited.headers.get('x-ratelimit-remaining')).to.equal('0');
      // Another session has its own budget.
      const other = await signIn(b.s.url, (await b.s.key('second')).key);
      const a = await call(b.s.url, '/api/local/run', { cookie: other, body: { prompt: 'Hi' } });
      expect([a.status, a.json.output]).to.deep.equal([200, TINY_REPLY]);
    });
  });
}
