// The OpenAPI document of the signal routes against their real answers: each status answered matches the schema
// documented for it, and the documented request schemas take what the routes take.
import { expect } from 'chai';
import { createHmac } from 'node:crypto';
import { z } from 'zod';
import { cli, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';

/** The documented schema as a zod validator (components resolved). */
function validator(doc: any, schema: unknown): z.ZodType {
  if (!schema) throw new Error('no schema documented');
  const refs = (v: unknown) => JSON.parse(JSON.stringify(v).replaceAll('"#/components/schemas/', '"#/$defs/'));
  return z.fromJSONSchema({ ...refs(schema), $defs: refs(doc.components.schemas) });
}

describe('OpenAPI document of the signal routes against real answers', function () {
  this.timeout(120_000);
  let s: TestServer;
  let doc: any;
  let auth: Record<string, string>;
  before(async () => {
    s = await startTestServer('duckdb', { TRACEGATE_MAX_WEBHOOK_BODY_BYTES: '2048' });
    const created = JSON.parse((await cli(s, ['keys', 'create', '--workspace', 'doc-signals', '--json'])).stdout);
    auth = { authorization: `Bearer ${created.key}` };
    doc = (await get(`${s.url}/openapi.json`)).json;
  });
  after(() => s.close());

  const conforms = (
    method: string,
    path: string,
    status: number,
    res: { status: number; json: unknown; text: string },
  ) => {
    const where = `${method.toUpperCase()} ${path} ${res.status}`;
    expect(res.status, `${where}: ${res.text.slice(0, 300)}`).to.equal(status);
    const schema = doc.paths[path]?.[method]?.responses[status]?.content?.['application/json']?.schema;
    expect(schema, `${where}: no schema documented`).to.not.equal(undefined);
    const got = validator(doc, schema).safeParse(res.json);
    expect(got.error?.issues, `${where}: ${res.text.slice(0, 300)}`).to.equal(undefined);
  };
  const request = (path: string) => validator(doc, doc.paths[path].post.requestBody.content['application/json'].schema);

  it('tool calls, feedback, webhooks, the security-alert listing and the trace read answer as documented', async () => {
    const call = { name: 'lookup', id: 'c1', trace_id: 'doc-sig', arguments: { q: 1 } };
    expect(request('/api/ingest/tool-calls').safeParse(call).success).to.equal(true);
    expect(request('/api/ingest/tool-calls').safeParse({ tool_calls: [call] }).success).to.equal(true);
    const tc = '/api/ingest/tool-calls';
    conforms('post', tc, 200, await post(`${s.url}${tc}`, call, auth));
    conforms('post', tc, 200, await post(`${s.url}${tc}`, { tool_calls: [call, { ...call, id: 'c2' }] }, auth));
    conforms('post', tc, 207, await post(`${s.url}${tc}`, { tool_calls: [call, {}] }, auth));
    conforms('post', tc, 400, await post(`${s.url}${tc}`, {}, auth));
    conforms('post', tc, 401, await post(`${s.url}${tc}`, call));

    const fb = '/api/ingest/feedback';
    const vote = { trace_id: 'doc-sig', value: 'up', user_id: 'u' };
    expect(request(fb).safeParse(vote).success).to.equal(true);
    conforms('post', fb, 200, await post(`${s.url}${fb}`, vote, auth));
    conforms('post', fb, 207, await post(`${s.url}${fb}`, { feedback: [vote, { value: 'x' }] }, auth));
    conforms('post', fb, 400, await post(`${s.url}${fb}`, { trace_id: 'doc-sig', value: 'sideways' }, auth));

    const wh = '/api/ingest/webhooks';
    const body = JSON.stringify({ title: 'doc alert', severity: 'high', trace_id: 'doc-sig' });
    conforms('post', wh, 200, await post(`${s.url}${wh}`, body, auth));
    conforms('post', wh, 400, await post(`${s.url}${wh}`, '[1]', auth));
    conforms('post', wh, 413, await post(`${s.url}${wh}`, JSON.stringify({ pad: 'x'.repeat(4096) }), auth));
    const { secret } = JSON.parse(
      (await cli(s, ['webhooks', 'secret', 'add', '--workspace', 'doc-signals', '--json'])).stdout,
    );
    const ts = String(Math.floor(Date.now() / 1000));
    const sig = `v1=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`;
    const headers = { ...auth, 'x-service-delivery-timestamp': ts, 'x-service-signature': sig };
    conforms('post', wh, 200, await post(`${s.url}${wh}`, body, headers));
    conforms('post', wh, 409, await post(`${s.url}${wh}`, body, headers));
    conforms('post', wh, 401, await post(`${s.url}${wh}`, `${body} `, headers));
    await flushed(s);

    conforms('get', '/api/security-alerts', 200, await get(`${s.url}/api/security-alerts`, auth));
    conforms('get', '/api/security-alerts', 400, await get(`${s.url}/api/security-alerts?severity=huge`, auth));
    const t = await get(`${s.url}/api/traces/doc-sig`, auth);
    conforms('get', '/api/traces/{traceId}', 200, t);
    expect(t.json.trace.feedback).to.deep.equal({ user_feedback: { up: 1, down: 0 } });
    expect(t.json.trace.securityAlerts).to.have.length(1); // the same body twice: one alert
    conforms('get', '/api/traces', 200, await get(`${s.url}/api/traces?feedback=up`, auth));
    conforms('get', '/api/analytics/usage', 200, await get(`${s.url}/api/analytics/usage`, auth));
  });
});
