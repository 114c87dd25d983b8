// TRACEGATE_MAX_JSON_VALUES: a body under the byte limit with a million keys used to take 21 s and block the event
// loop for seconds (a /healthz probe waited 5 s); the count is now checked by the byte prescan, before JSON.parse.
// The prescan and parseJson alone: test/unit/native/json-values.test.ts.
import { expect } from 'chai';
import { flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';
import { startFakeResponses, type FakeResponses } from '../support/fake-responses.ts';
import { countValues, withValues } from '../support/json-values.ts';

describe('JSON value count limit', () => {
  describe('native route', function () {
    let s: TestServer;
    let auth: Record<string, string>;
    let wsId: string;
    before(async () => {
      s = await startTestServer('duckdb', { TRACEGATE_MAX_JSON_VALUES: '1000' });
      const k = await s.key('values');
      auth = { authorization: `Bearer ${k.key}` };
      wsId = k.workspaceId;
    });
    after(() => s.close());

    it('413 too_many_values over TRACEGATE_MAX_JSON_VALUES, storing nothing; at the limit it is stored', async () => {
      const over = await post(
        `${s.url}/api/traces`,
        withValues(1001).replace('{"prompt"', '{"requestId":"over","prompt"').replace('"k0":0,', ''),
        auth,
      );
      expect(over.status).to.equal(413);
      expect(over.json.error).to.deep.equal({
        code: 'too_many_values',
        details: { limit: 1000 },
        message:
          'request body has more than 1000 JSON values (objects, arrays, members and elements); send less or split it',
      });
      const atBody = withValues(1000).replace('{"prompt"', '{"requestId":"at","prompt"').replace('"k0":0,', '');
      expect(countValues(JSON.parse(atBody))).to.equal(1000);
      const at = await post(`${s.url}/api/traces`, atBody, auth);
      expect(at.status, at.text).to.equal(200);
      await flushed(s);
      const page = await s.running.storage.listTraces(wsId, { limit: 10 });
      expect(page.items.map((t) => t.traceId)).to.deep.equal(['at']);
    });

    it('counts a batch as a whole', async () => {
      const item = `{"prompt":"p","metadata":{${Array.from({ length: 10 }, (_, i) => `"k${i}":${i}`).join(',')}}}`; // 13 values
      const res = await post(`${s.url}/api/traces`, `[${new Array(77).fill(item).join(',')}]`, auth); // 1 + 77 × 13 = 1002
      expect(res.status).to.equal(413);
      expect(res.json.error.code).to.equal('too_many_values');
    });
  });

  describe('native route, default limit', function () {
    let s: TestServer;
    before(async () => {
      s = await startTestServer('duckdb');
    });
    after(() => s.close());

    it('a 20 MB body of 1.1 million metadata keys is refused at once, and /healthz keeps answering meanwhile', async function () {
      this.timeout(120_000);
      const auth = { authorization: `Bearer ${(await s.key('million')).key}` };
      const body = withValues(1_100_000);
      expect(body.length).to.be.within(15e6, 20 * 1024 * 1024);
      let worst = 0;
      let stop = false;
      const probe = (async () => {
        while (!stop) {
          const t = performance.now();
          expect((await get(`${s.url}/healthz`)).status).to.equal(200);
          worst = Math.max(worst, performance.now() - t);
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      const started = performance.now();
      const res = await post(`${s.url}/api/traces`, body, auth);
      const took = performance.now() - started;
      stop = true;
      await probe;
      expect(res.status).to.equal(413);
      expect(res.json.error).to.include({ code: 'too_many_values' });
      expect(res.json.error.details).to.deep.equal({ limit: 250_000 });
      // It used to take 21 s, with the event loop blocked for 5 s. (Sending 20 MB from this same process counts too.)
      expect(took).to.be.below(5000);
      expect(worst).to.be.below(2000);
    });
  });

  describe('proxy route', function () {
    let s: TestServer;
    let fake: FakeResponses;
    before(async () => {
      fake = await startFakeResponses();
      s = await startTestServer('duckdb', {
        TRACEGATE_PROVIDER_BASE_URL: fake.url,
        TRACEGATE_PROVIDER_API_KEY: 'sk-fake',
        TRACEGATE_MAX_JSON_VALUES: '1000',
      });
    });
    after(async () => {
      await s.close();
      await fake.close();
    });

    it("413 too_many_values in the provider's error shape, before anything is forwarded", async () => {
      const auth = { authorization: `Bearer ${(await s.key('proxy-values')).key}` };
      const input = Array.from({ length: 300 }, () => ({ role: 'user', content: 'hi' })); // 1 + 2 + 1 + 300 × 3 = 904 … plus metadata
      const body = {
        model: 'gpt-4o-mini',
        input,
        metadata: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, 'v'])),
      };
      expect(countValues(body)).to.equal(1 + 1 + 1 + 300 * 3 + 1 + 100);
      const before = fake.requests.length;
      const res = await post(`${s.url}/api/proxy/provider/responses`, body, auth);
      expect(res.status).to.equal(413);
      expect(res.json).to.deep.equal({
        error: {
          message:
            'request body has more than 1000 JSON values (objects, arrays, members and elements); send less or split it',
          type: 'tracegate_error',
          param: null,
          code: 'too_many_values',
        },
      });
      expect(fake.requests.length).to.equal(before);
      body.input = input.slice(0, 250);
      const ok = await post(`${s.url}/api/proxy/provider/responses`, body, auth);
      expect(ok.status, ok.text).to.equal(200);
      expect(fake.requests.length).to.equal(before + 1);
    });
  });
});
