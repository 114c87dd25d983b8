// /metrics counts native records by their own source; /openapi.json documents the read routes' answers.
import { expect } from 'chai';
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
    return Object.fromEntries([...text.matchAll(/^tracegate_records_ingested_total\{source="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]));
  };

  it('counts a batch per parameters.source (sdk, agent_lab, coach; native when absent), rejected items not at all', async () => {
    const item = (source?: string) => ({ prompt: 'p', response: 'r', ...(source ? { parameters: { source } } : {}) });
    const res = await post(`${s.url}/api/traces`, [item('sdk'), item('sdk'), item('agent_lab'), item('coach'), item(), { prompt: 42 }], auth);
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
  const resolve = (schema: any) => (schema.$ref ? doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')] : schema);

  it('GET /api/traces: a response schema (items, nextCursor) and 400 for an invalid query', async () => {
    const page = json200('/api/traces');
    expect(page.properties).to.have.keys('items', 'nextCursor');
    expect(page.properties.items.items.properties).to.include.keys('traceId', 'startTimeNs', 'spanCount', 'costUsd', 'source');
    const responses = doc.paths['/api/traces'].get.responses;
    expect(responses).to.include.keys('200', '400', '401', '429');
    expect(responses['400'].content['application/json'].schema).to.deep.equal({ $ref: '#/components/schemas/Error' });
    const bad = await get(`${s.url}/api/traces?limit=0`, auth);
    expect(bad.status).to.equal(400);
    expect(bad.json.error.code).to.equal('invalid_query');
  });

  it('GET /api/traces/{traceId}: a response schema (summary, spans, tree, policy) and 400 for an invalid trace id', async () => {
    const trace = json200('/api/traces/{traceId}').properties.trace;
    expect(trace.properties).to.have.keys('traceId', 'summary', 'spans', 'tree', 'policy');
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
    before(async () => { s = await startTestServer(backend); });
    after(() => s.close());
    it('GET /api/traces and GET /api/traces/{traceId}', async () => {
      const auth = { authorization: `Bearer ${(await s.key('openapi-real')).key}` };
      await post(`${s.url}/api/traces`, { requestId: 'doc-1', prompt: 'p', response: 'r', metadata: { nested: { a: [1, null, 'x'] } } }, auth);
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
