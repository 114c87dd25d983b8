// Proxy traces keep the string limits the other routes keep: label headers over 256 characters are refused before
// anything is forwarded (they used to be stored at 10,000 characters), and the stored prompt and response are cut
// to TRACEGATE_MAX_STRING_BYTES and marked in tracegate.truncated, while the provider still gets the whole request.
// The mapper's cut alone: test/unit/proxy/proxy-limits.test.ts.
import { expect } from 'chai';
import { flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';
import { startFakeResponses, type FakeResponses } from '../support/fake-responses.ts';

const PATH = '/api/proxy/provider/responses';

describe('proxy string limits', function () {
  let fake: FakeResponses;
  let s: TestServer;
  let auth: Record<string, string>;
  let wsId: string;
  before(async () => {
    fake = await startFakeResponses();
    s = await startTestServer('duckdb', {
      TRACEGATE_PROVIDER_BASE_URL: fake.url,
      TRACEGATE_PROVIDER_API_KEY: 'sk-fake',
      TRACEGATE_MAX_STRING_BYTES: '64',
    });
    const k = await s.key('proxy-limits');
    auth = { authorization: `Bearer ${k.key}` };
    wsId = k.workspaceId;
  });
  after(async () => {
    await s.close();
    await fake.close();
  });

  async function stored(traceId: string) {
    await flushed(s);
    const res = await get(`${s.url}/api/traces/${traceId}`, auth);
    expect(res.status, res.text).to.equal(200);
    return res.json.trace.spans[0];
  }

  for (const [header, name] of [
    ['x-tracegate-environment', 'X-Tracegate-Environment'],
    ['x-tracegate-action', 'X-Tracegate-Action'],
  ] as const) {
    it(`400 in the provider's shape for ${name} over 256 characters, before anything is forwarded or stored`, async () => {
      const forwarded = fake.requests.length;
      const before = (await s.running.storage.listTraces(wsId, { limit: 1000 })).items.length;
      for (const length of [257, 10_000]) {
        const res = await post(
          `${s.url}${PATH}`,
          { model: 'gpt-4o-mini', input: 'hi' },
          { ...auth, [header]: 'e'.repeat(length) },
        );
        expect(res.status).to.equal(400);
        expect(res.json).to.deep.equal({
          error: {
            message: `${name} is ${length} characters long; the limit is 256`,
            type: 'invalid_request_error',
            param: name,
            code: 'invalid_header',
          },
        });
        expect(res.headers.get('x-trace-id')).to.equal(null);
      }
      expect(fake.requests.length).to.equal(forwarded);
      await flushed(s);
      expect((await s.running.storage.listTraces(wsId, { limit: 1000 })).items.length).to.equal(before);

      // 256 is the limit itself: forwarded and stored as sent.
      const ok = await post(
        `${s.url}${PATH}`,
        { model: 'gpt-4o-mini', input: 'hi' },
        { ...auth, [header]: 'e'.repeat(256) },
      );
      expect(ok.status, ok.text).to.equal(200);
      const sp = await stored(ok.headers.get('x-trace-id')!);
      expect(sp[header === 'x-tracegate-environment' ? 'environment' : 'actionName']).to.equal('e'.repeat(256));
    });
  }

  it('stores the prompt and response cut to TRACEGATE_MAX_STRING_BYTES, marked in tracegate.truncated; the provider gets it all', async () => {
    const input = 'a'.repeat(4096);
    const res = await post(`${s.url}${PATH}`, { model: 'gpt-4o-mini', input }, auth);
    expect(res.status, res.text).to.equal(200);
    expect(fake.requests.at(-1)!.body.input).to.equal(input);
    const answer = res.json.output[0].content[0].text as string;
    expect(answer.length).to.be.greaterThan(64);
    const sp = await stored(res.headers.get('x-trace-id')!);
    expect(sp.prompt).to.equal('a'.repeat(64));
    expect(sp.response).to.equal(answer.slice(0, 64));
    expect(sp.attributes['tracegate.truncated']).to.deep.equal(['tracegate.prompt', 'tracegate.response']);
  });

  it('cuts a streamed answer the same way, and never inside a UTF-8 character', async () => {
    const input = '\u20ac'.repeat(2000); // 3 bytes each: 21 fit in 64
    const res = await fetch(`${s.url}${PATH}`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', input, stream: true }),
    });
    expect(res.status).to.equal(200);
    const events = await res.text();
    expect(events).to.include('response.completed');
    expect(fake.requests.at(-1)!.body.input).to.equal(input);
    const sp = await stored(res.headers.get('x-trace-id')!);
    expect(sp.prompt).to.equal('\u20ac'.repeat(21));
    expect(Buffer.byteLength(sp.response)).to.be.at.most(64);
    expect(sp.attributes['tracegate.truncated']).to.deep.equal(['tracegate.prompt', 'tracegate.response']);
  });

  it('short texts are stored whole and unmarked', async () => {
    const res = await post(`${s.url}${PATH}`, { model: 'gpt-4o-mini', input: 'hi', metadata: { fake: 'tool' } }, auth);
    expect(res.status, res.text).to.equal(200);
    const sp = await stored(res.headers.get('x-trace-id')!);
    expect(sp.prompt).to.equal('hi');
    expect(sp.attributes).to.not.have.property('tracegate.truncated');
  });
});
