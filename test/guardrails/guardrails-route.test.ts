// POST /api/integrations/provider-guardrails over real HTTP on both engines, with @openai/guardrails running its
// non-LLM checks (Contains PII, URL Filter, Keyword Filter) on real text in-process, and its GuardrailsOpenAI client
// calling the fake provider through tracegate's proxy: the results posted in every shape, linked by trace id,
// response id and request id, or to a trace of their own; blocked content masked by default; tripwires as findings
// and alerts.
import { expect } from 'chai';
import { type GuardrailResult, GuardrailsOpenAI, GuardrailTripwireTriggered, runGuardrails } from '@openai/guardrails';
import { Agent, type InputGuardrail, OpenAIProvider, Runner, withTrace } from '@openai/agents';
import OpenAI from 'openai';
import type { SettingsDoc } from '../../collector/workspaces/settings.ts';
import { storageUnreachable } from '../../core/errors.ts';
import { startFakeResponses, type FakeResponses } from '../support/fake-responses.ts';
import { flushed, get, post, startTestServer, type Backend, type TestServer } from '../support/server.ts';

const ROUTE = '/api/integrations/provider-guardrails';
const EMAIL = 'jane.doe@corp.io';
const TEXT = `Mail ${EMAIL} or call 555-123-4567 about the refund; see https://evil.test/x and https://example.com/ok`;

/** The three non-LLM checks, as a Guardrails bundle (its config schema wants every field). */
const CHECKS = {
  pii: {
    name: 'Contains PII',
    config: { entities: ['EMAIL_ADDRESS', 'PHONE_NUMBER'], block: true, detect_encoded_pii: false },
  },
  url: {
    name: 'URL Filter',
    config: {
      url_allow_list: ['example.com'],
      allowed_schemes: ['https'],
      block_userinfo: true,
      allow_subdomains: false,
    },
  },
  keywords: { name: 'Keyword Filter', config: { keywords: ['refund'] } },
};

/** What Python's dataclasses.asdict(GuardrailResult) gives (original_exception None). */
const asPython = (r: GuardrailResult) => ({
  tripwire_triggered: r.tripwireTriggered,
  execution_failed: r.executionFailed ?? false,
  original_exception: null,
  info: r.info,
});

for (const backend of ['duckdb', 'clickhouse'] as Backend[]) {
  describe(`guardrails route: ${ROUTE} (${backend})`, function () {
    let fake: FakeResponses;
    let s: TestServer;
    let key: string;
    let workspaceId: string;
    let auth: Record<string, string>;
    let results: GuardrailResult[];

    before(async () => {
      fake = await startFakeResponses();
      s = await startTestServer(backend, {
        TRACEGATE_PROVIDER_BASE_URL: fake.url,
        TRACEGATE_PROVIDER_API_KEY: 'sk-fake',
      });
      ({ key, workspaceId } = await s.key());
      auth = { authorization: `Bearer ${key}` };
      results = await runGuardrails(TEXT, { version: 1, guardrails: [CHECKS.pii, CHECKS.url, CHECKS.keywords] }, {});
      expect(results.map((r) => r.tripwireTriggered)).to.deep.equal([true, true, true]);
    });
    after(async () => {
      await s?.close();
      await fake?.close();
    });

    const read = async (traceId: string, as = auth) => {
      await flushed(s);
      return (await get(`${s.url}/api/traces/${traceId}`, as)).json.trace;
    };
    /** Every stored byte of the workspace's traces, as the reads answer them. */
    const everything = async (traceIds: string[]) =>
      JSON.stringify(await Promise.all(traceIds.map((t) => s.running.storage.getTrace(workspaceId, t))));

    it('the guardrail_results of a wrapped response (GuardrailsOpenAI through the proxy): linked to the proxied call', async () => {
      const client = await GuardrailsOpenAI.create(
        {
          version: 1,
          pre_flight: { version: 1, guardrails: [{ ...CHECKS.pii, config: { ...CHECKS.pii.config, block: false } }] },
          input: { version: 1, guardrails: [{ name: 'Keyword Filter', config: { keywords: ['bomb'] } }] },
          output: { version: 1, guardrails: [CHECKS.url] },
        },
        { apiKey: key, baseURL: `${s.url}/api/proxy/provider`, maxRetries: 0 },
      );
      const response = await client.guardrails.responses.create({ model: 'gpt-4o-mini', input: `Mail ${EMAIL} now` });
      // The whole wrapped response, as JSON.stringify gives it: its id is the link.
      const res = await post(`${s.url}${ROUTE}`, JSON.parse(JSON.stringify(response)), auth);
      expect(res.status, res.text).to.equal(200);
      expect(res.json.linkedBy).to.equal('response');
      expect(res.json.spans.map((x: any) => [x.guardrailName, x.stage, x.tripwireTriggered])).to.deep.equal([
        ['Contains PII', 'pre_flight', false],
        ['Keyword Filter', 'input', false],
        ['URL Filter', 'output', false],
      ]);
      const trace = await read(res.json.traceId);
      const proxySpan = trace.spans.find((x: any) => x.source === 'proxy');
      expect(proxySpan.attributes['gen_ai.response.id']).to.equal(response.id);
      const guards = trace.spans.filter((x: any) => x.kind === 'guardrail');
      expect(guards).to.have.length(3);
      for (const g of guards) expect(g.parentSpanId).to.equal(proxySpan.spanId);
      const pii = guards.find((g: any) => g.name === 'Contains PII');
      // The detected address is kept masked only; the checked text as a masked preview.
      expect(pii.attributes['guardrail.info'].detected_entities).to.deep.equal({ EMAIL_ADDRESS: ['j***@c***.io'] });
      expect(pii.prompt).to.equal('Mail <EMAIL_ADDRESS> now');
      expect(pii.attributes['guardrail.text']).to.equal('preview');
      expect(await everything([res.json.traceId])).to.not.contain(EMAIL);
      // Replayed: the same spans, nothing twice.
      const again = await post(`${s.url}${ROUTE}`, JSON.parse(JSON.stringify(response)), auth);
      expect(again.json.spans).to.deep.equal(res.json.spans);
      expect((await read(res.json.traceId)).spans).to.have.length(4);
    });

    it('raw JS results as an array: a trace of their own; { results } with a request id: linked to that call', async () => {
      const alone = await post(`${s.url}${ROUTE}`, results, auth);
      expect(alone.status, alone.text).to.equal(200);
      expect(alone.json).to.include({ linkedBy: 'none', tripwiresTriggered: 3 });
      expect(alone.json.traceId).to.match(/^[0-9a-f]{32}$/);
      // A result the runtime gave no name keeps its place, as "unnamed".
      expect(alone.json.spans.map((x: any) => x.guardrailName)).to.deep.equal([
        'Contains PII',
        'URL Filter',
        'unnamed',
      ]);
      const own = await read(alone.json.traceId);
      expect(own.spans).to.have.length(3);
      expect(own.guardrails.every((g: any) => g.tripped)).to.equal(true);

      const openai = new OpenAI({ apiKey: key, baseURL: `${s.url}/api/proxy/provider`, maxRetries: 0 });
      const { request_id: requestId } = await openai.responses
        .create({ model: 'gpt-4o-mini', input: 'hello' })
        .withResponse();
      expect(requestId).to.match(/^req_/);
      const linked = await post(`${s.url}${ROUTE}`, { requestId, stage: 'output', results }, auth);
      expect(linked.json.linkedBy).to.equal('request');
      const trace = await read(linked.json.traceId);
      const proxySpan = trace.spans.find((x: any) => x.source === 'proxy');
      expect(proxySpan.requestId).to.equal(requestId);
      const guards = trace.spans.filter((x: any) => x.kind === 'guardrail');
      expect(guards.map((g: any) => [g.attributes['guardrail.stage'], g.parentSpanId])).to.deep.equal([
        ['output', proxySpan.spanId],
        ['output', proxySpan.spanId],
        ['output', proxySpan.spanId],
      ]);
      // Blocked URLs and PII are masked wherever they were; the reasons keep their words.
      const url = guards.find((g: any) => g.name === 'URL Filter');
      for (const reason of url.attributes['guardrail.info'].blocked_reasons)
        expect(reason).to.match(/^\[REDACTED:\w+\]: Not in allow list$/);
      expect(url.attributes['guardrail.info'].blocked[0]).to.match(/…\(19\)$/);
      expect(await everything([alone.json.traceId, linked.json.traceId])).to.not.contain('evil.test');
    });

    it('Python results (tripwire_triggered, execution_failed) into an agent trace, under its span', async () => {
      const traceId = 'trace_0123456789abcdef0123456789abcdef';
      const body = {
        trace_id: traceId,
        span_id: 'span_0123456789abcdef01234567',
        stage: 'input',
        results: results.map(asPython),
      };
      const res = await post(`${s.url}${ROUTE}`, body, auth);
      expect(res.status, res.text).to.equal(200);
      expect(res.json).to.include({ traceId, linkedBy: 'trace' });
      const trace = await read(traceId);
      expect(trace.spans.map((x: any) => x.parentSpanId)).to.deep.equal(Array(3).fill('span_0123456789abcdef01234567'));
      expect(trace.spans.map((x: any) => x.attributes['guardrail.stage'])).to.deep.equal(['input', 'input', 'input']);
    });

    it('the Agents SDK result shape, from a real run whose input guardrail runs the Guardrails checks', async () => {
      const openAIClient = new OpenAI({ apiKey: key, baseURL: `${s.url}/api/proxy/provider`, maxRetries: 0 });
      const runner = new Runner({
        modelProvider: new OpenAIProvider({ openAIClient, useResponses: true }),
        tracingDisabled: true,
      });
      const guard: InputGuardrail = {
        name: 'Guardrails checks',
        execute: async ({ input }) => {
          const text = typeof input === 'string' ? input : JSON.stringify(input);
          const checked = await runGuardrails(text, { version: 1, guardrails: [CHECKS.keywords] }, {});
          return { outputInfo: checked[0]!.info, tripwireTriggered: checked.some((c) => c.tripwireTriggered) };
        },
      };
      const agent = new Agent({
        name: 'Helper',
        instructions: 'Help.',
        model: 'gpt-4o-mini',
        inputGuardrails: [guard],
      });
      let traceId = '';
      const result = await withTrace('Helper run', async (t) => {
        traceId = t.traceId;
        return runner.run(agent, 'When does the store open?');
      });
      const res = await post(
        `${s.url}${ROUTE}`,
        { traceId, results: JSON.parse(JSON.stringify(result.inputGuardrailResults)) },
        auth,
      );
      expect(res.status, res.text).to.equal(200);
      expect(res.json.spans).to.deep.equal([
        {
          spanId: res.json.spans[0].spanId,
          parentSpanId: '',
          guardrailName: 'Guardrails checks',
          stage: 'input',
          tripwireTriggered: false,
          executionFailed: false,
        },
      ]);
      const [span] = (await read(traceId)).spans;
      expect(span.attributes['guardrail.info']).to.include({ textLength: 'When does the store open?'.length });
    });

    it('a tripped wire: a finding, an alert, the trace read marks it', async () => {
      await s.running.settings.update(
        workspaceId,
        (doc: SettingsDoc) =>
          ({
            ...doc,
            alertRules: [{ id: 'tripwires', kind: 'guardrail', severity: 'critical', windowSeconds: 60 }],
          }) as SettingsDoc,
      );
      const client = await GuardrailsOpenAI.create(
        { version: 1, output: { version: 1, guardrails: [CHECKS.url] } },
        { apiKey: key, baseURL: `${s.url}/api/proxy/provider`, maxRetries: 0 },
      );
      const err = await client.guardrails.responses
        .create({ model: 'gpt-4o-mini', input: 'Repeat https://evil.test/x' })
        .then(
          () => null,
          (e: unknown) => e,
        );
      expect(err).to.be.instanceOf(GuardrailTripwireTriggered);
      const res = await post(`${s.url}${ROUTE}`, (err as GuardrailTripwireTriggered).guardrailResult, auth);
      expect(res.status, res.text).to.equal(200);
      expect(res.json).to.include({ linkedBy: 'none', tripwiresTriggered: 1 });
      const trace = await read(res.json.traceId);
      expect(trace.guardrails).to.deep.equal([
        {
          spanId: res.json.spans[0].spanId,
          name: 'URL Filter',
          stage: 'output',
          tripped: true,
          executionFailed: false,
        },
      ]);
      const findings = await get(`${s.url}/api/findings?traceId=${res.json.traceId}&detector=guardrail`, auth);
      expect(findings.json.items).to.have.length(1);
      expect(findings.json.items[0]).to.include({
        rule: 'guardrail.url_filter',
        category: 'guardrail_tripwire',
        severity: 'high',
        preview: 'URL Filter (output) tripped',
      });
      const alerts = await get(`${s.url}/api/alerts?kind=guardrail`, auth);
      expect(alerts.json.items.map((a: any) => [a.ruleId, a.traceId])).to.deep.include(['tripwires', res.json.traceId]);
    });

    it('an LLM-based check: its token usage is a model call, counted in usage and cost', async () => {
      const body = {
        source: 'openai-guardrails-python',
        sdkVersion: '0.3.6',
        occurredAt: '2026-03-01T10:00:00.250000+00:00',
        results: [
          {
            guardrailName: 'Jailbreak',
            stage: 'input',
            tripwireTriggered: false,
            model: 'gpt-4.1-mini',
            tokenUsage: { prompt_tokens: 420, completion_tokens: 18, total_tokens: 438 },
            info: { flagged: false, confidence: 0.08, threshold: 0.7 },
          },
        ],
      };
      const res = await post(`${s.url}${ROUTE}`, body, auth);
      expect(res.status, res.text).to.equal(200);
      const trace = await read(res.json.traceId);
      const check = trace.spans.find((x: any) => x.kind === 'llm');
      expect(check).to.include({ name: 'Jailbreak check', model: 'gpt-4.1-mini', promptTokens: 420, totalTokens: 438 });
      expect(check.parentSpanId).to.equal(res.json.spans[0].spanId);
      expect(check.costUsd).to.be.greaterThan(0);
      expect(trace.summary.totalTokens).to.equal(438);
      expect(check.startTimeNs).to.equal('1772359200250000000');
      const usage = await get(
        `${s.url}/api/analytics/usage?groupBy=source&bucket=day&from=2026-03-01&to=2026-03-02`,
        auth,
      );
      const row = usage.json.rows.find((x: any) => x.key === 'guardrails');
      expect(row).to.include({ requests: 1, totalTokens: 438 });
    });

    it('the workspace policy keeps guardrail text clear or leaves it out (guardrailText)', async () => {
      const other = await s.key();
      const h = { authorization: `Bearer ${other.key}` };
      const policy = (guardrailText: string) =>
        s.running.settings.update(
          other.workspaceId,
          (doc: SettingsDoc) =>
            ({
              ...doc,
              policy: { version: 2, guardrailText } as SettingsDoc['policy'],
            }) as SettingsDoc,
        );
      const body = {
        results: [
          { guardrailName: 'Contains PII', tripwireTriggered: true, checkedText: TEXT, info: results[0]!.info },
        ],
      };
      await policy('clear');
      const clear = await post(`${s.url}${ROUTE}`, { ...body, stage: 'clear' }, h);
      await policy('omit');
      const omit = await post(`${s.url}${ROUTE}`, { ...body, stage: 'omit' }, h);
      await flushed(s);
      const [c] = await s.running.storage.getTrace(other.workspaceId, clear.json.traceId);
      expect(c!.prompt).to.equal(TEXT);
      expect((c!.attributes['guardrail.info'] as any).detected_entities.EMAIL_ADDRESS).to.deep.equal([EMAIL]);
      const [o] = await s.running.storage.getTrace(other.workspaceId, omit.json.traceId);
      expect(o!.prompt).to.equal('');
      expect(o!.attributes).to.include({ 'guardrail.text': 'omit', 'guardrail.checked_text_length': TEXT.length });
      expect((o!.attributes['guardrail.info'] as any).detected_entities.EMAIL_ADDRESS).to.deep.equal(['[omitted](16)']);
    });

    it('workspaces are isolated: a response id of another workspace is no link', async () => {
      const openai = new OpenAI({ apiKey: key, baseURL: `${s.url}/api/proxy/provider`, maxRetries: 0 });
      const response = await openai.responses.create({ model: 'gpt-4o-mini', input: 'hi' });
      const other = await s.key();
      const res = await post(
        `${s.url}${ROUTE}`,
        { responseId: response.id, results: [results[2]] },
        {
          authorization: `Bearer ${other.key}`,
        },
      );
      expect(res.json.linkedBy).to.equal('none');
      expect((await get(`${s.url}/api/traces/${res.json.traceId}`, auth)).status).to.equal(404);
    });

    it('auth: refused without a key (401)', async () => {
      expect((await post(`${s.url}${ROUTE}`, results)).status).to.equal(401);
    });

    describe('malformed: 400 naming the field, nothing stored', () => {
      const cases: Array<[string, unknown, string]> = [
        ['a string body', '"hi"', '(body)'],
        ['results not an array', { results: { a: 1 } }, 'results'],
        ['no results', { results: [] }, '(body)'],
        ['a result that is not an object', [true], '0'],
        ['a result without a tripwire', [{ info: {} }], '0.tripwireTriggered'],
        ['tripwire_triggered not a boolean', [{ tripwire_triggered: 'yes' }], '0.tripwire_triggered'],
        ['a stage with spaces', { results: [{ tripwireTriggered: true, stage: 'pre flight' }] }, 'results.0.stage'],
        ['info not an object', { results: [{ tripwireTriggered: true, info: [1] }] }, 'results.0.info'],
        [
          'token usage as text',
          { results: [{ tripwireTriggered: true, tokenUsage: { total_tokens: 'many' } }] },
          'results.0.tokenUsage.total_tokens',
        ],
        ['a bundle stage not a list', { guardrail_results: { input: {} } }, 'guardrail_results.input'],
        ['a bad result in a bundle', { preflight: [{ tripwireTriggered: 1 }] }, 'preflight.0.tripwireTriggered'],
        [
          'an Agents SDK output without its tripwire',
          { guardrail: { name: 'g' }, output: { outputInfo: {} } },
          'tripwireTriggered',
        ],
        ['occurredAt not a time', { occurredAt: 'now', results: [{ tripwireTriggered: true }] }, 'occurredAt'],
        ['a response id with spaces', { responseId: 'resp 1', results: [{ tripwireTriggered: true }] }, 'responseId'],
        [
          'a trace id over 256 characters',
          { traceId: 't'.repeat(257), results: [{ tripwireTriggered: true }] },
          'traceId',
        ],
      ];
      for (const [what, body, field] of cases) {
        it(what, async () => {
          await flushed(s); // what earlier tests stored is counted before
          const before = await s.running.storage.countSpans(workspaceId);
          const res = await post(`${s.url}${ROUTE}`, body, auth);
          expect(res.status, res.text).to.equal(400);
          expect(res.json.error.code).to.equal('validation_failed');
          expect(
            res.json.error.details.map((d: any) => d.field),
            res.text,
          ).to.include(field);
          await flushed(s);
          expect(await s.running.storage.countSpans(workspaceId)).to.equal(before);
        });
      }
    });

    it('storage out while looking up a link: 503 with Retry-After', async () => {
      const storage = s.running.storage as unknown as Record<string, unknown>;
      storage.proxyCalls = async () => {
        throw storageUnreachable('storage unreachable (test)');
      };
      try {
        const res = await post(`${s.url}${ROUTE}`, { responseId: 'resp_unknown_1', results: [results[2]] }, auth);
        expect(res.status, res.text).to.equal(503);
        expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
      } finally {
        delete storage.proxyCalls;
      }
    });
  });
}

describe('guardrails route: enrichment off (duckdb)', function () {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('duckdb', { TRACEGATE_ENRICHMENT: 'false' });
  });
  after(() => s?.close());

  it('the checked text and detected values are masked all the same', async () => {
    const { key, workspaceId } = await s.key();
    const [pii] = await runGuardrails(TEXT, { version: 1, guardrails: [CHECKS.pii] }, {});
    const res = await post(
      `${s.url}${ROUTE}`,
      { results: [{ ...pii, checkedText: TEXT }] },
      { authorization: `Bearer ${key}` },
    );
    expect(res.status, res.text).to.equal(200);
    await flushed(s);
    const stored = JSON.stringify(await s.running.storage.getTrace(workspaceId, res.json.traceId));
    expect(stored).to.not.contain(EMAIL);
    expect(stored).to.not.contain('555-123-4567');
    expect(stored).to.contain('[REDACTED:email]');
  });
});
