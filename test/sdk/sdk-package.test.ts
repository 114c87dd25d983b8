// The package as an application gets it: `npm pack` in packages/sdk (its prepack builds dist/ with tsc), the tarball
// installed into an empty project, imported there by name, used against a running tracegate, and type-checked by
// a TypeScript consumer. A second script runs it with no `process` global, as on an edge runtime.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { flushed, startTestServer, type TestServer } from '../support/server.ts';
import { listTraces } from './support/receiver.ts';

const exec = promisify(execFile);
const SDK = resolve('packages/sdk');
const TSC = resolve('node_modules/typescript/bin/tsc');
/** npm without the network: everything it needs is in the tarball. */
const NPM_OFFLINE = ['--offline', '--no-audit', '--no-fund', '--loglevel=error'];

describe('sdk (TypeScript): the packed tarball in an empty project', function () {
  this.timeout(180_000);
  let s: TestServer;
  let dir: string;
  let app: string;
  let tarball: string;

  before(async () => {
    s = await startTestServer('duckdb');
    dir = mkdtempSync(join(tmpdir(), 'tracegate-sdk-pack-'));
    const { stdout } = await exec('npm', ['pack', '--pack-destination', dir, ...NPM_OFFLINE], { cwd: SDK });
    tarball = join(dir, stdout.trim().split('\n').at(-1)!);
    app = join(dir, 'app');
    mkdirSync(app);
    writeFileSync(
      join(app, 'package.json'),
      JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }),
    );
    await exec('npm', ['install', tarball, ...NPM_OFFLINE], { cwd: app });
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds the built JavaScript, declarations, README and package.json only, and depends on nothing', async () => {
    expect(tarball).to.match(/tracegate-sdk-0\.1\.0\.tgz$/);
    const { stdout } = await exec('tar', ['-tzf', tarball]);
    const files = stdout.trim().split('\n').sort();
    expect(files).to.include.members([
      'package/package.json',
      'package/README.md',
      'package/dist/index.js',
      'package/dist/index.d.ts',
    ]);
    expect(
      files.filter((f) => !/^package\/(package\.json|README\.md|dist\/[\w-]+\.(js|d\.ts))$/.test(f)),
    ).to.deep.equal([]);
    const installed = readdirSync(join(app, 'node_modules'));
    expect(installed).to.deep.equal(['.package-lock.json', '@tracegate']);
  });

  it('imported by name, it stores traces in a running tracegate', async () => {
    const { key } = await s.key();
    writeFileSync(
      join(app, 'main.mjs'),
      `import { Tracegate } from '@tracegate/sdk';
const tg = new Tracegate({ onError: (e) => console.error('error', e.code, e.message) });
const ids = [tg.trace('gpt-4o-mini', 'from the packed SDK', { response: 'ok', app: 'empty-project' })];
ids.push(tg.trace({ model: 'gpt-4o-mini', prompt: 'options form', response: 'ok', actionName: 'packed' }));
await tg.shutdown();
console.log(JSON.stringify({ ids, stats: tg.stats }));
`,
    );
    const { stdout, stderr } = await exec(process.execPath, ['main.mjs'], {
      cwd: app,
      env: { ...process.env, TRACEGATE_API_KEY: key, TRACEGATE_BASE_URL: s.url },
    });
    expect(stderr).to.equal('');
    const out = JSON.parse(stdout);
    expect(out.stats).to.deep.include({ sent: 2, failed: 0, queued: 0 });
    await flushed(s);
    const stored = await listTraces(s.url, key);
    expect(stored.map((t) => t.traceId).sort()).to.deep.equal([...out.ids].sort());
    expect(stored.every((t) => t.source === 'sdk')).to.equal(true);
  });

  it('works with no process global at all (edge runtimes): fetch, AbortController, crypto and timers only', async () => {
    const { key } = await s.key();
    writeFileSync(
      join(app, 'edge.mjs'),
      `const proc = globalThis.process;
Object.defineProperty(globalThis, 'process', { value: undefined, configurable: true, writable: true });
const { Tracegate } = await import('@tracegate/sdk');
const tg = new Tracegate({ apiKey: ${JSON.stringify(key)}, baseUrl: ${JSON.stringify(s.url)}, exportMode: 'immediate' });
const id = tg.trace('gpt-4o-mini', 'from an edge runtime', { response: 'ok' });
await tg.flush();
const stats = tg.stats;
globalThis.process = proc;
console.log(JSON.stringify({ id, stats }));
`,
    );
    const { stdout } = await exec(process.execPath, ['edge.mjs'], { cwd: app });
    const out = JSON.parse(stdout);
    expect(out.stats).to.deep.include({ sent: 1, failed: 0 });
    await flushed(s);
    expect((await listTraces(s.url, key)).map((t) => t.traceId)).to.deep.equal([out.id]);
  });

  it('type-checks in a TypeScript project without Node types (declarations complete and self-contained)', async () => {
    writeFileSync(
      join(app, 'check.ts'),
      `import { Tracegate, TracegateError, wrapOpenAI, type FeedbackInput, type TraceOptions } from '@tracegate/sdk';
const tg = new Tracegate({ apiKey: 'k', onError: (e: TracegateError) => void e.code });
const id: string = tg.trace('gpt-4o-mini', 'prompt', { response: 'answer' });
const options: TraceOptions = { model: 'm', prompt: [{ role: 'user', content: 'hi' }], metrics: { latencyMs: 3 } };
tg.trace(options);
const vote: FeedbackInput = { traceId: id, value: 'up', userId: 'u' };
tg.feedback(vote);
const { spanId }: { spanId: string } = tg.toolCall({ name: 'lookup', traceId: id });
const client = wrapOpenAI({ responses: { create: () => null } }, { tracegate: tg, actionName: 'a' });
void spanId;
void client;
// @ts-expect-error a vote's value is up/down/true/false/1/0/-1/null
tg.feedback({ traceId: id, value: 'sideways' });
`,
    );
    const config = {
      compilerOptions: {
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        lib: ['es2022', 'dom'],
        types: [],
        strict: true,
        noEmit: true,
        skipLibCheck: false,
      },
      files: ['check.ts'],
    };
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(config));
    await exec(process.execPath, [TSC, '-p', '.'], { cwd: app });
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        ...config,
        compilerOptions: { ...config.compilerOptions, module: 'esnext', moduleResolution: 'bundler' },
      }),
    );
    await exec(process.execPath, [TSC, '-p', '.'], { cwd: app });
  });
});
