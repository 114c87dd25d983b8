// A span delivered again with other content: its findings and policy decision follow the stored version.
import { expect } from 'chai';
import { BACKENDS, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const backend of BACKENDS) {
  describe(`re-delivered spans with other content (${backend})`, function () {
    let s: TestServer;
    let auth: Record<string, string>;
    before(async () => {
      s = await startTestServer(backend);
      auth = { authorization: `Bearer ${(await s.key('redeliver')).key}` };
    });
    after(async () => { await s?.close(); });

    const findings = async (id: string) => (await get(`${s.url}/api/findings?traceId=${id}`, auth)).json.items as Array<{ rule: string; field: string; start: number }>;
    const policy = async (id: string) => (await get(`${s.url}/api/traces/${id}`, auth)).json.trace.policy as Array<{ decision: string; reasons: Array<{ message: string }> }>;

    it('native: findings and the decision are those of the newest version, also when it has none', async () => {
      const id = `redeliver-${backend}`;
      for (const prompt of ['mail john.doe@example.com', 'hello mail john.doe@example.com']) {
        expect((await post(`${s.url}/api/traces`, { requestId: id, prompt, response: 'ok', model: 'gpt-4o-mini' }, auth)).status).to.equal(200);
        await flushed(s);
        await sleep(5);
      }
      expect((await findings(id)).map((f) => [f.rule, f.field, f.start])).to.deep.equal([['pii.email', 'prompt', 11]]);
      expect((await policy(id)).map((p) => p.decision)).to.deep.equal(['flag']);
      // Without the address: no finding, and the decision is allow (the span has a prompt, so it has a record).
      expect((await post(`${s.url}/api/traces`, { requestId: id, prompt: 'hello', response: 'ok', model: 'gpt-4o-mini' }, auth)).status).to.equal(200);
      await flushed(s);
      expect(await findings(id)).to.deep.equal([]);
      expect((await policy(id)).map((p) => p.decision)).to.deep.equal(['allow']);
    });

    it('the same content delivered 20 times at once: one finding and one decision, as for one delivery', async () => {
      const id = `redeliver-same-${backend}`;
      const sent = await Promise.all(Array.from({ length: 20 }, () => post(`${s.url}/api/traces`, { requestId: id, prompt: 'mail john.doe@example.com', response: 'ok' }, auth)));
      expect(sent.map((r) => r.status)).to.deep.equal(Array(20).fill(200));
      await flushed(s);
      expect((await findings(id)).map((f) => [f.rule, f.start])).to.deep.equal([['pii.email', 5]]);
      expect((await policy(id)).map((p) => p.decision)).to.deep.equal(['flag']);
    });

    it('OTLP: a span sent again without its messages has no decision left', async () => {
      const traceId = backend === 'duckdb' ? '5b8efff798038103d269b633813fc60c' : '5b8efff798038103d269b633813fc60d';
      const span = (attrs: Array<{ key: string; value: { stringValue: string } }>) => ({
        resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ scope: { name: 't' }, spans: [{
          traceId, spanId: 'eee19b7ec3c1b174', name: 'chat', kind: 3, startTimeUnixNano: '1700000000000000000', endTimeUnixNano: '1700000001000000000',
          attributes: [{ key: 'gen_ai.operation.name', value: { stringValue: 'chat' } }, ...attrs],
        }] }] }],
      });
      const messages = [{ key: 'gen_ai.input.messages', value: { stringValue: JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'mail jane@example.org' }] }]) } }];
      expect((await post(`${s.url}/v1/traces`, span(messages), auth)).status).to.equal(200);
      await flushed(s);
      expect((await policy(traceId)).map((p) => p.decision)).to.deep.equal(['flag']);
      expect((await findings(traceId)).length).to.be.greaterThan(0);
      await sleep(5);
      expect((await post(`${s.url}/v1/traces`, span([]), auth)).status).to.equal(200);
      await flushed(s);
      expect(await policy(traceId)).to.deep.equal([]);
      expect(await findings(traceId)).to.deep.equal([]);
    });
  });
}
