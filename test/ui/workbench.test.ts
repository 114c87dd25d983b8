// The workbench page in a real Chromium against a real server and llama.cpp's own llama-server running the tiny
// deterministic model (test/support/local-model): a streamed chat whose answer is recorded as a trace, the coach
// (a draft corrected, then curated into a training pick), and "re-run in the workbench" from a model call.
import { expect } from 'chai';
import type { Browser } from 'playwright-core';
import { inTab, launch } from '../support/browser.ts';
import {
  type ModelServer,
  startLlamaServer,
  TINY_MODEL,
  TINY_REPLY,
  TINY_REPLY_DELTAS,
} from '../support/local-model/servers.ts';
import { flushed, startTestServer, type TestServer } from '../support/server.ts';
import { call, signIn } from '../support/sessions.ts';
import { type Seeded, seed } from '../support/ui-seed.ts';

/** The page has the local server's models (GET /api/local/models) and picked the default. */
const modelReady = (page: import('playwright-core').Page) =>
  page.waitForFunction(
    (m) => (document.querySelector('aside select') as HTMLSelectElement | null)?.value === m,
    TINY_MODEL,
  );

describe('web UI workbench (chromium, llama-server)', function () {
  this.timeout(90_000);
  let model: ModelServer;
  let s: TestServer;
  let browser: Browser;
  let key: { workspaceId: string; key: string };
  let cookie: string;
  let data: Seeded;
  const signedIn = () => ({ base: s.url, cookie });
  const bearer = () => ({ headers: { authorization: `Bearer ${key.key}` } });

  before(async function () {
    this.timeout(31 * 60_000); // a fresh machine waits here for the llama-server build make test started
    model = await startLlamaServer();
    [s, browser] = await Promise.all([
      startTestServer('duckdb', {
        TRACEGATE_LOCAL_MODEL_URL: model.url,
        TRACEGATE_LOCAL_MODEL_API: 'openai',
        TRACEGATE_LOCAL_MODEL: TINY_MODEL,
      }),
      launch(),
    ]);
    key = await s.key(`wb-${Date.now().toString(36)}`);
    data = await seed(s.url, key.key, 0);
    await flushed(s);
    cookie = await signIn(s.url, key.key);
  });
  after(async () => {
    await browser?.close();
    await s?.close();
    await model?.stop();
  });

  it(
    'chats with the local model, streaming its answer; the run is recorded as a trace the page links to',
    inTab(
      () => browser,
      signedIn,
      async ({ page }) => {
        await page.goto(`${s.url}/ui/workbench`);
        await modelReady(page);
        await page.getByLabel('Message').fill('Say hello');
        await page.getByLabel('Message').press('Control+Enter');
        const status = page.getByRole('status').filter({ hasText: TINY_MODEL });
        await status.waitFor();
        const answer = await page.locator('ol.thread li.role-assistant .md').textContent();
        expect(answer?.trim()).to.equal(TINY_REPLY);
        // Streamed: one delta event per reply token of the tiny model, read by the page as they came.
        expect(await status.textContent()).to.include(`streamed in ${TINY_REPLY_DELTAS.length} parts`);
        const href = await status.getByRole('link', { name: 'open the recorded trace' }).getAttribute('href');
        const traceId = href!.split('/').at(-1)!;
        await flushed(s);
        const stored = await call(s.url, `/api/traces/${traceId}`, bearer());
        expect(stored.status, stored.text).to.equal(200);
        expect(stored.json.trace.spans[0]).to.include({
          response: TINY_REPLY,
          source: 'agent_lab',
          actionName: 'workbench_chat',
        });
      },
    ),
  );

  it(
    'coach: a draft, corrected, then curated into a training pick',
    inTab(
      () => browser,
      signedIn,
      async ({ page }) => {
        await page.goto(`${s.url}/ui/workbench`);
        await modelReady(page);
        await page.getByRole('tab', { name: 'Coach' }).click();
        await page.getByLabel('Prompt', { exact: true }).fill('Greet the customer');
        await page.getByRole('button', { name: 'Draft an answer' }).click();
        const edit = page.getByLabel('Corrected answer');
        await page.waitForFunction(
          () => !(document.querySelector('#coach-edit') as HTMLTextAreaElement | null)?.disabled,
        );
        expect(await edit.inputValue()).to.equal(TINY_REPLY);
        await edit.fill('Hello! How can I help you today?');
        await page.getByRole('button', { name: 'Curate into a training pick' }).click();
        const done = page.getByRole('status').filter({ hasText: 'Curated' });
        await done.waitFor();
        const curatedId = (await done.getByRole('link').textContent())!;
        await flushed(s);
        const span = (await call(s.url, `/api/traces/${curatedId}`, bearer())).json.trace.spans[0];
        expect(span).to.include({
          actionName: 'coach_curated',
          response: 'Hello! How can I help you today?',
          trainingPreferred: true,
        });
        expect(span.attributes['coach.edited']).to.equal(true);
      },
    ),
  );

  it(
    '"Re-run in the workbench" from a model call brings its instructions and messages; the re-run answers',
    inTab(
      () => browser,
      signedIn,
      async ({ page }) => {
        await page.goto(`${s.url}/ui/traces/${data.agentTraceId}?span=${data.llmSpanId}`);
        await page.getByRole('link', { name: 'Re-run in the workbench' }).click();
        await page.waitForURL(/\/ui\/workbench\?trace=/);
        await page.waitForFunction(() => (document.querySelector('#chat-input') as HTMLTextAreaElement | null)?.value);
        expect(await page.getByLabel('Instructions (system prompt)').inputValue()).to.equal(
          'You are a helpful support agent.',
        );
        expect(await page.getByLabel('Message').inputValue()).to.include('Where is my order #4521?');
        await modelReady(page);
        await page.getByRole('button', { name: 'Send' }).click();
        await page.getByRole('status').filter({ hasText: TINY_MODEL }).waitFor();
        expect((await page.locator('ol.thread li.role-assistant .md').textContent())?.trim()).to.equal(TINY_REPLY);
      },
    ),
  );
});
