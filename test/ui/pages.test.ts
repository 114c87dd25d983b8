// The web UI in a real Chromium against a real server (embedded storage) holding realistic data (test/support/ui-seed.ts):
// sign-in with a key and with the CLI's one-time link, the trace list and its filters in the URL, a trace's deep
// link, j/k, chat and raw views, a vote stored and retracted (read back through the API), and the 5,000-span trace
// within its budget. Any console error or unexpected failed request fails a test (test/support/browser.ts).
import { expect } from 'chai';
import type { Browser } from 'playwright-core';
import { inTab, launch } from '../support/browser.ts';
import { cli, flushed, startTestServer, type TestServer } from '../support/server.ts';
import { call, signIn } from '../support/sessions.ts';
import { type Seeded, seed } from '../support/ui-seed.ts';

/** Wall time from navigation to the first rows of the 5,000-span tree on screen, on this 2-core machine under load. */
const BIG_TRACE_BUDGET_MS = 8000;

describe('web UI pages (chromium)', function () {
  this.timeout(60_000);
  let s: TestServer;
  let browser: Browser;
  let key: { workspaceId: string; key: string };
  let data: Seeded;
  let cookie: string;
  const signedIn = () => ({ base: s.url, cookie });
  const signedOut = () => ({ base: s.url });

  before(async function () {
    this.timeout(120_000);
    [s, browser] = await Promise.all([startTestServer('duckdb', { TRACEGATE_AUTH_FAILURE_LIMIT: '1000' }), launch()]);
    key = await s.key(`ui-${Date.now().toString(36)}`);
    data = await seed(s.url, key.key, 5000);
    await flushed(s);
    cookie = await signIn(s.url, key.key);
  });
  after(async () => {
    await browser?.close();
    await s?.close();
  });

  it(
    'signs in with the workspace key, keeps no key in the page or its storage, and signs out',
    inTab(
      () => browser,
      signedOut,
      async ({ page }) => {
        await page.goto(`${s.url}/ui/traces?model=gpt-4o`);
        // No cookie: straight to sign-in (no request bound to fail), the page asked for kept.
        await page.waitForURL(/\/ui\/signin\?next=/);
        await page.getByLabel('Workspace API key').fill(key.key);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.waitForURL(`${s.url}/ui/traces?model=gpt-4o`);
        await page.getByRole('table').waitFor();
        const kept = await page.evaluate((k) => {
          const stored = [...Object.values(localStorage), ...Object.values(sessionStorage)].join('\n');
          return {
            stored: stored.includes(k),
            html: document.documentElement.outerHTML.includes(k),
            cookie: document.cookie,
          };
        }, key.key);
        // The session cookie is HttpOnly: no script reads it.
        expect(kept).to.deep.equal({ stored: false, html: false, cookie: '' });
        const cookies = await page.context().cookies();
        expect(cookies.map((c) => [c.name, c.httpOnly, c.sameSite])).to.deep.equal([['tg_session', true, 'Strict']]);
        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.waitForURL(/\/ui\/signin$/);
        const gone = await call(s.url, '/api/auth/session', { cookie: `tg_session=${cookies[0]!.value}` });
        expect(gone.status).to.equal(401);
      },
    ),
  );

  it(
    'a wrong key is refused with the server’s message, and the page stays on sign-in',
    inTab(
      () => browser,
      signedOut,
      async (tab) => {
        tab.expect({ status: 401, url: /\/api\/auth\/session$/ });
        await tab.page.goto(`${s.url}/ui/signin`);
        await tab.page.getByLabel('Workspace API key').fill('tr_live_nope_nope');
        await tab.page.getByRole('button', { name: 'Sign in' }).click();
        await tab.page.getByRole('alert').waitFor();
        expect(await tab.page.getByRole('alert').textContent()).to.match(/key/i);
        expect(await tab.page.getByLabel('Workspace API key').inputValue()).to.equal('');
      },
    ),
  );

  it(
    'signs in with the link `tracegate sessions create` prints; the token leaves the address bar; the link works once',
    inTab(
      () => browser,
      signedOut,
      async (tab) => {
        const created = await cli(s, ['sessions', 'create', '--workspace', key.workspaceId, '--json']);
        expect(created.code, created.stderr).to.equal(0);
        const link = new URL(JSON.parse(created.stdout).link as string);
        expect(link.pathname).to.equal('/ui/signin');
        await tab.page.goto(`${s.url}${link.pathname}${link.hash}`);
        await tab.page.waitForURL(`${s.url}/ui/traces`);
        await tab.page.getByRole('table').waitFor();
        const history = await tab.page.evaluate(() => location.href);
        expect(history).not.to.include('token');
        // A second use of the same link: refused, and said so.
        tab.expect({ status: 401, url: /\/api\/auth\/session$/ });
        await tab.context.clearCookies();
        await tab.page.goto(`${s.url}${link.pathname}${link.hash}`);
        await tab.page.getByRole('alert').waitFor();
        expect(await tab.page.getByRole('alert').textContent()).to.match(/already used/);
      },
    ),
  );

  it(
    'lists traces with their columns; filters go into the URL and survive a reload; cursor paging',
    inTab(
      () => browser,
      signedIn,
      async ({ page }) => {
        await page.goto(`${s.url}/ui/traces`);
        await page.locator('table.list tbody tr').first().waitFor();
        const head = await page.locator('table.list thead th').allTextContents();
        expect(head).to.deep.equal([
          'Time',
          'Name',
          'Model',
          'Source',
          'Status',
          'Latency',
          'Tokens',
          'Cost',
          'Feedback',
          'Findings',
        ]);
        expect(await page.locator('table.list tbody tr').count()).to.equal(42);
        // The agent run: its findings column counts the email found in its prompt.
        const agentRow = page.locator('tr', { has: page.locator(`a[href="/ui/traces/${data.agentTraceId}"]`) });
        expect(await agentRow.locator('td').nth(9).textContent()).to.match(/^[1-9]/);
        await page.getByLabel('Model').fill('claude-3-5-haiku');
        await page.getByLabel('Status').selectOption('error');
        await page.getByRole('button', { name: 'Apply' }).click();
        await page.waitForURL(/model=claude-3-5-haiku/);
        expect(new URL(page.url()).searchParams.get('status')).to.equal('error');
        await page.reload();
        await page.locator('table.list tbody tr').first().waitFor();
        const models = await page.locator('table.list tbody tr td:nth-child(3)').allTextContents();
        const statuses = await page.locator('table.list tbody tr td:nth-child(5)').allTextContents();
        expect(models.length).to.be.greaterThan(0);
        expect(new Set(models)).to.deep.equal(new Set(['claude-3-5-haiku']));
        expect(new Set(statuses)).to.deep.equal(new Set(['error']));
        expect(await page.getByLabel('Model').inputValue()).to.equal('claude-3-5-haiku');
        // Pages of 10: older, then newer again.
        await page.goto(`${s.url}/ui/traces?limit=10`);
        await page.locator('table.list tbody tr').first().waitFor();
        const first = await page.locator('table.list tbody tr a').first().getAttribute('href');
        await page.getByRole('button', { name: 'Older →' }).click();
        await page.waitForURL(/cursor=/);
        await page.waitForFunction((f) => {
          const href = document.querySelector('table.list tbody tr a')?.getAttribute('href');
          return href !== undefined && href !== f;
        }, first);
        expect(await page.locator('table.list tbody tr').count()).to.equal(10);
        await page.getByRole('button', { name: '← Newer' }).click();
        await page.waitForFunction(
          (f) => document.querySelector('table.list tbody tr a')?.getAttribute('href') === f,
          first,
        );
      },
    ),
  );

  it(
    'jumps to a span by its id; a trace deep link selects the span in the URL; j/k move; chat, markdown and raw views',
    inTab(
      () => browser,
      signedIn,
      async ({ page }) => {
        await page.goto(`${s.url}/ui/traces`);
        await page.getByPlaceholder('Jump to trace or span id').fill(data.toolSpanId);
        await page.getByRole('button', { name: 'Open' }).click();
        await page.waitForURL(`${s.url}/ui/traces/${data.agentTraceId}?span=${data.toolSpanId}`);
        const tool = page.getByRole('region', { name: 'Tool call' });
        await tool.waitFor();
        expect(await tool.textContent())
          .to.include('lookup_order')
          .and.include('"order": "4521"')
          .and.include('"carrier": "DHL"');
        // j: the next span (the second model call), its answer in markdown: a list and a code block.
        await page.keyboard.press('j');
        await page.waitForURL(`${s.url}/ui/traces/${data.agentTraceId}?span=${data.llmSpanId}`);
        const response = page.getByRole('region', { name: 'Response' });
        await response.locator('ol li').first().waitFor();
        expect(await response.locator('ol li').count()).to.equal(2);
        expect(await response.locator('strong').first().textContent()).to.equal('#4521');
        await response.getByRole('button', { name: 'Raw' }).click();
        expect(await response.locator('pre.raw').textContent()).to.include('**#4521**');
        // The prompt as chat messages; the email found there is shown masked in the findings.
        const prompt = page.getByRole('region', { name: 'Prompt' });
        expect(await prompt.locator('li.msg .role').allTextContents()).to.deep.equal(['system', 'user']);
        const findings = page.getByRole('region', { name: 'Findings' });
        expect(await findings.textContent())
          .to.include('pii.email')
          .and.not.include('jane.doe@example.com');
        // Policy, the security alert naming the trace, and the guardrail verdict (k twice from here: the tool, then the
        // first model call; j twice: the guardrail).
        expect(await page.getByRole('region', { name: 'Policy decisions' }).textContent()).to.include('flag');
        expect(await page.getByRole('region', { name: 'Security alerts' }).textContent()).to.include(
          'Prompt injection attempt',
        );
        await page.keyboard.press('j');
        await page.getByText(/Guardrail pii_output \(output\):\s*tripped/).waitFor();
        await page.keyboard.press('k');
        await page.keyboard.press('k');
        await page.waitForURL(`${s.url}/ui/traces/${data.agentTraceId}?span=${data.toolSpanId}`);
        // The arrow keys in the focused tree: down to the model call (then its workbench link), and back up.
        await page.getByRole('tree').focus();
        await page.keyboard.press('ArrowDown');
        await page.waitForURL(`${s.url}/ui/traces/${data.agentTraceId}?span=${data.llmSpanId}`);
        await page.keyboard.press('ArrowUp');
        await page.waitForURL(`${s.url}/ui/traces/${data.agentTraceId}?span=${data.toolSpanId}`);
        await page.keyboard.press('j');
        const rerun = page.getByRole('link', { name: 'Re-run in the workbench' });
        expect(await rerun.getAttribute('href')).to.equal(
          `/ui/workbench?trace=${data.agentTraceId}&span=${data.llmSpanId}`,
        );
      },
    ),
  );

  it(
    'a vote is stored (read back through the API), a second click on the same thumb retracts it',
    inTab(
      () => browser,
      signedIn,
      async ({ page }) => {
        const trace = data.failedTraceId;
        const votes = async () => {
          await flushed(s);
          const a = await call(s.url, `/api/traces/${trace}`, { headers: { authorization: `Bearer ${key.key}` } });
          return a.json.trace.feedbackVotes.map((v: any) => [v.id, v.value, v.source]);
        };
        await page.goto(`${s.url}/ui/traces/${trace}`);
        const up = page.getByRole('button', { name: 'Thumbs up' });
        const down = page.getByRole('button', { name: 'Thumbs down' });
        await up.click();
        await page.waitForSelector('button[aria-label="Thumbs up"][aria-pressed="true"]');
        expect(await votes()).to.deep.equal([[`ui-${trace}`, 'up', 'ui']]);
        await down.click();
        await page.waitForSelector('button[aria-label="Thumbs down"][aria-pressed="true"]');
        expect(await votes()).to.deep.equal([[`ui-${trace}`, 'down', 'ui']]);
        // After a reload the page shows the stored vote; clicking it again retracts it.
        await page.reload();
        await page.waitForSelector('button[aria-label="Thumbs down"][aria-pressed="true"]');
        await down.click();
        await page.waitForSelector('button[aria-label="Thumbs down"][aria-pressed="false"]');
        expect(await votes()).to.deep.equal([]);
      },
    ),
  );

  it(
    'an unknown trace says so; an unknown page is a 404',
    inTab(
      () => browser,
      signedIn,
      async (tab) => {
        tab.expect({ status: 404, url: /\/api\/traces\/no-such-trace$/ }, { status: 404, url: /\/ui\/nope$/ });
        await tab.page.goto(`${s.url}/ui/traces/no-such-trace`);
        await tab.page.getByText('Trace no-such-trace was not found in this workspace.').waitFor();
        const res = await tab.page.goto(`${s.url}/ui/nope`);
        expect(res?.status()).to.equal(404);
      },
    ),
  );

  it(
    `renders the 5,000-span trace within ${BIG_TRACE_BUDGET_MS} ms, virtualized, and j walks it`,
    inTab(
      () => browser,
      signedIn,
      async ({ page }) => {
        const started = Date.now();
        await page.goto(`${s.url}/ui/traces/${data.bigTraceId}`);
        await page.getByRole('treeitem').first().waitFor();
        const ms = Date.now() - started;
        const inDom = await page.getByRole('treeitem').count();
        const label = await page.getByRole('tree').getAttribute('aria-label');
        console.log(`      5,000-span trace: first rows after ${ms} ms (${inDom} rows in the DOM)`);
        expect(label).to.equal(`Spans (${data.bigSpanCount})`);
        expect(inDom).to.be.within(10, 120); // virtualized: only the rows in view
        expect(ms).to.be.below(BIG_TRACE_BUDGET_MS);
        for (let i = 0; i < 5; i++) await page.keyboard.press('j');
        await page.waitForFunction(() => new URL(location.href).searchParams.get('span') !== null);
        expect(await page.locator('[role=treeitem][aria-selected=true]').getAttribute('id')).to.equal('row-5');
        // The last span is reachable: scroll to the end.
        await page.getByRole('tree').evaluate((el) => el.scrollTo(0, el.scrollHeight));
        await page.getByText('item 4999', { exact: false }).waitFor();
      },
    ),
  );

  it(
    'the dashboard draws every chart from the analytics routes, and keeps its range in the URL',
    inTab(
      () => browser,
      signedIn,
      async ({ page }) => {
        await page.goto(`${s.url}/ui/dashboard`);
        const titles = [
          'Traces and tokens',
          'Latency of model calls (gpt-4o-mini)',
          'Cost by model',
          'Error rates',
          'Feedback',
          'Guardrails and security alerts',
        ];
        for (const title of titles) {
          const chart = page.getByRole('figure', { name: title });
          await chart.locator('canvas').waitFor();
          expect(Number(await chart.getAttribute('data-points')), title).to.be.greaterThan(0);
          // Drawn: the canvas holds painted pixels (series lines), not only a blank surface.
          const painted = await chart.locator('canvas').evaluate((c: HTMLCanvasElement) => {
            const px = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 3; i < px.length; i += 4) if (px[i]! > 0) n++;
            return n;
          });
          expect(painted, title).to.be.greaterThan(200);
        }
        expect(await page.locator('.totals').textContent()).to.include('Security alerts1');
        await page.getByRole('link', { name: 'Last 30d' }).click();
        await page.waitForURL(/range=30d/);
        await page.getByRole('figure', { name: 'Traces and tokens' }).locator('canvas').waitFor();
      },
    ),
  );

  it(
    'dark mode follows prefers-color-scheme',
    inTab(
      () => browser,
      () => ({ ...signedIn(), colorScheme: 'dark' as const }),
      async ({ page }) => {
        await page.goto(`${s.url}/ui/traces`);
        await page.getByRole('table').waitFor();
        const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
        expect(bg).to.equal('rgb(17, 20, 24)');
      },
    ),
  );
});
