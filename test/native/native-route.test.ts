// POST /api/traces and the read routes over real HTTP, on both storage backends.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { Agent, request } from 'node:http';
import { BACKENDS, cli, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';

for (const backend of BACKENDS) {
  describe(`native ingestion over HTTP (${backend})`, function () {
    let s: TestServer;
    let auth: Record<string, string>;
    let wsId: string;
    before(async () => {
      s = await startTestServer(backend, { TRACEGATE_MAX_STRING_BYTES: '4096', TRACEGATE_MAX_BODY_BYTES: '65536' });
      const k = await s.key('acme');
      auth = { authorization: `Bearer ${k.key}` };
      wsId = k.workspaceId;
    });
    after(() => s.close());

    const sample = (over: Record<string, unknown> = {}) => ({
      requestId: `req-${Math.random().toString(36).slice(2)}`,
      actionName: 'summarize',
      environment: 'prod',
      model: 'gpt-4o-mini',
      provider: 'openai',
      prompt: 'Summarize: the quick brown fox',
      response: 'A fox jumps.',
      metrics: {
        promptTokens: 12,
        completionTokens: 4,
        totalTokens: 16,
        latencyMs: 420,
        estimatedCostUsd: 0.00042,
        finishReason: 'stop',
      },
      parameters: { trainingPreferred: true },
      metadata: { userId: 'u1', tags: ['a', 'b'] },
      ...over,
    });

    it('stores a trace and answers { trace: { traceId, status } } with traceId = requestId', async () => {
      const body = sample();
      const res = await post(`${s.url}/api/traces`, body, auth);
      expect(res.status).to.equal(200);
      expect(res.json).to.deep.equal({ trace: { traceId: body.requestId, status: 'completed' } });
      expect(res.headers.get('x-ratelimit-remaining')).to.match(/^\d+$/);
      await flushed(s);
      const got = await get(`${s.url}/api/traces/${body.requestId}`, auth);
      expect(got.status).to.equal(200);
      const span = got.json.trace.spans[0];
      expect(span).to.include({
        traceId: body.requestId,
        requestId: body.requestId,
        source: 'native',
        kind: 'llm',
        model: 'gpt-4o-mini',
        provider: 'openai',
        prompt: body.prompt,
        response: body.response,
        promptTokens: 12,
        completionTokens: 4,
        totalTokens: 16,
        costUsd: 0.00042,
        finishReason: 'stop',
        actionName: 'summarize',
        environment: 'prod',
        status: 'completed',
        trainingPreferred: true,
        trainable: true,
        durationMs: 420,
      });
      expect(span.attributes.metadata).to.deep.equal({ userId: 'u1', tags: ['a', 'b'] });
      expect(span).to.not.have.property('workspaceId');
      expect(got.json.trace.summary).to.include({
        prompt: body.prompt,
        response: body.response,
        totalTokens: 16,
        spanCount: 1,
      });
    });

    it('makes a trace id when there is no requestId, defaults status to completed', async () => {
      const { requestId: _r, ...body } = sample();
      const res = await post(`${s.url}/api/traces`, body, auth);
      expect(res.status).to.equal(200);
      expect(res.json.trace.traceId).to.match(/^[0-9a-f-]{36}$/);
      expect(res.json.trace.status).to.equal('completed');
    });

    it('computes cost from the price table when the client sends none, 0 for local models', async () => {
      const priced = sample({ metrics: { promptTokens: 1_000_000, completionTokens: 1_000_000 } });
      const local = sample({
        model: 'llama3.2:3b',
        provider: 'ollama',
        metrics: { promptTokens: 500, completionTokens: 50 },
      });
      await post(`${s.url}/api/traces`, priced, auth);
      await post(`${s.url}/api/traces`, local, auth);
      await flushed(s);
      const a = (await get(`${s.url}/api/traces/${priced.requestId}`, auth)).json.trace.spans[0];
      const b = (await get(`${s.url}/api/traces/${local.requestId}`, auth)).json.trace.spans[0];
      expect(a.costUsd).to.be.closeTo(0.15 + 0.6, 1e-6); // gpt-4o-mini: $0.15/M in, $0.60/M out
      expect(a.totalTokens).to.equal(2_000_000);
      expect(b.costUsd).to.equal(0);
      // A client field in the server's namespace is kept, renamed, and cannot switch pricing off.
      const sneaky = {
        ...sample({ metrics: { promptTokens: 1_000_000, completionTokens: 0 } }),
        'tracegate.cost_source': 'x',
      };
      await post(`${s.url}/api/traces`, sneaky, auth);
      await flushed(s);
      const c = (await get(`${s.url}/api/traces/${sneaky.requestId}`, auth)).json.trace.spans[0];
      expect(c.costUsd).to.be.closeTo(0.15, 1e-9);
      expect(c.attributes['client.tracegate.cost_source']).to.equal('x');
    });

    it('stores the trainable flag: completed with prompt and response only', async () => {
      const noResp = sample({ response: undefined });
      const failed = sample({ status: 'error' });
      await post(`${s.url}/api/traces`, noResp, auth);
      await post(`${s.url}/api/traces`, failed, auth);
      await flushed(s);
      expect((await get(`${s.url}/api/traces/${noResp.requestId}`, auth)).json.trace.spans[0].trainable).to.equal(
        false,
      );
      const f = (await get(`${s.url}/api/traces/${failed.requestId}`, auth)).json.trace.spans[0];
      expect(f.trainable).to.equal(false);
      expect(f.status).to.equal('error');
    });

    it('keeps unknown fields as attributes', async () => {
      const body = sample({ customerTier: 'gold', extra: { nested: [1, 2, { x: true }] } });
      await post(`${s.url}/api/traces`, body, auth);
      await flushed(s);
      const span = (await get(`${s.url}/api/traces/${body.requestId}`, auth)).json.trace.spans[0];
      expect(span.attributes.customerTier).to.equal('gold');
      expect(span.attributes.extra).to.deep.equal({ nested: [1, 2, { x: true }] });
    });

    it('takes parameters.source free-form: a known one sets the source, any other is kept as sent', async () => {
      const mine = sample({ parameters: { source: 'my_app' } });
      const coach = sample({ parameters: { source: 'coach' } });
      for (const body of [mine, coach]) expect((await post(`${s.url}/api/traces`, body, auth)).status).to.equal(200);
      await flushed(s);
      const a = (await get(`${s.url}/api/traces/${mine.requestId}`, auth)).json.trace.spans[0];
      const b = (await get(`${s.url}/api/traces/${coach.requestId}`, auth)).json.trace.spans[0];
      expect([a.source, a.attributes.parameters, b.source]).to.deep.equal(['native', { source: 'my_app' }, 'coach']);
    });

    it("takes null for a known optional field as not given (Python's None); null elsewhere is kept", async () => {
      const body = {
        requestId: `nulls-${Date.now()}`,
        model: null,
        environment: null,
        prompt: 'p',
        response: 'r',
        metrics: { promptTokens: null, completionTokens: 3, finishReason: null },
        parameters: null,
        customerNote: null,
        finishReason: null,
      };
      const res = await post(`${s.url}/api/traces`, body, auth);
      expect(res.status, res.text).to.equal(200);
      await flushed(s);
      const span = (await get(`${s.url}/api/traces/${body.requestId}`, auth)).json.trace.spans[0];
      expect(span).to.include({ model: '', environment: '', promptTokens: 0, completionTokens: 3, finishReason: '' });
      expect(span.attributes).to.have.property('customerNote', null);
      expect(span.attributes).to.have.property('finishReason', null); // a metrics field's name, unknown at the top
      expect((await post(`${s.url}/api/traces`, { prompt: 5, model: null }, auth)).status).to.equal(400); // wrong types still are
    });

    it('never yields two traces for the same requestId', async () => {
      const body = sample({ requestId: 'dup-1' });
      for (let i = 0; i < 3; i++) expect((await post(`${s.url}/api/traces`, body, auth)).status).to.equal(200);
      await Promise.all([1, 2, 3].map(() => post(`${s.url}/api/traces`, body, auth)));
      await flushed(s);
      const got = await get(`${s.url}/api/traces/dup-1`, auth);
      expect(got.json.trace.spans).to.have.length(1);
      const list = await get(`${s.url}/api/traces?actionName=summarize&limit=1000`, auth);
      expect(list.json.items.filter((t: { traceId: string }) => t.traceId === 'dup-1')).to.have.length(1);
    });

    describe('validation', () => {
      const cases: Array<[string, Record<string, unknown>, string]> = [
        ['prompt of the wrong type', { prompt: 5 }, 'prompt'],
        ['negative token count', { metrics: { promptTokens: -1 } }, 'metrics.promptTokens'],
        ['fractional token count', { metrics: { completionTokens: 1.5 } }, 'metrics.completionTokens'],
        ['cost as a string', { metrics: { estimatedCostUsd: '0.1' } }, 'metrics.estimatedCostUsd'],
        ['trainingPreferred not boolean', { parameters: { trainingPreferred: 'yes' } }, 'parameters.trainingPreferred'],
        ['oversize response', { response: 'x'.repeat(5000) }, 'response'],
        ['prompt over the limit in UTF-8 bytes, not characters', { prompt: '\u{1F600}'.repeat(1100) }, 'prompt'],
        ['requestId with spaces', { requestId: 'a b' }, 'requestId'],
        ['status empty', { status: '' }, 'status'],
        ['metadata not an object', { metadata: [1] }, 'metadata'],
      ];
      for (const [name, over, field] of cases) {
        it(`400 naming the field: ${name}`, async () => {
          const res = await post(`${s.url}/api/traces`, sample(over), auth);
          expect(res.status).to.equal(400);
          expect(res.json.error.code).to.equal('validation_failed');
          expect(res.json.error.message).to.include(field);
          expect(res.json.error.details.map((d: { field: string }) => d.field)).to.include(field);
        });
      }
      it('400 for a body that is not an object', async () => {
        const res = await post(`${s.url}/api/traces`, '"hello"', auth);
        expect(res.status).to.equal(400);
        expect(res.json.error).to.have.keys('code', 'message', 'details');
      });
      it('400 for malformed JSON and invalid UTF-8', async () => {
        expect((await post(`${s.url}/api/traces`, '{"prompt":', auth)).json.error.code).to.equal('invalid_json');
        // Where it failed, never V8's quote of the text around it (a prompt, a key pasted unquoted).
        for (const text of [
          '{"input":"x", "api_key": sk-live-9f8e7d6c5b4a}',
          'Summarize: patient John Doe, born 1970',
          '{"prompt": "a"} trailing secret-text',
        ]) {
          const e = (await post(`${s.url}/api/traces`, text, auth)).json.error;
          expect(e.code).to.equal('invalid_json');
          expect(e.message).to.match(/^request body is not valid JSON: (syntax error|unexpected end of input)/);
          for (const word of ['sk-live', 'Summarize', 'John', 'secret']) expect(JSON.stringify(e)).not.to.include(word);
        }
        const bad = Buffer.concat([Buffer.from('{"prompt":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
        const res = await post(`${s.url}/api/traces`, bad, auth);
        expect(res.status).to.equal(400);
        expect(res.json.error.code).to.equal('invalid_encoding');
      });
      it('400 too_deep for deeply nested metadata; 62 levels inside the body are stored, read back and verified (fuzzing: 5,000 levels answered 500, 2,500 hung reads)', async () => {
        const nest = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
        for (const n of [100, 5000]) {
          const res = await post(`${s.url}/api/traces`, `{"prompt":"x","metadata":${nest(n)}}`, auth);
          expect(res.status).to.equal(400);
          expect(res.json.error).to.include({ code: 'too_deep' });
          expect(res.json.error.details).to.deep.equal({ limit: 64 });
        }
        const requestId = `deep-${Math.random().toString(36).slice(2)}`;
        const ok = await post(
          `${s.url}/api/traces`,
          `{"requestId":"${requestId}","prompt":"x","metadata":${nest(62)}}`,
          auth,
        );
        expect(ok.status).to.equal(200);
        await flushed(s);
        const got = await get(`${s.url}/api/traces/${requestId}`, auth);
        expect(got.status).to.equal(200);
        let v = got.json.trace.spans[0].attributes.metadata;
        let depth = 0;
        while (typeof v === 'object') {
          v = v.a;
          depth++;
        }
        expect(depth).to.equal(62);
        expect((await get(`${s.url}/api/traces/${requestId}/verification`, auth)).json).to.include({ ok: true });
      });
      it('400 for __proto__ keys, and nothing is polluted', async () => {
        const res = await post(`${s.url}/api/traces`, '{"prompt":"x","metadata":{"__proto__":{"polluted":1}}}', auth);
        expect(res.status).to.equal(400);
        expect(res.json.error.code).to.equal('forbidden_key');
        expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
      });
      it('415 for a non-JSON content type', async () => {
        const res = await post(`${s.url}/api/traces`, 'prompt=x', { ...auth, 'content-type': 'text/plain' });
        expect(res.status).to.equal(415);
        expect(res.json.error.code).to.equal('unsupported_media_type');
        // JSON is UTF-8: a body declared in another charset is refused rather than misread.
        const latin1 = await post(`${s.url}/api/traces`, Buffer.from('{"prompt":"caf\xe9"}', 'latin1'), {
          ...auth,
          'content-type': 'application/json; charset=ISO-8859-1',
        });
        expect([latin1.status, latin1.json.error.code]).to.deep.equal([415, 'unsupported_charset']);
        expect(
          (
            await post(`${s.url}/api/traces`, sample(), {
              ...auth,
              'content-type': 'application/json; charset="UTF-8"',
            })
          ).status,
        ).to.equal(200);
      });
      it('413 over the body limit, also after decompression (gzip bomb)', async () => {
        const big = JSON.stringify(sample({ response: 'y'.repeat(70_000) }));
        expect((await post(`${s.url}/api/traces`, big, auth)).status).to.equal(413);
        const bomb = gzipSync(Buffer.from(`{"prompt":"${'a'.repeat(50 * 1024 * 1024)}"}`));
        expect(bomb.length).to.be.lessThan(100_000);
        const res = await post(`${s.url}/api/traces`, bomb, { ...auth, 'content-encoding': 'gzip' });
        expect(res.status).to.equal(413);
        expect(res.json.error.code).to.equal('payload_too_large');
        expect((await get(`${s.url}/healthz`)).status).to.equal(200);
        // A keep-alive client sends its next request after the 413: the answer said the connection closes (the
        // rest of the bomb is never read), so the client opens a new one instead of having that request reset.
        const agent = new Agent({ keepAlive: true, maxSockets: 1 });
        const send = (body: Buffer, headers: Record<string, string>) =>
          new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
            const req = request(
              `${s.url}/api/traces`,
              { method: 'POST', agent, headers: { ...auth, 'content-type': 'application/json', ...headers } },
              (r) => {
                r.resume();
                r.on('end', () => resolve({ status: r.statusCode!, connection: r.headers.connection }));
              },
            );
            req.on('error', reject);
            req.end(body);
          });
        // Big enough (gzip members of zeros, 0.5 MB in all) that the 413 is sent while most of it is still arriving.
        const zeros = gzipSync(Buffer.alloc(50 * 1024 * 1024));
        const longBomb = Buffer.concat(Array.from({ length: 10 }, () => zeros));
        try {
          const first = await send(longBomb, { 'content-encoding': 'gzip' });
          expect(first).to.deep.equal({ status: 413, connection: 'close' });
          expect((await send(Buffer.from(JSON.stringify(sample())), {})).status).to.equal(200);
        } finally {
          agent.destroy();
        }
      });
      it('accepts a gzip-encoded body', async () => {
        const body = sample();
        const res = await post(`${s.url}/api/traces`, gzipSync(Buffer.from(JSON.stringify(body))), {
          ...auth,
          'content-encoding': 'gzip',
        });
        expect(res.status).to.equal(200);
        expect(res.json.trace.traceId).to.equal(body.requestId);
      });
    });

    describe('auth', () => {
      it('401 without a key, with a malformed key, with an unknown key', async () => {
        for (const h of [
          {} as Record<string, string>,
          { authorization: 'Bearer nope' },
          { authorization: 'Bearer tg_0123456789abcdef_' + 'A'.repeat(43) },
        ]) {
          const res = await post(`${s.url}/api/traces`, sample(), h);
          expect(res.status).to.equal(401);
          expect(res.json.error.code).to.equal('unauthorized');
        }
      });
      it('401 after the key is revoked with the CLI (through the running server)', async () => {
        const k = await s.key('revoke-me');
        const h = { authorization: `Bearer ${k.key}` };
        expect((await post(`${s.url}/api/traces`, sample(), h)).status).to.equal(200);
        const out = await cli(s, ['keys', 'revoke', k.keyId]);
        expect(out.code).to.equal(0);
        expect(out.stdout).to.include(`revoked ${k.keyId}`);
        const res = await post(`${s.url}/api/traces`, sample(), h);
        expect(res.status).to.equal(401);
        const list = JSON.parse((await cli(s, ['keys', 'list', '--workspace', 'revoke-me', '--json'])).stdout);
        expect(list[0]).to.include({ keyId: k.keyId });
        expect(list[0].revokedAtMs).to.be.greaterThan(0);
        expect(list[0]).to.not.have.property('hash');
      });
      it('a key created with the CLI works at once', async () => {
        const out = await cli(s, ['keys', 'create', '--workspace', 'cli-co', '--json']);
        const created = JSON.parse(out.stdout);
        expect(created).to.have.keys('workspaceId', 'keyId', 'key');
        expect(
          (await post(`${s.url}/api/traces`, sample(), { authorization: `Bearer ${created.key}` })).status,
        ).to.equal(200);
      });
      it('a workspace id given where a name is expected means that workspace; a new name of the id form is refused', async () => {
        const owner = JSON.parse((await cli(s, ['keys', 'create', '--workspace', 'id-owner', '--json'])).stdout);
        const byId = JSON.parse((await cli(s, ['keys', 'create', '--workspace', owner.workspaceId, '--json'])).stdout);
        expect(byId.workspaceId).to.equal(owner.workspaceId);
        const listed = JSON.parse((await cli(s, ['keys', 'list', '--workspace', owner.workspaceId, '--json'])).stdout);
        expect(listed.map((k: { keyId: string }) => k.keyId)).to.have.members([owner.keyId, byId.keyId]);
        const impostor = await cli(s, ['keys', 'create', '--workspace', 'ws_0123456789abcdef', '--json']);
        expect(impostor.code).to.not.equal(0);
        expect(impostor.stderr).to.include('workspace ids');
        // One named so before ids were reserved still gets keys by its name.
        await s.running.storage.createWorkspace({
          id: 'ws_fedcba9876543210',
          name: 'ws_0123456789abcdee',
          createdAtMs: Date.now(),
        });
        const old = JSON.parse(
          (await cli(s, ['keys', 'create', '--workspace', 'ws_0123456789abcdee', '--json'])).stdout,
        );
        expect(old.workspaceId).to.equal('ws_fedcba9876543210');
        const missing = await cli(s, ['keys', 'list', '--workspace', 'no-such-co']);
        expect(missing.code).to.not.equal(0);
        expect(missing.stderr).to.include('no workspace');
      });
      it('stores keys only as hashes', async () => {
        const k = await s.key('hash-check');
        const rec = await s.running.storage.getApiKey(k.keyId);
        expect(rec!.hash).to.match(/^[0-9a-f]{64}$/);
        const secret = k.key.slice(`tg_${k.keyId}_`.length); // base64url: may itself contain '_'
        expect(secret).to.have.length.greaterThan(20);
        expect(JSON.stringify(rec)).to.not.include(secret);
      });
    });

    describe('workspaces', () => {
      it('isolates reads and writes by workspace', async () => {
        const other = await s.key('other-co');
        const h2 = { authorization: `Bearer ${other.key}` };
        const body = sample({ requestId: 'shared-id-1', prompt: 'acme prompt' });
        await post(`${s.url}/api/traces`, body, auth);
        await post(`${s.url}/api/traces`, { ...body, prompt: 'other prompt' }, h2);
        await flushed(s);
        const a = await get(`${s.url}/api/traces/shared-id-1`, auth);
        const b = await get(`${s.url}/api/traces/shared-id-1`, h2);
        expect(a.json.trace.spans[0].prompt).to.equal('acme prompt');
        expect(b.json.trace.spans[0].prompt).to.equal('other prompt');
        const third = await s.key('third-co');
        expect(
          (await get(`${s.url}/api/traces/shared-id-1`, { authorization: `Bearer ${third.key}` })).status,
        ).to.equal(404);
        expect((await get(`${s.url}/api/traces`, { authorization: `Bearer ${third.key}` })).json.items).to.deep.equal(
          [],
        );
        expect(await s.running.storage.countSpans(wsId)).to.be.greaterThan(0);
      });
    });

    describe('batch', () => {
      it('stores valid items and reports each item', async () => {
        const good = sample();
        const res = await post(`${s.url}/api/traces`, [good, { prompt: 7 }, sample()], auth);
        expect(res.status).to.equal(207);
        expect(res.json.accepted).to.equal(2);
        expect(res.json.rejected).to.equal(1);
        expect(res.json.results[0]).to.deep.equal({
          index: 0,
          trace: { traceId: good.requestId, status: 'completed' },
        });
        expect(res.json.results[1].error.details[0].field).to.equal('1.prompt');
        await flushed(s);
        expect((await get(`${s.url}/api/traces/${good.requestId}`, auth)).status).to.equal(200);
      });
      it('200 when every item is valid, 400 when none is', async () => {
        expect((await post(`${s.url}/api/traces`, [sample(), sample()], auth)).status).to.equal(200);
        expect((await post(`${s.url}/api/traces`, [{ prompt: 1 }], auth)).status).to.equal(400);
      });
    });

    describe('listing', () => {
      it('filters, orders newest first, and pages with a cursor', async () => {
        const k = await s.key('list-co');
        const h = { authorization: `Bearer ${k.key}` };
        const ids: string[] = [];
        for (let i = 0; i < 7; i++) {
          const body = sample({
            requestId: `list-${i}`,
            environment: i % 2 ? 'prod' : 'dev',
            model: i < 3 ? 'gpt-4o' : 'gpt-4o-mini',
          });
          ids.push(body.requestId);
          await post(`${s.url}/api/traces`, body, h);
          await new Promise((r) => setTimeout(r, 3));
        }
        await flushed(s);
        const seen: string[] = [];
        let cursor: string | null = null;
        do {
          const page: { json: { items: Array<{ traceId: string }>; nextCursor: string | null } } = await get(
            `${s.url}/api/traces?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
            h,
          );
          seen.push(...page.json.items.map((t) => t.traceId));
          cursor = page.json.nextCursor;
        } while (cursor);
        expect(seen).to.deep.equal([...ids].reverse());
        const prod = (await get(`${s.url}/api/traces?environment=prod`, h)).json.items.map(
          (t: { traceId: string }) => t.traceId,
        );
        expect(prod).to.deep.equal(['list-5', 'list-3', 'list-1']);
        const model = (await get(`${s.url}/api/traces?model=gpt-4o`, h)).json.items.map(
          (t: { traceId: string }) => t.traceId,
        );
        expect(model).to.deep.equal(['list-2', 'list-1', 'list-0']);
        expect((await get(`${s.url}/api/traces?source=native&status=completed`, h)).json.items).to.have.length(7);
        expect((await get(`${s.url}/api/traces?from=${Date.now() + 60_000}`, h)).json.items).to.have.length(0);
        const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10); // a date: midnight UTC
        expect((await get(`${s.url}/api/traces?from=${tomorrow}`, h)).json.items).to.have.length(0);
        expect((await get(`${s.url}/api/traces?to=${tomorrow}`, h)).json.items).to.have.length(7);
        expect((await get(`${s.url}/api/traces?limit=0`, h)).status).to.equal(400);
      });
    });
  });
}

describe('rate limiting over HTTP', function () {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('duckdb', {
      TRACEGATE_RATE_LIMIT_POINTS: '3',
      TRACEGATE_RATE_LIMIT_WINDOW_SECONDS: '60',
    });
  });
  after(() => s.close());
  it('429 with Retry-After and X-RateLimit-Remaining, per key', async () => {
    const a = { authorization: `Bearer ${(await s.key('rl-a')).key}` };
    const b = { authorization: `Bearer ${(await s.key('rl-b')).key}` };
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await post(`${s.url}/api/traces`, { prompt: 'p' }, a);
      expect(res.status).to.equal(200);
      remaining.push(res.headers.get('x-ratelimit-remaining')!);
    }
    expect(remaining).to.deep.equal(['2', '1', '0']);
    const limited = await post(`${s.url}/api/traces`, { prompt: 'p' }, a);
    expect(limited.status).to.equal(429);
    expect(Number(limited.headers.get('retry-after'))).to.be.within(1, 60);
    expect(limited.headers.get('x-ratelimit-remaining')).to.equal('0');
    expect(limited.json.error.code).to.equal('rate_limited');
    expect((await post(`${s.url}/api/traces`, { prompt: 'p' }, b)).status).to.equal(200);
  });
});

describe('failed authentications per client address', function () {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('duckdb', {
      TRACEGATE_AUTH_FAILURE_LIMIT: '3',
      TRACEGATE_AUTH_FAILURE_WINDOW_SECONDS: '60',
    });
  });
  after(() => s.close());
  it('429 past the limit, one audit record when the limit trips, and a valid key still works from the same address', async () => {
    const bad = { authorization: 'Bearer tg_0123456789abcdef_' + 'B'.repeat(43) };
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await post(`${s.url}/api/traces`, { prompt: 'p' }, bad)).status);
    expect(statuses).to.deep.equal([401, 401, 401, 429, 429, 429]);
    const limited = await post(`${s.url}/api/traces`, { prompt: 'p' }, {});
    expect(limited.status).to.equal(429);
    expect(limited.json.error.code).to.equal('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).to.be.within(1, 60);
    const victim = await s.key('af');
    const good = { authorization: `Bearer ${victim.key}` };
    expect((await post(`${s.url}/api/traces`, { prompt: 'p' }, good)).status).to.equal(200);
    // A throttled address cannot hide attempts on a real key from its workspace: the first one per window is audited there.
    const wrongSecret = { authorization: `Bearer tg_${victim.keyId}_${'C'.repeat(43)}` };
    for (let i = 0; i < 3; i++)
      expect((await post(`${s.url}/api/traces`, { prompt: 'p' }, wrongSecret)).status).to.equal(429);
    await flushed(s);
    const audited = await s.running.storage.listAudit('_system', { action: 'auth.rejected', limit: 100 });
    expect(audited.items.map((i) => JSON.parse(i.details).throttled ?? 'each')).to.have.members([
      'each',
      'each',
      'each',
      'too_many_failures',
    ]);
    const theirs = await s.running.storage.listAudit(victim.workspaceId, { action: 'auth.rejected', limit: 100 });
    expect(
      theirs.items.map((i) => [i.actor, JSON.parse(i.details).reason, JSON.parse(i.details).throttled]),
    ).to.deep.equal([[victim.keyId, 'wrong_secret', 'too_many_failures']]);
  });

  it('a throttled address gets few storage lookups: random key ids are answered 429 unchecked; a known key still works', async () => {
    const victim = await s.key('af-lookups');
    const good = { authorization: `Bearer ${victim.key}` };
    expect((await post(`${s.url}/api/traces`, { prompt: 'p' }, good)).status).to.equal(200); // looked up: cached now
    const storage = s.running.storage as unknown as { getApiKey(id: string): Promise<unknown> };
    const real = storage.getApiKey;
    let lookups = 0;
    storage.getApiKey = function (this: unknown, id: string) {
      lookups++;
      return real.call(this, id);
    };
    try {
      const statuses = new Set<number>();
      for (let i = 0; i < 40; i++) {
        const random = {
          authorization: `Bearer tg_${randomBytes(8).toString('hex')}_${randomBytes(32).toString('base64url').slice(0, 43)}`,
        };
        statuses.add((await post(`${s.url}/api/traces`, { prompt: 'p' }, random)).status);
      }
      expect([...statuses]).to.deep.equal([429]);
      expect(lookups).to.be.at.most(10);
      expect((await post(`${s.url}/api/traces`, { prompt: 'p' }, good)).status).to.equal(200);
    } finally {
      storage.getApiKey = real;
    }
  });
});
