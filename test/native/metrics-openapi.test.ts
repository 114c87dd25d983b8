// /metrics counts native records by their own source; /openapi.json documents what every route really answers.
import { expect } from 'chai';
import { z } from 'zod';
import { BACKENDS, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';
import { traceDetailSchema, tracePageSchema } from '../../collector/routes/read.ts';

describe('ingest metrics by record source', function () {
  let s: TestServer;
  let auth: Record<string, string>;
  before(async () => {
    s = await startTestServer('duckdb');
    auth = { authorization: `Bearer ${(await s.key('metrics-src')).key}` };
  });
  after(() => s.close());

  const counted = async () => {
    const text = (await get(`${s.url}/metrics`)).text;
    return Object.fromEntries(
      [...text.matchAll(/^tracegate_records_ingested_total\{source="(\w+)"\} (\d+)$/gm)].map((m) => [
        m[1],
        Number(m[2]),
      ]),
    );
  };

  it('counts a batch per parameters.source (sdk, agent_lab, coach; native when absent), rejected items not at all', async () => {
    const item = (source?: string) => ({ prompt: 'p', response: 'r', ...(source ? { parameters: { source } } : {}) });
    const res = await post(
      `${s.url}/api/traces`,
      [item('sdk'), item('sdk'), item('agent_lab'), item('coach'), item(), { prompt: 42 }],
      auth,
    );
    expect(res.status).to.equal(207);
    expect(await counted()).to.deep.equal({ sdk: 2, agent_lab: 1, coach: 1, native: 1 });
    expect((await post(`${s.url}/api/traces`, item('coach'), auth)).status).to.equal(200);
    expect(await counted()).to.deep.equal({ sdk: 2, agent_lab: 1, coach: 2, native: 1 });
  });
});

describe('OpenAPI document of the read routes', function () {
  let s: TestServer;
  let auth: Record<string, string>;
  let doc: any;
  before(async () => {
    s = await startTestServer('duckdb');
    auth = { authorization: `Bearer ${(await s.key('openapi-read')).key}` };
    doc = (await get(`${s.url}/openapi.json`)).json;
  });
  after(() => s.close());

  const json200 = (path: string) => doc.paths[path].get.responses['200'].content['application/json'].schema;
  const resolve = (schema: any) =>
    schema.$ref ? doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')] : schema;

  it('GET /api/traces: a response schema (items, nextCursor) and 400 for an invalid query', async () => {
    const page = json200('/api/traces');
    expect(page.properties).to.have.keys('items', 'nextCursor');
    expect(page.properties.items.items.properties).to.include.keys(
      'traceId',
      'startTimeNs',
      'spanCount',
      'costUsd',
      'source',
    );
    const responses = doc.paths['/api/traces'].get.responses;
    expect(responses).to.include.keys('200', '400', '401', '429');
    expect(responses['400'].content['application/json'].schema).to.deep.equal({ $ref: '#/components/schemas/Error' });
    const bad = await get(`${s.url}/api/traces?limit=0`, auth);
    expect(bad.status).to.equal(400);
    expect(bad.json.error.code).to.equal('invalid_query');
  });

  it('GET /api/traces/{traceId}: a response schema (summary, spans in parts, tree, policy) and 400 for an invalid trace id or span query', async () => {
    const trace = json200('/api/traces/{traceId}').properties.trace;
    expect(trace.properties).to.have.keys(
      'traceId',
      'summary',
      'spans',
      'nextSpanCursor',
      'tree',
      'policy',
      'feedback',
      'feedbackVotes',
      'securityAlerts',
      'session',
      'metadata',
      'workflow',
      'guardrails',
    );
    expect(doc.paths['/api/traces/{traceId}'].get.parameters.map((p: { name: string }) => p.name)).to.include.members([
      'spanLimit',
      'spanCursor',
    ]);
    for (const q of [
      'spanLimit=0',
      'spanLimit=10001',
      'spanLimit=0x3',
      'spanLimit=3.0',
      'spanLimit=%203',
      'spanCursor=nope',
      `spanCursor=${Buffer.from('{"s":"-1","span":"a"}').toString('base64url')}`,
    ]) {
      const res = await get(`${s.url}/api/traces/any?${q}`, auth);
      expect(res.status, q).to.equal(400);
      expect(res.json.error.code, q).to.equal('invalid_query');
    }
    expect(trace.properties.spans.items.properties).to.include.keys('spanId', 'kind', 'prompt', 'attributes', 'events');
    expect(trace.properties.spans.items.properties).to.not.have.property('workspaceId');
    const node = resolve(trace.properties.tree.items);
    expect(node.properties).to.have.keys('spanId', 'name', 'kind', 'children');
    expect(resolve(node.properties.children.items)).to.equal(node); // recursive, through components
    expect(doc.paths['/api/traces/{traceId}'].get.responses).to.include.keys('200', '400', '401', '404', '429');
    const bad = await get(`${s.url}/api/traces/${'x'.repeat(300)}`, auth);
    expect(bad.status).to.equal(400);
    expect(bad.json.error.code).to.equal('invalid_trace_id');
  });

  it('documents 400 on every route with query or path parameters', () => {
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        if (op.parameters?.length || op.requestBody) expect(op.responses, `${method} ${path}`).to.have.property('400');
      }
    }
  });

  it('every $ref in the document resolves', () => {
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).to.be.greaterThan(0);
    for (const ref of new Set(refs)) {
      expect(ref, ref).to.match(/^#\/components\/schemas\//);
      expect(doc.components.schemas, ref).to.have.property(ref.slice('#/components/schemas/'.length));
    }
  });
});

for (const backend of BACKENDS) {
  describe(`read answers match the documented schemas (${backend})`, function () {
    let s: TestServer;
    before(async () => {
      s = await startTestServer(backend);
    });
    after(() => s.close());
    it('GET /api/traces and GET /api/traces/{traceId}', async () => {
      const auth = { authorization: `Bearer ${(await s.key('openapi-real')).key}` };
      await post(
        `${s.url}/api/traces`,
        { requestId: 'doc-1', prompt: 'p', response: 'r', metadata: { nested: { a: [1, null, 'x'] } } },
        auth,
      );
      await flushed(s);
      const list = await get(`${s.url}/api/traces`, auth);
      expect(list.json.items).to.have.length(1);
      expect(tracePageSchema.safeParse(list.json).error).to.equal(undefined);
      const one = await get(`${s.url}/api/traces/doc-1`, auth);
      expect(one.status).to.equal(200);
      expect(traceDetailSchema.safeParse(one.json).error).to.equal(undefined);
    });
  });
}

/**
 * A validator for a schema of the document: zod reads the JSON Schema itself (no validator of the project's own
 * zod schemas), with the document's components as $defs so references resolve.
 */
function validator(doc: any, schema: unknown): z.ZodType {
  if (!schema) throw new Error('no schema documented');
  const refs = (v: unknown) => JSON.parse(JSON.stringify(v).replaceAll('"#/components/schemas/', '"#/$defs/'));
  return z.fromJSONSchema({ ...refs(schema), $defs: refs(doc.components.schemas) });
}

describe('OpenAPI document against real answers', function () {
  let s: TestServer;
  let doc: any;
  let auth: Record<string, string>;
  const traceId = 'a1'.repeat(16);
  before(async () => {
    s = await startTestServer('duckdb', { TRACEGATE_RATE_LIMIT_POINTS: '10' });
    auth = { authorization: `Bearer ${(await s.key('openapi-answers')).key}` };
    doc = (await get(`${s.url}/openapi.json`)).json;
  });
  after(() => s.close());

  type Answer = { status: number; json: unknown; text: string; headers: Headers };
  /** The answer has this status and matches the schema documented for it (JSON unless `type` says otherwise). */
  const conforms = (method: string, path: string, status: number, res: Answer, type = 'application/json') => {
    const where = `${method.toUpperCase()} ${path} ${res.status}`;
    expect(res.status, `${where}: ${res.text.slice(0, 300)}`).to.equal(status);
    const schema = doc.paths[path]?.[method]?.responses[res.status]?.content?.[type]?.schema;
    expect(schema, `${where}: no ${type} schema documented`).to.not.equal(undefined);
    const got = validator(doc, schema).safeParse(type === 'application/json' ? res.json : res.text);
    expect(got.error?.issues, `${where}: ${res.text.slice(0, 300)}`).to.equal(undefined);
  };
  const send = async (
    method: string,
    url: string,
    body?: string,
    headers: Record<string, string> = {},
  ): Promise<Answer> => {
    const res = await fetch(url, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, json, text };
  };
  const request = (method: string, path: string) =>
    validator(doc, doc.paths[path][method].requestBody.content['application/json'].schema);

  it('documents each error in the shape its route family answers, 503 on every route with a key, no unused security scheme', () => {
    expect(doc.components.securitySchemes).to.have.keys('bearerAuth', 'sessionCookie');
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        if (!op.security?.length) continue; // the ops routes: /readyz answers 503 with its readiness report
        expect(op.responses, `${method} ${path}`).to.include.keys('401', '429', '503');
        const family = path.startsWith('/api/proxy/')
          ? 'ProviderError'
          : op.requestBody?.content['application/x-protobuf']
            ? 'Status'
            : 'Error';
        for (const [status, resp] of Object.entries<any>(op.responses)) {
          if (Number(status) < 400) continue;
          const schema = resp.content?.['application/json']?.schema; // a reference to the family's schema, or the same inline
          const resolved = schema?.$ref
            ? doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')]
            : schema;
          expect(resolved, `${method} ${path} ${status}`).to.deep.equal(doc.components.schemas[family]);
        }
      }
    }
  });

  it('the documented request schemas take what the routes take, and refuse what they refuse', async () => {
    const native = {
      model: null,
      provider: null,
      prompt: 'p',
      response: 'r',
      metrics: { promptTokens: null, finishReason: null },
      parameters: null,
    };
    expect(request('post', '/api/traces').safeParse(native).success).to.equal(true);
    expect((await post(`${s.url}/api/traces`, native, auth)).status).to.equal(200);
    expect(request('post', '/api/proxy/provider/responses').safeParse({ model: '' }).success).to.equal(false);
    const proxy = await post(`${s.url}/api/proxy/provider/responses`, { model: '' }, auth);
    conforms('post', '/api/proxy/provider/responses', 400, proxy);
  });

  it('ingest, read, enrichment and ops answers, errors included, match their documented schemas', async () => {
    const none = {}; // no key: 401
    const findings = {
      requestId: 'doc-answers',
      model: 'gpt-4o-mini',
      prompt: 'mail me at jane.doe@example.com',
      response: 'ok',
      metrics: { promptTokens: 3, completionTokens: 1 },
    };
    conforms('post', '/api/traces', 200, await post(`${s.url}/api/traces`, findings, auth));
    conforms('post', '/api/traces', 207, await post(`${s.url}/api/traces`, [{ prompt: 'p' }, { prompt: 42 }], auth));
    conforms('post', '/api/traces', 400, await post(`${s.url}/api/traces`, { prompt: 42 }, auth));
    conforms('post', '/api/traces', 401, await post(`${s.url}/api/traces`, {}, none));
    conforms(
      'post',
      '/api/traces',
      415,
      await post(`${s.url}/api/traces`, 'p', { ...auth, 'content-type': 'text/plain' }),
    );

    const start = BigInt(Date.now() - 10_000) * 1_000_000n;
    const span = (spanId: string) => ({
      traceId,
      spanId,
      name: 'chat',
      kind: 3,
      startTimeUnixNano: String(start),
      endTimeUnixNano: String(start + 250_000_000n),
    });
    const otlp = (spans: unknown[]) =>
      JSON.stringify({
        resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ scope: { name: 'doc' }, spans }] }],
      });
    const json = { ...auth, 'content-type': 'application/json' };
    const partial = await send('POST', `${s.url}/v1/traces`, otlp([span('b2'.repeat(8)), span('not-a-span-id')]), json);
    expect(partial.json).to.have.nested.property('partialSuccess.rejectedSpans', '1');
    conforms('post', '/v1/traces', 200, partial);
    const whole = await send('POST', `${s.url}/api/integrations/otlp/v1/traces`, otlp([span('c3'.repeat(8))]), json);
    expect(whole.json).to.deep.equal({});
    conforms('post', '/api/integrations/otlp/v1/traces', 200, whole);
    conforms('post', '/v1/traces', 400, await send('POST', `${s.url}/v1/traces`, '{', json));
    conforms(
      'post',
      '/v1/traces',
      401,
      await send('POST', `${s.url}/v1/traces`, otlp([]), { 'content-type': 'application/json' }),
    );
    const logs = (records: unknown[]) => JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: records }] }] });
    const event = {
      traceId,
      spanId: 'c3'.repeat(8),
      timeUnixNano: String(start),
      eventName: 'gen_ai.user.message',
      body: { kvlistValue: { values: [{ key: 'content', value: { stringValue: 'hi' } }] } },
    };
    const partialLogs = await send(
      'POST',
      `${s.url}/v1/logs`,
      logs([event, { timeUnixNano: String(start), body: { stringValue: 'no span' } }]),
      json,
    );
    expect(partialLogs.json).to.have.nested.property('partialSuccess.rejectedLogRecords', '1');
    conforms('post', '/v1/logs', 200, partialLogs);
    conforms(
      'post',
      '/api/integrations/otlp/v1/logs',
      200,
      await send('POST', `${s.url}/api/integrations/otlp/v1/logs`, logs([event]), json),
    );
    conforms('post', '/v1/logs', 400, await send('POST', `${s.url}/v1/logs`, '{', json));
    await flushed(s);

    for (const path of [
      '/api/traces',
      '/api/audit',
      '/api/alerts',
      '/api/findings',
      '/api/policy',
      '/api/verification/keys',
      '/api/analytics/usage',
    ]) {
      conforms('get', path, 200, await get(`${s.url}${path}`, auth));
    }
    // Not only empty pages: the answers checked above hold items.
    expect((await get(`${s.url}/api/audit`, auth)).json.items).to.not.be.empty;
    expect((await get(`${s.url}/api/findings`, auth)).json.items).to.not.be.empty;
    expect((await get(`${s.url}/api/analytics/usage`, auth)).json.rows).to.not.be.empty;
    conforms('get', '/api/traces/{traceId}', 200, await get(`${s.url}/api/traces/doc-answers`, auth));
    conforms('get', '/api/traces/{traceId}', 404, await get(`${s.url}/api/traces/missing`, auth));
    conforms(
      'get',
      '/api/traces/{traceId}/verification',
      200,
      await get(`${s.url}/api/traces/doc-answers/verification`, auth),
    );
    conforms(
      'get',
      '/api/traces/{traceId}/verification',
      404,
      await get(`${s.url}/api/traces/missing/verification`, auth),
    );
    conforms('get', '/api/audit', 400, await get(`${s.url}/api/audit?limit=0`, auth));
    conforms('get', '/api/policy', 401, await get(`${s.url}/api/policy`, none));

    conforms('get', '/healthz', 200, await get(`${s.url}/healthz`));
    conforms('get', '/readyz', 200, await get(`${s.url}/readyz`));
    conforms('get', '/openapi.json', 200, await get(`${s.url}/openapi.json`));
    const metrics = await get(`${s.url}/metrics`);
    expect(metrics.headers.get('content-type')).to.match(/^text\/plain/);
    conforms('get', '/metrics', 200, metrics, 'text/plain');
  });

  it("proxy errors (400, 401, 415, 429) match the provider error schema; a read route's 429 the error envelope", async () => {
    const proxy = '/api/proxy/provider/responses';
    conforms('post', proxy, 401, await post(`${s.url}${proxy}`, { model: 'm' }));
    conforms('post', proxy, 415, await post(`${s.url}${proxy}`, 'm', { ...auth, 'content-type': 'text/plain' }));
    conforms(
      'delete',
      `${proxy}/{responseId}`,
      400,
      await send('DELETE', `${s.url}${proxy}/bad%20id`, undefined, auth),
    );
    // The generic envelope is not the provider's shape: the validator tells them apart.
    const envelope = await get(`${s.url}/api/policy`);
    expect(
      validator(doc, doc.paths[proxy].post.responses['401'].content['application/json'].schema).safeParse(envelope.json)
        .success,
    ).to.equal(false);

    const limited = { authorization: `Bearer ${(await s.key('openapi-limited')).key}` }; // 10 requests per route and key
    const statuses = async (method: string, path: string, call: () => Promise<Answer>) => {
      const seen: number[] = [];
      for (let i = 0; i < 11; i++) {
        const res = await call();
        seen.push(res.status);
        conforms(method, path, res.status, res);
      }
      return seen;
    };
    expect(
      await statuses('post', `${proxy}/{responseId}/cancel`, () =>
        send('POST', `${s.url}${proxy}/bad%20id/cancel`, undefined, limited),
      ),
    ).to.deep.equal([...Array(10).fill(400), 429]);
    expect(await statuses('get', '/api/policy', () => get(`${s.url}/api/policy`, limited))).to.deep.equal([
      ...Array(10).fill(200),
      429,
    ]);
  });

  it('agents and guardrails answers, and the trace read of an agent run, match their documented schemas', async () => {
    const h = { authorization: `Bearer ${(await s.key('openapi-agents')).key}` };
    const agents = '/api/integrations/provider-agents';
    const guardrails = '/api/integrations/provider-guardrails';
    const trace = { object: 'trace', id: 'trace_doc', workflow_name: 'Doc run', group_id: 'g-1', metadata: { a: 1 } };
    const span = {
      object: 'trace.span',
      id: 'span_doc',
      trace_id: 'trace_doc',
      parent_id: null,
      started_at: '2026-03-01T10:00:00.000Z',
      ended_at: '2026-03-01T10:00:01.000Z',
      span_data: { type: 'guardrail', name: 'g', triggered: true },
      error: null,
    };
    expect(request('post', agents).safeParse({ data: [trace, span] }).success).to.equal(true);
    conforms('post', agents, 200, await post(`${s.url}${agents}`, { data: [trace, span] }, h));
    conforms('post', agents, 207, await post(`${s.url}${agents}`, { data: [span, { ...span, id: 5 }] }, h));
    conforms('post', agents, 400, await post(`${s.url}${agents}`, { data: [{ object: 'trace' }] }, h));
    conforms('post', agents, 401, await post(`${s.url}${agents}`, { data: [] }, {}));
    const result = {
      guardrailName: 'URL Filter',
      stage: 'output',
      tripwireTriggered: true,
      info: { blocked: ['https://x.test'] },
    };
    expect(request('post', guardrails).safeParse({ traceId: 'trace_doc', results: [result] }).success).to.equal(true);
    conforms(
      'post',
      guardrails,
      200,
      await post(`${s.url}${guardrails}`, { traceId: 'trace_doc', results: [result] }, h),
    );
    conforms('post', guardrails, 400, await post(`${s.url}${guardrails}`, { results: [{ stage: 'x' }] }, h));
    await flushed(s);
    const list = await get(`${s.url}/api/traces?source=agents`, h);
    conforms('get', '/api/traces', 200, list);
    expect(list.json.items[0]).to.include({ name: 'Doc run', session: 'g-1' });
    const one = await get(`${s.url}/api/traces/trace_doc`, h);
    conforms('get', '/api/traces/{traceId}', 200, one);
    expect(one.json.trace.guardrails.map((g: any) => g.tripped)).to.deep.equal([true, true]);
  });
});
