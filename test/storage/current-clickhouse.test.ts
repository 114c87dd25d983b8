// The whole server on current ClickHouse (26.x, in-process through chDB): routes, pipeline, enrichment,
// rollups and verification, end to end, as the other suites check them on the 18.16 server.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { ClickHouseStorage } from '../../storage/clickhouse.ts';
import { uniqueDatabase } from '../support/shared.ts';
import { flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';
import { chdbConnection } from './harness.ts';

const otlpFixture = JSON.parse(
  readFileSync(new URL('../fixtures/otlp/genai-current-structured.json', import.meta.url), 'utf8'),
) as { request: unknown };

describe('the server on ClickHouse 26 (chDB)', function () {
  this.timeout(120_000);
  const database = uniqueDatabase('tg_e2e');
  let s: TestServer;
  let auth: Record<string, string>;
  let ch: ClickHouseClient; // for what no route does: edit a stored row behind the collector's back

  before(async () => {
    ch = createClient({ connection: chdbConnection() as never });
    const storage = new ClickHouseStorage({
      url: 'http://chdb.invalid',
      database,
      connection: chdbConnection() as never,
    });
    s = await startTestServer('clickhouse', { TRACEGATE_FLUSH_INTERVAL_MS: '600000' }, storage);
    auth = { authorization: `Bearer ${(await s.key('ws-ch26')).key}` };
  });
  after(async () => {
    await s?.close();
    await ch?.command({ query: `DROP DATABASE IF EXISTS ${database}` });
  });

  it('runs on a current release', async () => {
    const [row] = await (await ch.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' })).json<{
      v: string;
    }>();
    expect(Number(row!.v.split('.')[0])).to.be.at.least(24);
  });

  it('stores native traces once per requestId and reads them back, filtered and paginated', async () => {
    const trace = {
      requestId: 'ch26-1',
      model: 'gpt-4o-mini',
      actionName: 'reply',
      environment: 'prod',
      prompt: 'Where is my order?',
      response: 'It ships today.',
      metrics: { promptTokens: 12, completionTokens: 6, latencyMs: 640 },
    };
    expect((await post(`${s.url}/api/traces`, trace, auth)).json).to.deep.equal({
      trace: { traceId: 'ch26-1', status: 'completed' },
    });
    expect((await post(`${s.url}/api/traces`, trace, auth)).status).to.equal(200); // a retry
    const batch = await post(
      `${s.url}/api/traces`,
      [{ requestId: 'ch26-2', model: 'gpt-4o', prompt: 'a', response: 'b', status: 'error' }, { prompt: 5 }],
      auth,
    );
    expect(batch.status).to.equal(207);
    await flushed(s);
    const one = (await get(`${s.url}/api/traces/ch26-1`, auth)).json.trace;
    expect(one.spans).to.have.length(1);
    expect(one.spans[0]).to.include({
      model: 'gpt-4o-mini',
      prompt: 'Where is my order?',
      promptTokens: 12,
      completionTokens: 6,
    });
    expect(one.spans[0].costUsd).to.be.above(0);
    const errors = (await get(`${s.url}/api/traces?status=error`, auth)).json.items;
    expect(errors.map((t: { traceId: string }) => t.traceId)).to.deep.equal(['ch26-2']);
    const page = (await get(`${s.url}/api/traces?limit=1`, auth)).json;
    expect(page.items).to.have.length(1);
    const rest = (await get(`${s.url}/api/traces?limit=5&cursor=${encodeURIComponent(page.nextCursor)}`, auth)).json
      .items;
    expect([...page.items, ...rest].map((t: { traceId: string }) => t.traceId).sort()).to.deep.equal([
      'ch26-1',
      'ch26-2',
    ]);
  });

  it('accepts OTLP/JSON and maps GenAI spans', async () => {
    const res = await post(`${s.url}/v1/traces`, otlpFixture.request, auth);
    expect(res.status).to.equal(200);
    await flushed(s);
    const span = (await get(`${s.url}/api/traces/5b8efff798038103d269b633813fc60c`, auth)).json.trace.spans[0];
    expect(span).to.include({
      kind: 'llm',
      model: 'gpt-4o-2024-08-06',
      provider: 'openai',
      promptTokens: 1200,
      completionTokens: 300,
      environment: 'production',
    });
  });

  it('records findings, audit and rollups, and verification catches a row edited behind its back', async () => {
    await post(
      `${s.url}/api/traces`,
      {
        requestId: 'ch26-pii',
        model: 'gpt-4o-mini',
        prompt: 'mail me at jane.doe@example.com',
        response: 'ok',
        metrics: { promptTokens: 3, completionTokens: 1 },
      },
      auth,
    );
    await flushed(s);
    const findings = (await get(`${s.url}/api/findings?traceId=ch26-pii`, auth)).json.items;
    expect(findings.map((f: { category: string }) => f.category)).to.deep.equal(['email']);
    const audit = (await get(`${s.url}/api/audit?action=ingest&limit=100`, auth)).json.items;
    expect(audit.length).to.be.at.least(4);
    const usage = (await get(`${s.url}/api/analytics/usage?groupBy=model&bucket=day&from=0`, auth)).json;
    const byModel = Object.fromEntries(usage.rows.map((r: { key: string; requests: number }) => [r.key, r.requests]));
    expect(byModel).to.include({ 'gpt-4o-mini': 2, 'gpt-4o': 1, 'gpt-4o-2024-08-06': 1 }); // the retried ch26-1 counted once

    expect((await get(`${s.url}/api/traces/ch26-pii/verification`, auth)).json.ok).to.equal(true);
    await ch.command({
      query: `ALTER TABLE ${database}.spans UPDATE response = 'tampered' WHERE trace_id = 'ch26-pii' SETTINGS mutations_sync = 1`,
    });
    const v = (await get(`${s.url}/api/traces/ch26-pii/verification`, auth)).json;
    expect(v.ok).to.equal(false);
    expect(v.problems[0]).to.include({ kind: 'content_hash_mismatch', traceId: 'ch26-pii' });
  });
});
