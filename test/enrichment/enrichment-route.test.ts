// Enrichment end to end over HTTP: policies set with the CLI, redaction before the spool, findings, audit,
// alerts with a signed webhook, verification (and tampering caught in ClickHouse), usage analytics.
import { auditChain } from '../support/chains.ts';
import { emptySpan, MAX_TOKENS } from '../../core/record.ts';
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { createHmac } from 'node:crypto';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient } from '@clickhouse/client';
import {
  BACKENDS,
  cli,
  flushed,
  get,
  post,
  startTestServer,
  type Backend,
  type TestServer,
} from '../support/server.ts';
import { verifyAuditChain } from '../../processors/audit.ts';
import { verifyWorkspace } from '../../processors/verify-workspace.ts';
import { publicKeys } from '../../processors/signing.ts';
import type { AuditRecord } from '../../core/enrichment-records.ts';
import { sleep } from '../support/process.ts';
import { createStorage } from '../../storage/index.ts';

const EMAIL = 'jane.doe@example.com';
const OPENAI_KEY = 'sk-proj-' + 'Zq7Xw2Lm9Np4Rt6Vb1Yc3Hd8Kf5Jg0Ms'.repeat(2);

function spoolText(s: TestServer): string {
  const dir = join(s.dataDir, 'spool');
  return readdirSync(dir)
    .map((f) => readFileSync(join(dir, f)).toString('latin1'))
    .join('\n');
}

async function webhookSink(): Promise<{
  url: string;
  received: Array<{ headers: Record<string, string | string[] | undefined>; body: string }>;
  close(): Promise<void>;
}> {
  const received: Array<{ headers: Record<string, string | string[] | undefined>; body: string }> = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}/alerts`, received, close: () => new Promise((r) => server.close(() => r())) };
}

for (const backend of BACKENDS) {
  describe(`enrichment over HTTP (${backend})`, function () {
    this.timeout(120_000);
    let s: TestServer;
    let auth: Record<string, string>;
    let wsName: string;
    let hook: Awaited<ReturnType<typeof webhookSink>>;
    before(async () => {
      s = await startTestServer(backend, { TRACEGATE_FLUSH_INTERVAL_MS: '600000' }); // flush only when the test says
      wsName = `enrich-${backend}`;
      const k = JSON.parse((await cli(s, ['keys', 'create', '--workspace', wsName, '--json'])).stdout);
      auth = { authorization: `Bearer ${k.key}` };
      hook = await webhookSink();
    });
    after(async () => {
      await s.close();
      await hook.close();
    });

    it('a new workspace flags everything and blocks nothing', async () => {
      const res = await post(
        `${s.url}/api/traces`,
        { requestId: 'flag-1', prompt: `contact ${EMAIL}`, response: 'ok' },
        auth,
      );
      expect(res.status).to.equal(200);
      await flushed(s);
      const span = (await get(`${s.url}/api/traces/flag-1`, auth)).json.trace.spans[0];
      expect(span.prompt).to.include(EMAIL);
      expect(span.attributes['governance.decision']).to.equal('flag');
      const findings = (await get(`${s.url}/api/findings?traceId=flag-1`, auth)).json.items;
      expect(findings.map((f: { category: string; field: string }) => [f.category, f.field])).to.deep.equal([
        ['email', 'prompt'],
      ]);
      expect(JSON.stringify(findings)).to.not.include(EMAIL);
    });

    it('every nextCursor is taken back: pages through findings in 600-character fields and traces with 256-character escaped ids', async () => {
      const longKey = `x${'k'.repeat(600)}`;
      const ids = ['longfield-1', 'longfield-2', 'longfield-3'];
      const oddId = '"'.repeat(128) + '\\'.repeat(128); // printable ASCII, each character escaped twice in a cursor
      for (const id of ids)
        expect(
          (await post(`${s.url}/api/traces`, { requestId: id, prompt: 'hello', [longKey]: `contact ${EMAIL}` }, auth))
            .status,
        ).to.equal(200);
      expect((await post(`${s.url}/api/traces`, { requestId: oddId, prompt: 'hi' }, auth)).status).to.equal(200);
      await flushed(s);
      const pages = async (path: string) => {
        const items: Array<Record<string, unknown>> = [];
        let cursor: string | null = null;
        do {
          const res = await get(`${s.url}${path}&limit=1${cursor ? `&cursor=${cursor}` : ''}`, auth);
          expect(res.status, JSON.stringify(res.json)).to.equal(200);
          items.push(...res.json.items);
          cursor = res.json.nextCursor;
        } while (cursor);
        return items;
      };
      const found = (await pages('/api/findings?category=email')).filter((f) => ids.includes(f.traceId as string));
      expect(found).to.have.length(3);
      for (const f of found) {
        expect((f.field as string).length).to.be.at.most(512);
        expect(f.field).to.match(/^attribute:xkkk+…#[0-9a-f]{16}$/);
      }
      const traces = await pages('/api/traces?source=native');
      expect(traces.map((t) => t.traceId)).to.include.members([...ids, oddId]);
    });

    it('policy set with the CLI: redact and block take effect before anything is written, the spool included', async () => {
      const file = join(s.dataDir, 'policy.json');
      writeFileSync(
        file,
        JSON.stringify({ version: 2, actions: { email: 'redact', api_key: 'block' }, modelDeny: ['forbidden-*'] }),
      );
      const bad = join(s.dataDir, 'bad-policy.json');
      writeFileSync(bad, '{ "version": 2,');
      const refused = await cli(s, ['policy', 'set', '--workspace', wsName, '--file', bad]);
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.include(`${bad}: not valid JSON`);
      const set = await cli(s, ['policy', 'set', '--workspace', wsName, '--file', file]);
      expect(set.code, set.stderr).to.equal(0);
      expect(JSON.parse((await cli(s, ['policy', 'show', '--workspace', wsName])).stdout)).to.include({ version: 2 });
      const res = await post(
        `${s.url}/api/traces`,
        { requestId: 'redact-1', model: 'forbidden-model', prompt: `I am ${EMAIL}`, response: `key ${OPENAI_KEY}` },
        auth,
      );
      expect(res.status).to.equal(200);
      const spooled = spoolText(s);
      expect(spooled).to.include('redact-1');
      expect(spooled).to.not.include(EMAIL);
      expect(spooled).to.not.include(OPENAI_KEY);
      await flushed(s);
      const span = (await get(`${s.url}/api/traces/redact-1`, auth)).json.trace.spans[0];
      expect(span.prompt).to.equal('I am [REDACTED:email]');
      expect(span.response).to.not.include(OPENAI_KEY);
      expect(span.attributes['governance.decision']).to.equal('block');
      const cats = (await get(`${s.url}/api/findings?traceId=redact-1`, auth)).json.items
        .map((f: { category: string; action: string }) => `${f.category}:${f.action}`)
        .sort();
      expect(cats).to.deep.equal(['api_key:block', 'email:redact']);
      expect((await get(`${s.url}/api/policy`, auth)).json.policy.version).to.equal(2);

      // A request id holding what the policy redacts (an e-mail, an environment label too) is stored nowhere as sent:
      // the trace is keyed by its hash, the same on every delivery, and answered with that id.
      const replies = [];
      for (let i = 0; i < 2; i++) {
        const r = await post(
          `${s.url}/api/traces`,
          { requestId: `order:${EMAIL}`, environment: `env ${EMAIL}`, model: 'forbidden-x', prompt: 'p' },
          auth,
        );
        expect(r.status).to.equal(200);
        replies.push(r.json.trace.traceId);
      }
      expect(replies[0])
        .to.match(/^redacted-[0-9a-f]{32}$/)
        .and.equal(replies[1]);
      expect(spoolText(s)).to.not.include(EMAIL);
      await flushed(s);
      const keyed = (await get(`${s.url}/api/traces/${replies[0]}`, auth)).json.trace;
      expect(keyed.spans).to.have.length(1);
      expect(keyed.spans[0]).to.include({ requestId: 'order:[REDACTED:email]', environment: 'env [REDACTED:email]' });
      const everything = JSON.stringify([
        keyed,
        (await get(`${s.url}/api/findings?traceId=${replies[0]}`, auth)).json,
        (await get(`${s.url}/api/traces/${replies[0]}/verification`, auth)).json,
      ]);
      expect(everything).to.not.include(EMAIL);
    });

    it('audits ingestion, key and policy changes, and rejected authentication; the chain verifies', async () => {
      await post(`${s.url}/api/traces`, [{ requestId: 'a-1', prompt: 'p' }, { prompt: 5 }], auth);
      await post(
        `${s.url}/api/traces`,
        { prompt: 'x' },
        { authorization: 'Bearer tg_0123456789abcdef_' + 'B'.repeat(43) },
      );
      expect((await post(`${s.url}/api/traces`, [{ prompt: 1 }, { prompt: 2 }, { prompt: 3 }], auth)).status).to.equal(
        400,
      );
      await flushed(s);
      const items = (await get(`${s.url}/api/audit?limit=1000`, auth)).json.items as AuditRecord[];
      expect(items.find((i) => i.action === 'ingest' && i.outcome === 'rejected')).to.include({
        accepted: 0,
        rejected: 3,
      });
      const actions = items.map((i) => i.action);
      expect(actions).to.include.members(['ingest', 'key.create', 'policy.update']);
      const partial = items.find((i) => i.action === 'ingest' && i.rejected === 1)!;
      expect(partial).to.include({ accepted: 1, outcome: 'partial', route: 'POST /api/traces' });
      expect(JSON.stringify(items)).to.not.include(OPENAI_KEY);
      const ingestOnly = (await get(`${s.url}/api/audit?action=ingest&limit=2`, auth)).json;
      expect(ingestOnly.items).to.have.length(2);
      expect(ingestOnly.nextCursor).to.be.a('string');
      const wsId = (await s.running.storage.getWorkspaceByName(wsName))!.id;
      const chain = await auditChain(s.running.storage, wsId);
      expect(verifyAuditChain(chain.map((r) => ({ ...r, recordType: 'audit' as const })))).to.deep.equal([]);
      const system = await s.running.storage.listAudit('_system', { action: 'auth.rejected', limit: 10 });
      expect(system.items[0]).to.include({ actor: '0123456789abcdef', outcome: 'denied' });
      expect(JSON.parse(system.items[0]!.details)).to.include({ reason: 'unknown_key' });
      // A real key id with a wrong secret is an attempt on that workspace's key: its owners see it.
      const keyId = auth.authorization.split('_')[1]!;
      await post(`${s.url}/api/traces`, { prompt: 'x' }, { authorization: `Bearer tg_${keyId}_${'C'.repeat(43)}` });
      await flushed(s);
      const mine = (await get(`${s.url}/api/audit?action=auth.rejected`, auth)).json.items as AuditRecord[];
      expect(mine.map((i) => [i.actor, JSON.parse(i.details).reason])).to.deep.include([keyId, 'wrong_secret']);
    });

    it('alert rules produce alerts and a signed webhook delivery', async () => {
      const file = join(s.dataDir, 'alerts.json');
      const secret = 'whsec-test-secret-0123456789';
      writeFileSync(
        file,
        JSON.stringify({
          rules: [
            { id: 'slow-4o', kind: 'latency', threshold: 1000, model: 'gpt-4o', windowSeconds: 60 },
            { id: 'secrets', kind: 'finding', severity: 'high' },
          ],
          webhookUrl: hook.url,
          webhookSecret: secret,
        }),
      );
      expect((await cli(s, ['alerts', 'set', '--workspace', wsName, '--file', file])).code).to.equal(0);
      await post(
        `${s.url}/api/traces`,
        { requestId: 'slow-1', model: 'gpt-4o', prompt: 'p', response: 'r', metrics: { latencyMs: 4000 } },
        auth,
      );
      await post(`${s.url}/api/traces`, { requestId: 'leak-1', prompt: `here: ${OPENAI_KEY}`, response: 'r' }, auth);
      await flushed(s);
      const alerts = (await get(`${s.url}/api/alerts`, auth)).json.items;
      expect(alerts.map((a: { ruleId: string }) => a.ruleId).sort()).to.deep.equal(['secrets', 'slow-4o']);
      expect(alerts.find((a: { ruleId: string }) => a.ruleId === 'slow-4o')).to.include({
        traceId: 'slow-1',
        value: 4000,
        threshold: 1000,
      });
      for (let i = 0; i < 50 && hook.received.length < 2; i++) await sleep(50);
      expect(hook.received).to.have.length(2);
      for (const d of hook.received) {
        const ts = String(d.headers['x-service-delivery-timestamp']);
        const expected = 'v1=' + createHmac('sha256', secret).update(`${ts}.${d.body}`).digest('hex');
        expect(d.headers['x-service-signature']).to.equal(expected);
        expect(d.body).to.not.include(OPENAI_KEY);
      }
      // Stored as queued (no batch has come since the last alert); the outcome comes with a later batch and replaces it.
      expect(alerts.find((a: { ruleId: string }) => a.ruleId === 'secrets')).to.include({ delivered: 'queued' });
      let delivered: string[] = [];
      for (let i = 0; i < 20 && delivered.join() !== 'sent,sent'; i++) {
        await post(`${s.url}/api/traces`, { requestId: `after-alert-${i}`, prompt: 'p', response: 'r' }, auth);
        await flushed(s);
        delivered = (await get(`${s.url}/api/alerts`, auth)).json.items.map((a: { delivered: string }) => a.delivered);
      }
      expect(delivered).to.deep.equal(['sent', 'sent']);
    });

    // JSON can escape a lone surrogate ("\ud800") or write 1e400 (Infinity once parsed): valid JSON, but
    // neither fits the canonical form. Both are stored (U+FFFD in prompt text, null for an overflowing
    // number, "Infinity" for an OTLP double as proto3 JSON writes it) and hashed as stored, so the traces
    // verify. Both used to be a 500.
    it('lone surrogates and overflowing numbers in JSON input are stored, and the traces still verify', async () => {
      const native = await post(
        `${s.url}/api/traces`,
        '{"requestId":"sur-1","prompt":"bad \\ud800 here","response":"ok \\udc00","metadata":{"k\\ud801":"v\\udfff","big":1e400},"extra":-1e999}',
        auth,
      );
      expect(native.status, JSON.stringify(native.json)).to.equal(200);
      const otlpBody = JSON.stringify({
        resourceSpans: [
          {
            scopeSpans: [
              {
                spans: [
                  {
                    traceId: '0af7651916cd43dd8448eb211c80319c',
                    spanId: 'b7ad6b7169203331',
                    name: 'chat',
                    startTimeUnixNano: '1000',
                    endTimeUnixNano: '2000',
                    attributes: [
                      { key: 'input.value', value: { stringValue: 'SURROGATE' } },
                      { key: 'huge', value: { doubleValue: 'HUGE' } },
                    ],
                  },
                ],
              },
            ],
          },
        ],
      })
        .replace('SURROGATE', 'in \\ud800 put')
        .replace('"HUGE"', '1e400');
      const otlp = await post(`${s.url}/v1/traces`, otlpBody, auth);
      expect(otlp.status, JSON.stringify(otlp.json)).to.equal(200);
      await flushed(s);
      const span = (await get(`${s.url}/api/traces/sur-1`, auth)).json.trace.spans[0];
      expect([span.prompt, span.response]).to.deep.equal(['bad \ufffd here', 'ok \ufffd']);
      // attributes are stored as JSON text, whose escapes keep a lone surrogate as sent
      expect(span.attributes).to.deep.include({ metadata: { 'k\ud801': 'v\udfff', big: null }, extra: null });
      const otlpSpan = (await get(`${s.url}/api/traces/0af7651916cd43dd8448eb211c80319c`, auth)).json.trace.spans[0];
      expect(otlpSpan.attributes).to.include({ 'input.value': 'in \ufffd put', huge: 'Infinity' });
      expect((await get(`${s.url}/api/traces/sur-1/verification`, auth)).json).to.include({ ok: true });
      expect((await get(`${s.url}/api/traces/0af7651916cd43dd8448eb211c80319c/verification`, auth)).json).to.include({
        ok: true,
      });
    });

    it('token counts past MAX_TOKENS (10^12, also a derived total) are stored capped, as they were hashed: the trace verifies', async () => {
      const max = MAX_TOKENS;
      const native = await post(
        `${s.url}/api/traces`,
        { requestId: 'big-sum', model: 'gpt-4o-mini', metrics: { promptTokens: max, completionTokens: max } },
        auth,
      );
      expect(native.status, JSON.stringify(native.json)).to.equal(200);
      const otlpBody = {
        resourceSpans: [
          {
            scopeSpans: [
              {
                spans: [
                  {
                    traceId: '1af7651916cd43dd8448eb211c80319c',
                    spanId: 'c7ad6b7169203331',
                    name: 'chat',
                    startTimeUnixNano: '1000',
                    endTimeUnixNano: '2000',
                    attributes: [
                      { key: 'gen_ai.operation.name', value: { stringValue: 'chat' } },
                      { key: 'gen_ai.usage.input_tokens', value: { intValue: String(Number.MAX_SAFE_INTEGER) } },
                      { key: 'gen_ai.usage.output_tokens', value: { doubleValue: 2.5 } },
                    ],
                  },
                ],
              },
            ],
          },
        ],
      };
      expect((await post(`${s.url}/v1/traces`, otlpBody, auth)).status).to.equal(200);
      await flushed(s);
      expect((await get(`${s.url}/api/traces/big-sum`, auth)).json.trace.spans[0]).to.include({
        promptTokens: max,
        totalTokens: max,
      });
      expect((await get(`${s.url}/api/traces/1af7651916cd43dd8448eb211c80319c`, auth)).json.trace.spans[0]).to.include({
        completionTokens: 3,
        totalTokens: max,
      });
      expect((await get(`${s.url}/api/traces/big-sum/verification`, auth)).json).to.include({ ok: true });
      expect((await get(`${s.url}/api/traces/1af7651916cd43dd8448eb211c80319c/verification`, auth)).json).to.include({
        ok: true,
      });
    });

    // Found by fuzzing: a request repeating a span (or 30 parallel re-sends in one millisecond) was reported as
    // tampering, because the verification record hashed copies that storage collapsed into one.
    it('a span repeated within a request, or re-sent in parallel with other content, is stored once and verifies', async () => {
      const tid = 'c'.repeat(32);
      const spanJson = (name: string) => ({
        traceId: tid,
        spanId: 'd'.repeat(16),
        name,
        startTimeUnixNano: '1000',
        endTimeUnixNano: '2000',
      });
      const repeated = await post(
        `${s.url}/v1/traces`,
        { resourceSpans: [{ scopeSpans: [{ spans: [spanJson('one'), spanJson('two'), spanJson('three')] }] }] },
        auth,
      );
      expect(repeated.status).to.equal(200);
      const batch = await post(
        `${s.url}/api/traces`,
        [
          { requestId: 'dup-1', prompt: 'a' },
          { requestId: 'dup-1', prompt: 'b' },
        ],
        auth,
      );
      expect(batch.status).to.equal(200);
      await flushed(s);
      const trace = (await get(`${s.url}/api/traces/${tid}`, auth)).json.trace;
      expect(trace.spans.map((x: { name: string }) => x.name)).to.deep.equal(['three']);
      expect(
        (await get(`${s.url}/api/traces/dup-1`, auth)).json.trace.spans.map((x: { prompt: string }) => x.prompt),
      ).to.deep.equal(['b']);
      expect((await get(`${s.url}/api/traces/${tid}/verification`, auth)).json).to.include({ ok: true });
      expect((await get(`${s.url}/api/traces/dup-1/verification`, auth)).json).to.include({ ok: true });

      const tid2 = 'e'.repeat(32);
      await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          post(
            `${s.url}/v1/traces`,
            { resourceSpans: [{ scopeSpans: [{ spans: [{ ...spanJson(`n${i}`), traceId: tid2 }] }] }] },
            auth,
          ),
        ),
      );
      await flushed(s);
      expect((await get(`${s.url}/api/traces/${tid2}`, auth)).json.trace.spans).to.have.length(1);
      expect((await get(`${s.url}/api/traces/${tid2}/verification`, auth)).json).to.include({ ok: true });
    });

    it('verification: keys published, trace re-checked, `tracegate verify` passes', async () => {
      await flushed(s);
      const keys = (await get(`${s.url}/api/verification/keys`, auth)).json.keys;
      expect(keys[0]).to.include({ algorithm: 'Ed25519' });
      expect(keys[0].keyId).to.match(/^ed25519:[0-9a-f]{16}$/);
      const v = await get(`${s.url}/api/traces/flag-1/verification`, auth);
      expect(v.status).to.equal(200);
      expect(v.json).to.include({ ok: true, traceId: 'flag-1' });
      expect(v.json.records[0].contentHash).to.match(/^[0-9a-f]{64}$/);
      expect((await get(`${s.url}/api/traces/nope/verification`, auth)).status).to.equal(404);
      const out = await cli(s, ['verify', '--workspace', wsName]);
      expect(out.code, out.stdout + out.stderr).to.equal(0);
      expect(out.stdout).to.match(/^OK /);
    });

    it('usage analytics from the rollups', async () => {
      const k = JSON.parse((await cli(s, ['keys', 'create', '--workspace', `usage-${backend}`, '--json'])).stdout);
      const h = { authorization: `Bearer ${k.key}` };
      const batch = [];
      for (let i = 0; i < 20; i++)
        batch.push({
          requestId: `u-${i}`,
          model: i % 2 ? 'gpt-4o' : 'gpt-4o-mini',
          status: i % 5 === 0 ? 'error' : 'completed',
          prompt: 'p',
          response: 'r',
          metrics: { promptTokens: 10, completionTokens: 5, latencyMs: 100 + i * 10, estimatedCostUsd: 0.001 },
        });
      expect((await post(`${s.url}/api/traces`, batch, h)).status).to.equal(200);
      await flushed(s);
      const res = await get(`${s.url}/api/analytics/usage?groupBy=model&bucket=day`, h);
      expect(res.status).to.equal(200);
      const rows = res.json.rows as Array<{
        key: string;
        requests: number;
        errors: number;
        promptTokens: number;
        costUsd: number;
        p50Ms: number;
        p99Ms: number;
      }>;
      expect(rows.map((r) => r.key).sort()).to.deep.equal(['gpt-4o', 'gpt-4o-mini']);
      const mini = rows.find((r) => r.key === 'gpt-4o-mini')!;
      expect(mini).to.include({ requests: 10, errors: 2, promptTokens: 100 });
      expect(mini.costUsd).to.be.closeTo(0.01, 1e-9);
      expect(mini.p50Ms).to.be.within(180, 200);
      expect((await get(`${s.url}/api/analytics/usage?groupBy=nope`, h)).status).to.equal(400);
    });

    it('catches a span written straight into storage (no verification record), and checks the _system audit chain', async () => {
      const wsId = (await s.running.storage.getWorkspaceByName(wsName))!.id;
      await s.running.storage.insertSpans([
        {
          ...emptySpan(wsId, 'native'),
          traceId: 'forged-1',
          spanId: 'f0f0f0f0f0f0f0f0',
          name: 'wire 1M',
          kind: 'llm',
          startTimeNs: '1763787000000000000',
          endTimeNs: '1763787000000000000',
          ingestedAtMs: Date.now() - 60_000,
        },
      ]);
      const out = await cli(s, ['verify', '--workspace', wsName]);
      expect(out.code).to.equal(1);
      expect(out.stdout).to.include('unverified_span').and.include('forged-1');
      const v = await get(`${s.url}/api/traces/forged-1/verification`, auth);
      expect(v.status, v.text).to.equal(200);
      expect(v.json.ok).to.equal(false);
      expect(v.json.problems.map((p: { kind: string }) => p.kind)).to.deep.equal(['unverified_span']);
      // Unfiltered, verify covers every workspace (not only those with verification records) and the _system chain.
      const all = await cli(s, ['verify', '--json']);
      expect(all.code).to.equal(1);
      const text = await cli(s, ['verify']);
      expect(text.stdout.split('\n').filter((l) => / _system\b/.test(l))).to.have.length(1); // each workspace once
      const results = JSON.parse(all.stdout);
      expect(Object.keys(results)).to.include('_system');
      expect(results[wsId].ok).to.equal(false);
      // A run that started 20 s ago does not judge a trace received since (its records may still be on the way).
      await s.running.storage.insertSpans([
        {
          ...emptySpan(wsId, 'native'),
          traceId: 'during-run',
          spanId: 'd0d0d0d0d0d0d0d0',
          name: 'new',
          startTimeNs: '1763787000000000000',
          endTimeNs: '1763787000000000000',
          ingestedAtMs: Date.now(),
        },
      ]);
      const started = await verifyWorkspace(
        s.running.storage,
        wsId,
        publicKeys(join(s.dataDir, 'keys')),
        Date.now() - 20_000,
      );
      expect(started.problems.map((p) => p.traceId))
        .to.include('forged-1')
        .and.not.include('during-run');
    });

    if (backend === 'clickhouse') {
      it('catches a row edited directly in ClickHouse, and names it', async () => {
        const ch = createClient({ url: s.config.CLICKHOUSE_URL!, compression: { request: false, response: false } });
        const db = s.config.CLICKHOUSE_DATABASE;
        const wsId = (await s.running.storage.getWorkspaceByName(wsName))!.id;
        await ch.command({
          query: `ALTER TABLE ${db}.spans UPDATE response = 'tampered' WHERE workspace_id = '${wsId}' AND trace_id = 'flag-1'`,
        });
        for (let i = 0; i < 100; i++) {
          const span = (await get(`${s.url}/api/traces/flag-1`, auth)).json.trace.spans[0];
          if (span.response === 'tampered') break;
          await sleep(100);
        }
        await ch.close();
        const v = await get(`${s.url}/api/traces/flag-1/verification`, auth);
        expect(v.json.ok).to.equal(false);
        expect(v.json.problems[0]).to.include({ kind: 'content_hash_mismatch', traceId: 'flag-1' });
        const out = await cli(s, ['verify', '--workspace', wsName]);
        expect(out.code).to.equal(1);
        expect(out.stdout).to.include('content_hash_mismatch').and.include('flag-1');
      });
    }
  });
}

describe('alert delivery outcome at shutdown', function () {
  it('a delivery that ends when no batch follows is stored with the final checkpoints', async () => {
    const hook = await webhookSink();
    const s = await startTestServer('duckdb');
    try {
      const k = JSON.parse((await cli(s, ['keys', 'create', '--workspace', 'last-alert', '--json'])).stdout);
      const file = join(s.dataDir, 'alerts.json');
      writeFileSync(
        file,
        JSON.stringify({
          rules: [{ id: 'any-error', kind: 'error_rate', threshold: 0.5, windowSeconds: 60 }],
          webhookUrl: hook.url,
          webhookSecret: 'whsec-test-secret-0123456789',
        }),
      );
      expect((await cli(s, ['alerts', 'set', '--workspace', 'last-alert', '--file', file])).code).to.equal(0);
      await post(
        `${s.url}/api/traces`,
        { requestId: 'err-1', model: 'gpt-4o', prompt: 'p', status: 'error' },
        { authorization: `Bearer ${k.key}` },
      );
      for (let i = 0; i < 50 && hook.received.length < 1; i++) await sleep(50);
      expect(hook.received).to.have.length(1);
    } finally {
      await s.running.close(); // the data dir stays for the check below
      await hook.close();
    }
    const storage = createStorage(s.config);
    await storage.init();
    try {
      const ws = (await storage.getWorkspaceByName('last-alert'))!.id;
      expect((await storage.listAlerts(ws, { limit: 10 })).items.map((a) => a.delivered)).to.deep.equal(['sent']);
    } finally {
      await storage.close();
      rmSync(s.dataDir, { recursive: true, force: true });
    }
  });
});

describe('usage analytics agree between ClickHouse and the embedded store', function () {
  this.timeout(120_000);
  it('same traces in, same answers out', async () => {
    const answers: Record<Backend, unknown[]> = { duckdb: [], clickhouse: [] };
    for (const backend of BACKENDS) {
      const s = await startTestServer(backend);
      try {
        const k = await s.key('agree');
        const h = { authorization: `Bearer ${k.key}` };
        const batch = Array.from({ length: 60 }, (_, i) => ({
          requestId: `g-${i}`,
          model: ['a', 'b', 'c'][i % 3],
          actionName: `act${i % 2}`,
          environment: i % 4 ? 'prod' : 'dev',
          status: i % 7 === 0 ? 'error' : 'completed',
          metrics: { promptTokens: i, completionTokens: 2 * i, latencyMs: 10 * (i % 13), estimatedCostUsd: i / 1000 },
        }));
        expect((await post(`${s.url}/api/traces`, batch, h)).status).to.equal(200);
        await flushed(s);
        for (const groupBy of ['model', 'actionName', 'environment', 'source']) {
          const rows = (await get(`${s.url}/api/analytics/usage?groupBy=${groupBy}&bucket=day`, h)).json.rows;
          answers[backend].push(
            rows.map((r: Record<string, unknown>) => ({
              ...r,
              costUsd: Math.round((r.costUsd as number) * 1e9) / 1e9,
            })),
          );
        }
      } finally {
        await s.close();
      }
    }
    expect(answers.clickhouse).to.deep.equal(answers.duckdb);
  });
});
