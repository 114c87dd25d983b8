// GET /api/export/training and `tracegate export training` over real HTTP on both engines: traces, votes and a
// policy sent through the real routes and CLI, every exported line checked with OpenAI's fine-tuning checks
// (test/support/openai-ft-check.ts); formats, filters, deduplication, votes, the split, redaction, workspace scope,
// refused parameters, and a storage failure mid-export (the answer is cut short, never a complete-looking file).
import { expect } from 'chai';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '@clickhouse/client';
import type { Storage } from '../../core/ports/storage.ts';
import { DuckDbStorage } from '../../storage/duckdb.ts';
import { expectValidChatLines, expectValidDpoLines } from '../support/openai-ft-check.ts';
import { BACKENDS, cli, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';

const EMAIL = 'ana.silva@example.com';
type Line = Record<string, any>;

const ndjson = (text: string): Line[] =>
  text === ''
    ? []
    : text
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as Line);
const lastText = (l: Line): string => l.messages.at(-1).content;

for (const backend of BACKENDS)
  describe(`training export (${backend})`, function () {
    this.timeout(180_000);
    let s: TestServer;
    let auth: Record<string, string>;
    let wsName: string;
    const exp = async (query = '', headers = auth) => {
      const r = await get(`${s.url}/api/export/training${query}`, headers);
      return { ...r, lines: r.status === 200 ? ndjson(r.text) : [] };
    };
    const trace = (body: Record<string, unknown>) => post(`${s.url}/api/traces`, { model: 'm1', ...body }, auth);
    const vote = (traceId: string, value: 'up' | 'down', user: string) =>
      post(`${s.url}/api/ingest/feedback`, { trace_id: traceId, value, user_id: user }, auth);

    before(async () => {
      // Two index rows a page: every export below reads many pages, and groups straddle them.
      s = await startTestServer(backend, { TRACEGATE_EXPORT_PAGE_ROWS: '2' });
      wsName = `export-${backend}`;
      auth = { authorization: `Bearer ${(await s.key(wsName)).key}` };
      const other = { authorization: `Bearer ${(await s.key(`other-${backend}`)).key}` };
      const sent = [
        await trace({ requestId: 'dup-1', prompt: 'Capital of France?', response: 'Paris.' }),
        await trace({ requestId: 'dup-2', prompt: 'Capital of France?', response: 'Paris.' }),
        await trace({ requestId: 'good', prompt: 'Say hi', response: 'Hello there!' }),
        await trace({ requestId: 'bad', prompt: 'Say hi', response: 'Go away.' }),
        await trace({ requestId: 'mixed', prompt: 'Joke?', response: 'A pun.' }),
        await trace({ requestId: 'incomplete', prompt: 'Half', status: 'error' }),
        await trace({ requestId: 'no-response', prompt: 'Nothing back' }),
        await trace({ requestId: 'mail', prompt: `Write to ${EMAIL}`, response: `Done, wrote ${EMAIL}` }),
        await trace({ requestId: 'staging', prompt: 'env?', response: 'staging', environment: 'staging' }),
        await trace({ requestId: 'other-model', prompt: 'model?', response: 'm2', model: 'm2' }),
        await trace({ requestId: 'summary', prompt: 'Summarize it', response: 'Short.', actionName: 'summarize' }),
        await trace({
          requestId: 'picked',
          prompt: 'Best answer?',
          response: 'This one.',
          parameters: { trainingPreferred: true, source: 'sdk' },
        }),
        await trace({
          requestId: 'tools',
          prompt: 'weather?',
          response: 'It is 18 degrees.',
          'gen_ai.input.messages': [
            { role: 'system', parts: [{ type: 'text', content: 'Be brief.' }] },
            { role: 'user', parts: [{ type: 'text', content: 'Weather in Paris?' }] },
            {
              role: 'assistant',
              parts: [{ type: 'tool_call', id: 'c1', name: 'weather', arguments: { city: 'Paris' } }],
            },
            { role: 'tool', parts: [{ type: 'tool_call_response', id: 'c1', response: { celsius: 18 } }] },
          ],
        }),
        // One conversation over several calls: it must land on one side of the split.
        ...(await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            trace({
              requestId: `conv-${i}`,
              prompt: `turn ${i}`,
              response: `reply ${i}`,
              metadata: { sessionId: 'conv-A' },
            }),
          ),
        )),
        ...(await Promise.all(
          Array.from({ length: 30 }, (_, i) => trace({ requestId: `many-${i}`, prompt: `q${i}`, response: `a${i}` })),
        )),
      ];
      sent.push(
        await post(`${s.url}/api/traces`, { requestId: 'theirs', model: 'm1', prompt: 'x', response: 'y' }, other),
      );
      for (const r of sent) expect(r.status, r.text).to.equal(200);
      await flushed(s);
      for (const [t, v, u] of [
        ['good', 'up', 'u1'],
        ['bad', 'down', 'u1'],
        ['mixed', 'up', 'u1'],
        ['mixed', 'down', 'u2'],
        ['dup-2', 'up', 'u1'],
      ] as const)
        expect((await vote(t, v, u)).status).to.equal(200);
      await flushed(s);
    });
    after(() => s?.close());

    it('openai_chat (the default): trainable calls only, identical pairs once, thumbs-down and mixed left out', async () => {
      const r = await exp();
      expect(r.status, r.text).to.equal(200);
      expect(r.headers.get('content-type')).to.match(/^application\/x-ndjson/);
      expectValidChatLines(r.lines);
      const answers = r.lines.map(lastText);
      expect(answers.filter((a) => a === 'Paris.')).to.have.length(1);
      expect(answers).to.include.members(['Hello there!', 'This one.', 'It is 18 degrees.', 'Short.', 'm2']);
      for (const left of ['Go away.', 'A pun.', 'y']) expect(answers).to.not.include(left);
      expect(JSON.stringify(r.lines)).to.not.include('Half').and.not.include('Nothing back');
      // Paris once, good, mail, staging, m2, summary, picked, tools; 6 conv-A; 30 many
      expect(r.lines).to.have.length(44);
      const tools = r.lines.find((l) => lastText(l) === 'It is 18 degrees.')!;
      expect(tools.messages.map((m: Line) => m.role)).to.deep.equal([
        'system',
        'user',
        'assistant',
        'tool',
        'assistant',
      ]);
      expect(tools.messages[2].tool_calls[0].function).to.deep.equal({
        name: 'weather',
        arguments: '{"city":"Paris"}',
      });
      // The same export twice: the same bytes (a stable order).
      expect((await exp()).text).to.equal(r.text);
    });

    it('filters: feedback=up, curated, model, actionName, environment, source, from/to', async () => {
      const answers = async (q: string) => {
        const r = await exp(q);
        expect(r.status, r.text).to.equal(200);
        expectValidChatLines(r.lines);
        return r.lines.map(lastText).sort();
      };
      expect(await answers('?feedback=up')).to.deep.equal(['Hello there!', 'Paris.']);
      expect(await answers('?curated=true')).to.deep.equal(['This one.']);
      expect(await answers('?source=sdk')).to.deep.equal(['This one.']);
      expect(await answers('?model=m2')).to.deep.equal(['m2']);
      expect(await answers('?actionName=summarize')).to.deep.equal(['Short.']);
      expect(await answers('?environment=staging')).to.deep.equal(['staging']);
      const now = Date.now();
      expect(await answers(`?from=${now + 60_000}`)).to.deep.equal([]);
      expect(await answers(`?to=${now - 3_600_000}`)).to.deep.equal([]);
      expect(await answers(`?from=${now - 3_600_000}&to=${now + 60_000}&model=m2`)).to.deep.equal(['m2']);
      // Bounds outside what storage holds (before 1970, past 2106) are clamped, as the trace list clamps them.
      expect(await answers('?from=1960-01-01&to=2600-01-01&model=m2')).to.deep.equal(['m2']);
      expect(await answers('?from=1960-01-01&to=1965-01-01')).to.deep.equal([]);
      expect(await answers('?from=2600-01-01')).to.deep.equal([]);
    });

    it('hf_kto: voted answers with their label; openai_dpo: the approved and the rejected answer to one prompt', async () => {
      const kto = await exp('?format=hf_kto');
      expect(kto.status).to.equal(200);
      const labels = kto.lines.map((l) => [l.completion[0].content, l.label]).sort();
      expect(labels).to.deep.equal([
        ['Go away.', false],
        ['Hello there!', true],
        ['Paris.', true],
      ]);
      expect(kto.lines[0]).to.have.keys('prompt', 'completion', 'label');
      expect((await exp('?format=hf_kto&feedback=down')).lines.map((l) => l.label)).to.deep.equal([false]);
      const dpo = await exp('?format=openai_dpo');
      expect(dpo.status).to.equal(200);
      expectValidDpoLines(dpo.lines);
      expect(dpo.lines).to.have.length(1);
      expect(dpo.lines[0]!.input.messages).to.deep.equal([{ role: 'user', content: 'Say hi' }]);
      expect(dpo.lines[0]!.preferred_output).to.deep.equal([{ role: 'assistant', content: 'Hello there!' }]);
      expect(dpo.lines[0]!.non_preferred_output).to.deep.equal([{ role: 'assistant', content: 'Go away.' }]);
    });

    it('openai_dpo from curation: a curated coach answer against the draft of its coach session it replaced', async () => {
      const coach = { authorization: `Bearer ${(await s.key(`coach-${backend}`)).key}` };
      const coachTrace = (requestId: string, actionName: string, response: string, extra: object = {}) =>
        post(
          `${s.url}/api/traces`,
          {
            requestId,
            model: 'local',
            prompt: 'Explain DNS briefly',
            response,
            actionName,
            parameters: { source: 'coach', coachSessionId: 'cs-1', ...extra },
          },
          coach,
        );
      for (const r of [
        await coachTrace('draft-1', 'coach_local_draft', 'DNS is a phone book.'),
        await coachTrace('cur-1', 'coach_curated', 'DNS maps names to IP addresses.', { trainingPreferred: true }),
      ])
        expect(r.status, r.text).to.equal(200);
      await flushed(s);
      const dpo = await exp('?format=openai_dpo', coach);
      expectValidDpoLines(dpo.lines);
      expect(dpo.lines.map((l) => [l.preferred_output[0].content, l.non_preferred_output[0].content])).to.deep.equal([
        ['DNS maps names to IP addresses.', 'DNS is a phone book.'],
      ]);
      expect(dpo.lines[0]!.input.messages).to.deep.equal([{ role: 'user', content: 'Explain DNS briefly' }]);
      expect((await exp('?format=openai_dpo&source=native', coach)).lines).to.deep.equal([]);
      const curated = await exp('?curated=true', coach);
      expect(curated.lines.map(lastText)).to.deep.equal(['DNS maps names to IP addresses.']);
    });

    it('split: each line marked train or eval, one conversation on one side, the same every time', async () => {
      const r = await exp('?evalFraction=0.3&provenance=true');
      expectValidChatLines(r.lines.map(({ split: _s, metadata: _m, ...l }) => l));
      const sides = new Map(r.lines.map((l) => [l.metadata.traceId as string, l.split as string]));
      expect(new Set(sides.values())).to.deep.equal(new Set(['train', 'eval']));
      const conv = [0, 1, 2, 3, 4, 5].map((i) => sides.get(`conv-${i}`));
      expect(new Set(conv).size, 'conv-A on one side').to.equal(1);
      expect((await exp('?evalFraction=0.3&provenance=true')).text).to.equal(r.text);
      const reseeded = await exp('?evalFraction=0.3&splitSeed=other&provenance=true');
      expect(reseeded.lines.map((l) => l.split)).to.not.deep.equal(r.lines.map((l) => l.split));
    });

    it('split=train|eval: that side alone, unmarked, valid as it is; the two sides make the whole', async () => {
      const marked = await exp('?evalFraction=0.3&provenance=true');
      const side = async (name: string) => (await exp(`?evalFraction=0.3&split=${name}&provenance=true`)).lines;
      const [train, evalLines] = [await side('train'), await side('eval')];
      for (const l of [...train, ...evalLines]) expect(l).to.not.have.property('split');
      expectValidChatLines([...train, ...evalLines].map(({ metadata: _m, ...l }) => l));
      const ids = (lines: typeof train) => lines.map((l) => l.metadata.spanId as string);
      expect(ids(train)).to.deep.equal(ids(marked.lines.filter((l) => l.split === 'train')));
      expect(ids(evalLines)).to.deep.equal(ids(marked.lines.filter((l) => l.split === 'eval')));
      const refused = await fetch(`${s.url}/api/export/training?split=eval`, { headers: auth });
      expect(refused.status).to.equal(400);
      expect(((await refused.json()) as { error: { message: string } }).error.message).to.include('split');
    });

    it("the workspace's current policy redacts what is exported; another workspace's traces never show", async () => {
      expect(JSON.stringify((await exp()).lines)).to.include(EMAIL); // stored under the default policy (flag)
      const file = join(s.dataDir, 'policy.json');
      writeFileSync(file, JSON.stringify({ version: 2, actions: { email: 'redact' } }));
      const set = await cli(s, ['policy', 'set', '--workspace', wsName, '--file', file]);
      expect(set.code, set.stderr).to.equal(0);
      const after = await exp();
      expect(JSON.stringify(after.lines)).to.not.include(EMAIL);
      expect(after.lines.map(lastText)).to.include('Done, wrote [REDACTED:email]');
      expectValidChatLines(after.lines);
      const other = await exp('', { authorization: `Bearer ${(await s.key(`other-${backend}`)).key}` });
      expect(other.lines.map(lastText)).to.deep.equal(['y']);
      expect((await exp('', {})).status).to.equal(401);
    });

    it('refuses an unknown format or parameter, a bad value or combination: 400 naming it', async () => {
      const cases: Array<[string, string]> = [
        ['?format=jsonl', 'format'],
        ['?fromm=2026-01-01', 'fromm'],
        ['?curated=yes', 'curated'],
        ['?feedback=sideways', 'feedback'],
        ['?feedback=down', 'feedback'],
        ['?format=openai_dpo&feedback=up', 'feedback'],
        ['?evalFraction=1.5', 'evalFraction'],
        ['?splitSeed=x', 'splitSeed'],
        ['?from=yesterday', 'from'],
        ['?source=elsewhere', 'source'],
      ];
      for (const [q, field] of cases) {
        const r = await exp(q);
        expect(r.status, q).to.equal(400);
        expect(r.json.error.code, q).to.equal('invalid_query');
        expect(r.json.error.message, q).to.match(new RegExp(`^${field}`));
        expect(r.json.error.details[0].field, q).to.equal(field);
      }
    });

    it('tracegate export training writes the same NDJSON through the running server, to --out or stdout', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tracegate-export-cli-'));
      try {
        const out = join(dir, 'train.jsonl');
        const w = await cli(s, ['export', 'training', '--workspace', wsName, '--feedback', 'up', '--out', out]);
        expect(w.code, w.stderr).to.equal(0);
        expect(readFileSync(out, 'utf8')).to.equal((await exp('?feedback=up')).text);
        const kto = await cli(s, ['export', 'training', '--workspace', wsName, '--format', 'hf_kto']);
        expect(kto.code, kto.stderr).to.equal(0);
        expect(kto.stdout).to.equal((await exp('?format=hf_kto')).text);
        const bad = await cli(s, ['export', 'training', '--workspace', wsName, '--format', 'csv']);
        expect(bad.code).to.equal(2);
        expect(bad.stderr).to.match(/format/);
        const none = await cli(s, ['export', 'training', '--workspace', 'no-such-ws', '--out', join(dir, 'x')]);
        expect(none.code).to.equal(1);
        expect(none.stderr).to.include('no workspace');
        expect(existsSync(join(dir, 'x'))).to.equal(false);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

// Offline: the CLI opens the embedded store itself when no server holds DATA_DIR.
describe('tracegate export training without a running server (duckdb)', function () {
  this.timeout(120_000);
  it('writes the export from storage directly', async () => {
    const s = await startTestServer('duckdb');
    const { key } = await s.key('offline');
    for (let i = 0; i < 3; i++)
      expect(
        (
          await post(
            `${s.url}/api/traces`,
            { requestId: `o${i}`, prompt: `p${i}`, response: `r${i}` },
            {
              authorization: `Bearer ${key}`,
            },
          )
        ).status,
      ).to.equal(200);
    await flushed(s);
    const online = (await get(`${s.url}/api/export/training`, { authorization: `Bearer ${key}` })).text;
    const config = s.config;
    await s.running.close();
    try {
      const r = await cli(s, ['export', 'training', '--workspace', 'offline']);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.equal(online);
      expectValidChatLines(ndjson(r.stdout));
      expect(ndjson(r.stdout)).to.have.length(3);
    } finally {
      rmSync(config.DATA_DIR, { recursive: true, force: true });
    }
  });
});

/**
 * A storage failure after the answer has started: the connection is cut, so the client sees an incomplete transfer
 * (fetch throws, the CLI exits 1 and leaves no file), never a shorter file that looks complete. Lines large enough
 * that the export cannot run ahead of a client that has not read yet.
 */
describe('training export: storage failing mid-export', function () {
  this.timeout(240_000);
  const big = (i: number) => `${i} ${'x'.repeat(400 * 1024)}`;
  const seed = async (s: TestServer, auth: Record<string, string>) => {
    for (let i = 0; i < 60; i++)
      expect(
        (await post(`${s.url}/api/traces`, { requestId: `big-${i}`, prompt: `p${i}`, response: big(i) }, auth)).status,
      ).to.equal(200);
    await flushed(s);
  };
  const cutShort = async (s: TestServer, auth: Record<string, string>, fail: () => Promise<void>) => {
    const res = await fetch(`${s.url}/api/export/training`, { headers: auth });
    expect(res.status).to.equal(200);
    await fail();
    let error: unknown = null;
    let received = 0;
    try {
      for await (const chunk of res.body!) received += chunk.length;
    } catch (err) {
      error = err;
    }
    expect(error, `read ${received} bytes and saw the end`).to.be.instanceOf(Error);
    expect(received)
      .to.be.above(0)
      .and.below(60 * 400 * 1024);
  };

  it('storage unavailable for a moment mid-export: the page is read again, the export completes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-export-blip-'));
    const real = new DuckDbStorage(join(dir, 'db.duckdb'));
    let pages = 0;
    let blips = 0;
    // The real store, its third page refused once as a ClickHouse client refuses a connection (an outage).
    const blinking = new Proxy(real, {
      get: (target, prop, recv) => {
        const v = Reflect.get(target, prop, recv);
        if (typeof v !== 'function') return v;
        if (prop !== 'trainingPage') return v.bind(target);
        return (...args: unknown[]) => {
          if (++pages === 3 && blips++ === 0)
            return Promise.reject(
              Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8123'), { code: 'ECONNREFUSED' }),
            );
          return (v as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        };
      },
    }) as Storage;
    const s = await startTestServer('duckdb', { TRACEGATE_EXPORT_PAGE_ROWS: '1' }, blinking);
    try {
      const auth = { authorization: `Bearer ${(await s.key('blip')).key}` };
      for (let i = 0; i < 6; i++)
        expect(
          (await post(`${s.url}/api/traces`, { requestId: `b${i}`, prompt: `p${i}`, response: `r${i}` }, auth)).status,
        ).to.equal(200);
      await flushed(s);
      const r = await get(`${s.url}/api/export/training`, auth);
      expect(r.status).to.equal(200);
      expect(ndjson(r.text).map(lastText).sort()).to.deep.equal(['r0', 'r1', 'r2', 'r3', 'r4', 'r5']);
      expect(blips).to.equal(1);
      expect((await get(`${s.url}/metrics`)).text).to.match(/^tracegate_training_export_read_retries_total 1$/m);
    } finally {
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('duckdb: the database closed under the export', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-export-fail-'));
    const storage: Storage = new DuckDbStorage(join(dir, 'db.duckdb'));
    const s = await startTestServer(
      'duckdb',
      { TRACEGATE_EXPORT_PAGE_ROWS: '1', TRACEGATE_EXPORT_MAX_CONCURRENT: '1', TRACEGATE_EXPORT_READ_RETRIES: '1' },
      storage,
    );
    try {
      const auth = { authorization: `Bearer ${(await s.key('fail')).key}` };
      await seed(s, auth);
      // One export at a time here: a second is refused while the first runs; a client leaving frees its place.
      const leaving = new AbortController();
      const first = await fetch(`${s.url}/api/export/training`, { headers: auth, signal: leaving.signal });
      expect(first.status).to.equal(200);
      const busy = await get(`${s.url}/api/export/training`, auth);
      expect([busy.status, busy.json.error.code, busy.headers.get('retry-after')]).to.deep.equal([
        503,
        'server_busy',
        '5',
      ]);
      leaving.abort();
      let again = busy;
      for (let i = 0; i < 50 && again.status === 503; i++) {
        await new Promise((r) => setTimeout(r, 100));
        again = await get(`${s.url}/api/export/training?format=hf_kto`, auth);
      }
      expect(again.status).to.equal(200);
      await cutShort(s, auth, () => storage.close());
      const metrics = (await get(`${s.url}/metrics`)).text;
      expect(metrics).to.match(/^tracegate_training_export_failures_total 1$/m);
    } finally {
      await s.close().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('clickhouse: the index table dropped under the export; the CLI exits 1 and writes no file', async () => {
    const s = await startTestServer('clickhouse', { TRACEGATE_EXPORT_PAGE_ROWS: '1' });
    const client = createClient({ url: s.config.CLICKHOUSE_URL! });
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-export-fail-'));
    try {
      const auth = { authorization: `Bearer ${(await s.key('fail')).key}` };
      await seed(s, auth);
      const db = s.config.CLICKHOUSE_DATABASE;
      await cutShort(s, auth, () => client.command({ query: `DROP TABLE ${db}.training_calls` }).then(() => {}));
      // Now failing from the first page: the CLI gets the 503, exits 1 and writes nothing.
      const out = join(dir, 'train.jsonl');
      const r = await cli(s, ['export', 'training', '--workspace', 'fail', '--out', out]);
      expect(r.code).to.equal(1);
      expect(r.stderr).to.include('not written');
      expect(existsSync(out)).to.equal(false);
      expect(existsSync(`${out}.partial`)).to.equal(false);
    } finally {
      await client.close();
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
