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
    after(async () => {
      await s?.close();
    });

    const findings = async (id: string) =>
      (await get(`${s.url}/api/findings?traceId=${id}`, auth)).json.items as Array<{
        rule: string;
        field: string;
        start: number;
      }>;
    const policy = async (id: string) =>
      (await get(`${s.url}/api/traces/${id}`, auth)).json.trace.policy as Array<{
        decision: string;
        reasons: Array<{ message: string }>;
      }>;

    it('native: findings and the decision are those of the newest version, also when it has none', async () => {
      const id = `redeliver-${backend}`;
      for (const prompt of ['mail john.doe@example.com', 'hello mail john.doe@example.com']) {
        expect(
          (await post(`${s.url}/api/traces`, { requestId: id, prompt, response: 'ok', model: 'gpt-4o-mini' }, auth))
            .status,
        ).to.equal(200);
        await flushed(s);
        await sleep(5);
      }
      expect((await findings(id)).map((f) => [f.rule, f.field, f.start])).to.deep.equal([['pii.email', 'prompt', 11]]);
      expect((await policy(id)).map((p) => p.decision)).to.deep.equal(['flag']);
      // Without the address: no finding, and the decision is allow (the span has a prompt, so it has a record).
      expect(
        (
          await post(
            `${s.url}/api/traces`,
            { requestId: id, prompt: 'hello', response: 'ok', model: 'gpt-4o-mini' },
            auth,
          )
        ).status,
      ).to.equal(200);
      await flushed(s);
      expect(await findings(id)).to.deep.equal([]);
      expect((await policy(id)).map((p) => p.decision)).to.deep.equal(['allow']);
    });

    it("a clean span's allow is listed from the version on the span (no record); a client cannot forge one", async () => {
      const id = `clean-${backend}`;
      const sent = await post(
        `${s.url}/api/traces`,
        [
          { requestId: id, prompt: 'hello', response: 'ok', model: 'gpt-4o-mini' },
          // no text (so no decision), and a client field in tracegate's attribute namespace
          { requestId: `${id}-forged`, model: 'gpt-4o-mini', 'tracegate.policy_version': 9 },
        ],
        auth,
      );
      expect(sent.status, sent.text).to.equal(200);
      await flushed(s);
      const trace = (await get(`${s.url}/api/traces/${id}`, auth)).json.trace;
      const version = (await get(`${s.url}/api/policy`, auth)).json.policy.version as number;
      expect(trace.policy).to.deep.equal([
        {
          spanId: trace.spans[0].spanId,
          policyVersion: version,
          decision: 'allow',
          reasons: [],
          createdAtMs: trace.policy[0].createdAtMs,
        },
      ]);
      expect(trace.spans[0].attributes['tracegate.policy_version']).to.equal(version);
      const forged = (await get(`${s.url}/api/traces/${id}-forged`, auth)).json.trace;
      expect(forged.spans[0].attributes).to.include({ 'client.tracegate.policy_version': 9 });
      expect(forged.spans[0].attributes).to.not.have.property('tracegate.policy_version');
      expect(forged.policy).to.deep.equal([]);
    });

    it('the same content delivered 20 times at once: one finding and one decision, as for one delivery', async () => {
      const id = `redeliver-same-${backend}`;
      const sent = await Promise.all(
        Array.from({ length: 20 }, () =>
          post(`${s.url}/api/traces`, { requestId: id, prompt: 'mail john.doe@example.com', response: 'ok' }, auth),
        ),
      );
      expect(sent.map((r) => r.status)).to.deep.equal(Array(20).fill(200));
      await flushed(s);
      expect((await findings(id)).map((f) => [f.rule, f.start])).to.deep.equal([['pii.email', 5]]);
      expect((await policy(id)).map((p) => p.decision)).to.deep.equal(['flag']);
    });

    it('the workspace-wide list shows the findings of stored versions only, across pages, filled past dropped ones', async () => {
      const wide = { authorization: `Bearer ${(await s.key('redeliver-wide')).key}` };
      const send = async (requestId: string, prompt: string) => {
        expect(
          (await post(`${s.url}/api/traces`, { requestId, prompt, response: 'ok', model: 'gpt-4o-mini' }, wide)).status,
        ).to.equal(200);
        await flushed(s);
        await sleep(5);
      };
      // Newest first, storage holds: x (moved), z, x's three earlier findings, y, w's five earlier findings.
      await send('w', 'a@example.com b@example.com c@example.com d@example.com e@example.com');
      await send('y', 'mail y@example.com');
      await send('x', 'one@example.com two@example.com three@example.com');
      await send('z', 'write to z@example.com');
      await send('x', 'now only at the end: two@example.com');
      await send('w', 'no address any more');
      type Item = { traceId: string; start: number; rule: string };
      const list = async (query: string) =>
        (await get(`${s.url}/api/findings?${query}`, wide)).json as { items: Item[]; nextCursor: string | null };
      const current = [
        ['x', 21],
        ['z', 9],
        ['y', 5],
      ];
      const all = await list('limit=1000');
      expect(all.items.map((f) => [f.traceId, f.start])).to.deep.equal(current);
      expect(all.nextCursor).to.equal(null);
      // A full page although dropped findings lie between the current ones.
      const first = await list('limit=3');
      expect(first.items.map((f) => [f.traceId, f.start])).to.deep.equal(current);
      // w's earlier findings follow: the next page is empty, and the last.
      expect(await list(`limit=3&cursor=${encodeURIComponent(first.nextCursor!)}`)).to.deep.equal({
        items: [],
        nextCursor: null,
      });
      for (const [limit, filter] of [
        [1, ''],
        [2, ''],
        [1, '&detector=pii&category=email'],
        [2, '&category=none'],
      ] as const) {
        const seen: Item[] = [];
        let cursor: string | null = null;
        let short = 0;
        for (let n = 0; n < 20; n++) {
          const page = await list(`limit=${limit}${filter}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
          expect(page.items.length).to.be.at.most(limit);
          if (page.items.length < limit && page.nextCursor) short++;
          seen.push(...page.items);
          cursor = page.nextCursor;
          if (!cursor) break;
        }
        expect(cursor, `limit ${limit}${filter}`).to.equal(null);
        // One page at a time, w's five are more than the reads of one answer: an empty page whose cursor goes on.
        if (limit === 1 && filter === '') expect(short).to.equal(1);
        expect(
          seen.map((f) => [f.traceId, f.start]),
          `limit ${limit}${filter}`,
        ).to.deep.equal(filter === '&category=none' ? [] : current);
      }
    });

    it('OTLP: a span sent again without its messages has no decision left', async () => {
      const traceId = backend === 'duckdb' ? '5b8efff798038103d269b633813fc60c' : '5b8efff798038103d269b633813fc60d';
      const span = (attrs: Array<{ key: string; value: { stringValue: string } }>) => ({
        resourceSpans: [
          {
            resource: { attributes: [] },
            scopeSpans: [
              {
                scope: { name: 't' },
                spans: [
                  {
                    traceId,
                    spanId: 'eee19b7ec3c1b174',
                    name: 'chat',
                    kind: 3,
                    startTimeUnixNano: '1700000000000000000',
                    endTimeUnixNano: '1700000001000000000',
                    attributes: [{ key: 'gen_ai.operation.name', value: { stringValue: 'chat' } }, ...attrs],
                  },
                ],
              },
            ],
          },
        ],
      });
      const messages = [
        {
          key: 'gen_ai.input.messages',
          value: {
            stringValue: JSON.stringify([
              { role: 'user', parts: [{ type: 'text', content: 'mail jane@example.org' }] },
            ]),
          },
        },
      ];
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
