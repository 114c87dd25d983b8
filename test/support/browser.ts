// The web UI's tests drive Debian's chromium with playwright-core: one browser per test file, a fresh context (its
// own cookies) per test. Any console error, page error, failed request or 4xx/5xx answer not declared expected fails
// the test, and a failing test leaves a screenshot in .tmp/ui-screenshots/.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

export const SCREENSHOTS = join(import.meta.dirname, '..', '..', '.tmp', 'ui-screenshots');

/** The system chromium: CHROMIUM_PATH, else Debian's binary (the /usr/bin wrapper prints noise on some machines). */
export function chromiumPath(): string {
  const found = [process.env.CHROMIUM_PATH, '/usr/lib/chromium/chromium', '/usr/bin/chromium'].find(
    (p) => p && existsSync(p),
  );
  if (!found)
    throw new Error(
      'chromium is not installed: run `make servers` (apt-get install chromium) or set CHROMIUM_PATH to a Chromium binary',
    );
  return found;
}

export function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    // --no-sandbox: tests may run as root, where Chromium's sandbox refuses to start.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** An answer a test expects to fail: status and a pattern of its URL. */
export interface Expected {
  status: number;
  url: RegExp;
}

export interface Tab {
  page: Page;
  context: BrowserContext;
  /** Problems seen so far: console errors, page errors, failed requests, unexpected 4xx/5xx. */
  problems: string[];
  /** Declares failures the test provokes on purpose. */
  expect(...failures: Expected[]): void;
}

export interface TabOptions {
  colorScheme?: 'light' | 'dark';
  viewport?: { width: number; height: number };
  /** `tg_session=…` to start signed in. */
  cookie?: string;
  base: string;
}

async function open(browser: Browser, o: TabOptions): Promise<Tab> {
  const context = await browser.newContext({
    viewport: o.viewport ?? { width: 1280, height: 860 },
    colorScheme: o.colorScheme ?? 'light',
  });
  if (o.cookie) {
    const [name, value] = o.cookie.split('=') as [string, string];
    await context.addCookies([{ name, value, url: o.base, httpOnly: true, sameSite: 'Strict' }]);
  }
  const page = await context.newPage();
  const expected: Expected[] = [];
  const problems: string[] = [];
  const isExpected = (status: number, url: string) => expected.some((e) => e.status === status && e.url.test(url));
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    // Chromium logs every 4xx/5xx as a console error too: those are judged by the response check.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource: the server responded with a status'))
      problems.push(`console error: ${m.text()}`);
  });
  page.on('requestfailed', (r) => {
    // A stream the page aborts on purpose (leaving a page mid-answer) is not a failure.
    if (r.failure()?.errorText !== 'net::ERR_ABORTED')
      problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !isExpected(r.status(), r.url())) problems.push(`HTTP ${r.status()} ${r.url()}`);
  });
  return { page, context, problems, expect: (...f) => expected.push(...f) };
}

/**
 * A test body run in a fresh tab: fails on any problem the tab saw, saves a screenshot when it fails, and closes the
 * tab either way.
 */
export function inTab(browser: () => Browser, options: () => TabOptions, body: (tab: Tab) => Promise<void>) {
  return async function (this: Mocha.Context) {
    const tab = await open(browser(), options());
    try {
      await body(tab);
      expect(tab.problems, 'console errors or failed requests').to.deep.equal([]);
    } catch (err) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      const name = (this.test?.fullTitle() ?? 'ui').replace(/[^\w-]+/g, '_').slice(0, 120);
      await tab.page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true }).catch(() => {});
      throw err;
    } finally {
      await tab.context.close();
    }
  };
}
