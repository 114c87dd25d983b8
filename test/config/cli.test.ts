// The management CLI (bin/tracegate.ts) as an operator runs it: real processes, against a running server (through
// its loopback admin routes) and offline (storage opened directly). Both ways must do and say the same.
import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from '../support/process.ts';
import { cli, flushed, get, post, startTestServer, testEnv, type TestServer } from '../support/server.ts';
import { DuckDbStorage } from '../../storage/duckdb.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { DEFAULT_POLICY } from '../../processors/governance/policy.ts';
import { storedRecordProblem } from '../../pipeline/refused.ts';
import { span } from '../support/spool.ts';

type Out = Awaited<ReturnType<typeof cli>>;
interface Target {
  dir: string;
  run(args: string[]): Promise<Out>;
  close(): Promise<void>;
}

async function online(): Promise<Target> {
  const s = await startTestServer('duckdb');
  return { dir: s.dataDir, run: (args) => cli(s, args), close: () => s.close() };
}

async function offline(): Promise<Target> {
  const env = testEnv('duckdb');
  const dir = env.TRACEGATE_DATA_DIR!;
  return { dir, run: (args) => cli(null, args, env), close: async () => rmSync(dir, { recursive: true, force: true }) };
}

/** The stderr of a run that failed (exit 1). */
const invalidStderr = (out: Out): string => {
  expect(out.code, out.stderr).to.equal(1);
  return out.stderr;
};

const MODES: Array<[string, () => Promise<Target>]> = [
  ['server running', online],
  ['offline', offline],
];

describe('cli: alerts set', function () {
  this.timeout(240_000);
  for (const [mode, open] of MODES) {
    it(`${mode}: a file that is not a JSON object changes nothing; fields the file leaves out stay as stored`, async () => {
      const t = await open();
      try {
        expect((await t.run(['keys', 'create', '--workspace', 'alerts-co'])).code).to.equal(0);
        const file = join(t.dir, 'alerts.json');
        const show = async () => JSON.parse((await t.run(['settings', 'show', '--workspace', 'alerts-co'])).stdout);
        writeFileSync(
          file,
          JSON.stringify({
            rules: [{ id: 'slow', kind: 'latency', threshold: 2000, windowSeconds: 300 }],
            webhookUrl: 'https://hooks.example/alerts',
            webhookSecret: 'whsec-0123456789abcdef',
          }),
        );
        const set = await t.run(['alerts', 'set', '--workspace', 'alerts-co', '--file', file]);
        expect(set.code, set.stderr).to.equal(0);
        const stored = await show();
        expect(stored).to.include({
          version: 1,
          alertWebhookUrl: 'https://hooks.example/alerts',
          alertWebhookSecret: '(set)',
        });
        expect(stored.alertRules).to.have.length(1);

        const invalid = [
          '{"rules": [{"id": "a", "kind": "nope"}]}',
          '{"rules": [{"id": "a", "kind": "cost", "extra": 1}]}',
          '{"webhookSecret": "short"}',
        ];
        for (const text of ['[1]', '"oops"', 'null', '{"rule": []}', '{}', ...invalid]) {
          writeFileSync(file, text);
          const out = await t.run(['alerts', 'set', '--workspace', 'alerts-co', '--file', file]);
          expect(out.code, text).to.equal(1);
          expect(out.stderr, text)
            .to.include(file)
            .and.include('nothing changed')
            .and.not.include('Cannot read properties');
          // Named by the file's keys, not the stored document's (alertRules, alertWebhookSecret).
          expect(out.stderr, text).to.not.match(/alertRules|alertWebhook/);
          expect(out.stdout, text).to.equal('');
        }
        expect(invalidStderr(await t.run(['alerts', 'set', '--workspace', 'alerts-co', '--file', file]))).to.match(
          /: webhookSecret: Too small/,
        );
        writeFileSync(file, invalid[0]!);
        expect(invalidStderr(await t.run(['alerts', 'set', '--workspace', 'alerts-co', '--file', file]))).to.match(
          /: rules\.0\.kind: Invalid option/,
        );
        expect(await show()).to.deep.equal(stored);

        // Only the rules: the webhook and its secret stay.
        writeFileSync(file, JSON.stringify({ rules: [] }));
        const rulesOnly = await t.run(['alerts', 'set', '--workspace', 'alerts-co', '--file', file]);
        expect(rulesOnly.code, rulesOnly.stderr).to.equal(0);
        expect(rulesOnly.stdout).to.match(/settings version 2\): 0 rules, webhook set \(signed\)/);
        expect(await show()).to.deep.equal({ ...stored, version: 2, alertRules: [] });
        // Only the webhook: the rules stay.
        writeFileSync(file, JSON.stringify({ webhookUrl: 'https://hooks.example/other' }));
        expect((await t.run(['alerts', 'set', '--workspace', 'alerts-co', '--file', file])).code).to.equal(0);
        expect(await show()).to.deep.equal({
          ...stored,
          version: 3,
          alertRules: [],
          alertWebhookUrl: 'https://hooks.example/other',
        });
        // null removes the webhook
        writeFileSync(file, JSON.stringify({ webhookUrl: null, webhookSecret: null }));
        const removed = await t.run(['alerts', 'set', '--workspace', 'alerts-co', '--file', file]);
        expect(removed.code, removed.stderr).to.equal(0);
        const { alertWebhookUrl: _u, alertWebhookSecret: _s, ...rest } = stored;
        expect(await show()).to.deep.equal({ ...rest, version: 4, alertRules: [] });
      } finally {
        await t.close();
      }
    });
  }
});

describe('cli: invalid settings', function () {
  this.timeout(240_000);
  it('are reported on one line, the same with and without a running server, and change nothing', async () => {
    const results: Record<string, string[]> = {};
    for (const [mode, open] of MODES) {
      const t = await open();
      try {
        expect((await t.run(['keys', 'create', '--workspace', 'bad-co'])).code).to.equal(0);
        const policy = join(t.dir, 'policy.json');
        writeFileSync(policy, JSON.stringify({ version: 2, defaultAction: 'explode' }));
        const alerts = join(t.dir, 'alerts.json');
        writeFileSync(
          alerts,
          JSON.stringify({ rules: [], webhookUrl: 'https://hooks.example/a', webhookSecret: 'short' }),
        );
        const creds = join(t.dir, 'alerts-creds.json');
        writeFileSync(creds, JSON.stringify({ rules: [], webhookUrl: 'https://user:hookpass@hooks.example/a' }));
        results[mode] = [];
        for (const args of [
          ['policy', 'set', '--file', policy],
          ['alerts', 'set', '--file', alerts],
          ['provider', 'set', '--base-url', 'ftp://x'],
          ['alerts', 'set', '--file', creds],
          ['provider', 'set', '--base-url', 'https://u:p@api.example/v1'],
          ['provider', 'set', '--base-url', 'not a url'],
        ]) {
          const out = await t.run([...args, '--workspace', 'bad-co']);
          expect(out.code, args.join(' ')).to.equal(1);
          expect(out.stderr.trim().split('\n'), out.stderr).to.have.length(1);
          results[mode]!.push(out.stderr.trim().replaceAll(t.dir, '<dir>'));
        }
        expect(JSON.parse((await t.run(['settings', 'show', '--workspace', 'bad-co'])).stdout)).to.deep.equal({
          version: 0,
        });
      } finally {
        await t.close();
      }
    }
    expect(results['offline']).to.deep.equal(results['server running']);
    const [policy, alerts, provider, alertCreds, providerCreds, notUrl] = results['offline']!;
    expect(notUrl).to.match(/^tracegate: provider\.baseUrl: Invalid URL/);
    // A file's problems are named by the file's own keys, and checked before anything is opened.
    expect(alertCreds).to.match(
      /^tracegate: <dir>\/alerts-creds\.json: webhookUrl: must not carry credentials.*; nothing changed$/,
    );
    expect(providerCreds).to.match(/^tracegate: provider\.baseUrl: must not carry credentials/);
    expect(`${alertCreds}${providerCreds}`).to.not.match(/hookpass|u:p@/);
    expect(policy).to.match(/^tracegate: <dir>\/policy\.json: defaultAction: Invalid option.*; nothing changed$/);
    expect(alerts).to.match(/^tracegate: <dir>\/alerts\.json: webhookSecret: Too small.*; nothing changed$/);
    expect(provider).to.match(/^tracegate: provider\.baseUrl: /);
  });
});

describe('cli: usage errors', function () {
  this.timeout(240_000);
  it('exit 2 with a short message and a pointer to --help', async () => {
    const t = await offline();
    try {
      for (const [args, message] of [
        [['keys', 'create', '--workspace'], /--workspace needs a value/],
        [['keys', 'create', '--workspace', '--json'], /--workspace needs a value/],
        [['keys', 'create', '--workspace', 'w', '--bogus'], /unknown option --bogus/],
        [['keys', 'list', '--json=yes'], /--json takes no value/],
        [['keys'], /keys needs a subcommand/],
        [['keys', 'frobnicate'], /unknown command: keys frobnicate/],
        [['verify', 'everything'], /unexpected argument everything/],
        [['refused', 'list', '--bogus'], /unknown option --bogus/],
        [['refused'], /refused needs a subcommand/],
        [['nonsense'], /unknown command: nonsense/],
      ] as Array<[string[], RegExp]>) {
        const out = await t.run(args);
        expect(out.code, `${args.join(' ')}: ${out.stderr}`).to.equal(2);
        expect(out.stderr, args.join(' '))
          .to.match(message)
          .and.match(/Run 'tracegate (\w+ )?--help' for usage/);
        expect(out.stderr.trim().split('\n'), args.join(' ')).to.have.length(2);
      }
    } finally {
      await t.close();
    }
  });
});

describe('cli: refused list | requeue check what they read', function () {
  this.timeout(240_000);
  it('requeue refuses records storage could not take (nothing moved, file and line named); list names a file it cannot read', async () => {
    const t = await offline();
    try {
      const refused = join(t.dir, 'refused');
      mkdirSync(refused, { recursive: true });
      const good = JSON.stringify({ atMs: 1, error: 'startTimeNs is not a decimal uint64', record: span(1) });
      const bad = join(refused, '000000000001-bad.ndjson');
      writeFileSync(bad, `${good}\n{"atMs":1}\n`);
      writeFileSync(join(refused, '000000000002-fine.ndjson'), `${good}\n`);
      const out = await t.run(['refused', 'requeue']);
      expect(out.code).to.equal(1);
      expect(out.stderr)
        .to.include(`${bad}:2: no "record" field`)
        .and.match(/nothing requeued/);
      expect(readdirSync(refused).sort()).to.deep.equal(['000000000001-bad.ndjson', '000000000002-fine.ndjson']);
      expect(existsSync(join(t.dir, 'spool')) ? readdirSync(join(t.dir, 'spool')) : []).to.deep.equal([]);

      for (const [line, problem] of [
        ['{"atMs":1,"record":null}', 'the record is null'],
        ['{"atMs":1,"record":{"recordType":"gossip"}}', 'unknown recordType "gossip"'],
        [
          JSON.stringify({ atMs: 1, record: { ...span(2), spanId: undefined, startTimeNs: 'soon' } }),
          'span: missing spanId; startTimeNs is not a decimal uint64',
        ],
        ['{"atMs":1,"record":{"recordType":"audit","workspaceId":"w"}}', 'audit record: missing chainId'],
      ]) {
        writeFileSync(bad, `${good}\n${line}\n`);
        const again = await t.run(['refused', 'requeue', '000000000001-bad.ndjson']);
        expect(again.code, line).to.equal(1);
        expect(again.stderr, line).to.include(`${bad}:2: ${problem}`);
        expect(readdirSync(refused), line).to.include('000000000001-bad.ndjson');
      }

      writeFileSync(bad, `${good}\ngarbage\n`);
      const list = await t.run(['refused', 'list']);
      expect(list.code).to.equal(1);
      expect(list.stderr).to.include(`${bad}:2: not valid JSON`);

      writeFileSync(bad, `${good}\n`); // fixed: both files go back
      const requeue = await t.run(['refused', 'requeue']);
      expect(requeue.code, requeue.stderr).to.equal(0);
      expect(requeue.stdout).to.match(/requeued 2 records from 2 files/);
      expect(readdirSync(refused)).to.deep.equal([]);
    } finally {
      await t.close();
    }
  });

  it('every record the pipeline spools passes the requeue check', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-spooled-'));
    const real = new DuckDbStorage(join(dir, 'db.duckdb'));
    const written: unknown[] = [];
    const capturing = new Proxy(real, {
      get: (target, prop, recv) => {
        const v = Reflect.get(target, prop, recv);
        if (typeof v !== 'function') return v;
        if (prop !== 'insertSpans' && prop !== 'insertEnrichment') return v.bind(target);
        // As a refused file has them: JSON, as in the spool.
        return (rows: unknown[]) => {
          written.push(...(JSON.parse(JSON.stringify(rows)) as unknown[]));
          return (v as (r: unknown[]) => Promise<void>).call(target, rows);
        };
      },
    }) as Storage;
    let s: TestServer | null = await startTestServer('duckdb', {}, capturing);
    try {
      const k = await s.key('spooled-co');
      const auth = { authorization: `Bearer ${k.key}` };
      const file = join(s.dataDir, 'alerts.json');
      writeFileSync(
        file,
        JSON.stringify({ rules: [{ id: 'slow', kind: 'latency', threshold: 1, windowSeconds: 60 }] }),
      );
      expect((await cli(s, ['alerts', 'set', '--workspace', 'spooled-co', '--file', file])).code).to.equal(0);
      for (let i = 0; i < 3; i++) {
        const res = await post(
          `${s.url}/api/traces`,
          {
            requestId: `r-${i}`,
            model: 'gpt-4o',
            prompt: 'mail jane.doe@example.com',
            response: 'ok',
            metrics: { latencyMs: 4000 },
          },
          auth,
        );
        expect(res.status).to.equal(200);
      }
      await flushed(s);
      await s.close();
      s = null;
    } finally {
      await s?.close();
      await real.close().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    }
    const types = new Set(written.map((r) => (r as { recordType?: string }).recordType ?? 'span'));
    expect([...types].sort()).to.include.members([
      'alert',
      'audit',
      'checkpoint',
      'finding',
      'policy',
      'span',
      'verification',
    ]);
    expect(written.map(storedRecordProblem).filter((p) => p !== null)).to.deep.equal([]);
  });
});

describe('cli: policy show', function () {
  this.timeout(240_000);
  it('prints the policy in force, the default one included, as JSON that policy set takes back', async () => {
    const s = await startTestServer('duckdb');
    const off = await offline();
    try {
      const k = await s.key('default-co');
      const out = await cli(s, ['policy', 'show', '--workspace', 'default-co']);
      expect(out.code, out.stderr).to.equal(0);
      const api = (await get(`${s.url}/api/policy`, { authorization: `Bearer ${k.key}` })).json;
      expect(JSON.parse(out.stdout)).to.deep.equal(api.policy).and.deep.equal(DEFAULT_POLICY);
      const file = join(s.dataDir, 'policy.json');
      writeFileSync(file, out.stdout);
      const set = await cli(s, ['policy', 'set', '--workspace', 'default-co', '--file', file]);
      expect(set.code, set.stderr).to.equal(0);

      expect((await off.run(['keys', 'create', '--workspace', 'default-co'])).code).to.equal(0);
      const offShow = await off.run(['policy', 'show', '--workspace', 'default-co']);
      expect(offShow.code, offShow.stderr).to.equal(0);
      expect(JSON.parse(offShow.stdout)).to.deep.equal(DEFAULT_POLICY);
    } finally {
      await s.close();
      await off.close();
    }
  });
});

describe('cli: which store it works on', function () {
  this.timeout(120_000);
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
  });

  /** A process that is not a server: `sleep`, or one holding DATA_DIR's lock (as a server does while it starts). */
  async function bystander(dataDir?: string): Promise<ChildProcess> {
    const child = dataDir
      ? spawn(
          process.execPath,
          [
            '--input-type=module',
            '-e',
            `const { lockDataDir } = await import(${JSON.stringify(resolve('platform/data-dir-lock.ts'))});
         await lockDataDir(${JSON.stringify(dataDir)}); console.log('locked'); setInterval(() => {}, 1000);`,
          ],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        )
      : spawn('sleep', ['60'], { stdio: 'ignore' });
    children.push(child);
    if (dataDir) await new Promise((ok) => child.stdout!.once('data', ok));
    return child;
  }

  it('a DATA_DIR that does not exist: only keys create makes it; other commands fail and create nothing; a file is read first', async () => {
    const env = testEnv('duckdb');
    const dir = join(env.TRACEGATE_DATA_DIR!, 'typo');
    try {
      for (const args of [
        ['keys', 'list'],
        ['keys', 'revoke', 'k1'],
        ['verify'],
        ['settings', 'show', '--workspace', 'acme'],
        ['policy', 'show', '--workspace', 'acme'],
        ['provider', 'set', '--workspace', 'acme', '--allow-caller-key'],
      ]) {
        const out = await cli(null, args, { ...env, TRACEGATE_DATA_DIR: dir });
        expect(out.code, args.join(' ')).to.equal(1);
        expect(out.stderr, args.join(' ')).to.include(`DATA_DIR ${dir} does not exist`);
        expect(existsSync(dir), args.join(' ')).to.equal(false);
      }
      // stdin is empty here: not JSON, refused before anything is opened or created
      const set = await cli(null, ['policy', 'set', '--workspace', 'acme', '--file', '-'], {
        ...env,
        TRACEGATE_DATA_DIR: dir,
      });
      expect(set.code).to.equal(1);
      expect(set.stderr).to.include('stdin: not valid JSON');
      expect(existsSync(dir)).to.equal(false);
      // creating a key on a fresh machine still makes the directory
      expect(
        (await cli(null, ['keys', 'create', '--workspace', 'acme'], { ...env, TRACEGATE_DATA_DIR: dir })).code,
      ).to.equal(0);
      expect((await cli(null, ['keys', 'list', '--json'], { ...env, TRACEGATE_DATA_DIR: dir })).stdout).to.include(
        '"keyId"',
      );
    } finally {
      rmSync(env.TRACEGATE_DATA_DIR!, { recursive: true, force: true });
    }
  });

  it("a server.json left by a killed server, its pid now another program's, is ignored", async () => {
    const env = testEnv('duckdb');
    const dir = env.TRACEGATE_DATA_DIR!;
    try {
      const other = await bystander();
      writeFileSync(
        join(dir, 'server.json'),
        JSON.stringify({ pid: other.pid, port: await freePort(), adminToken: 'stale' }),
      );
      writeFileSync(join(dir, 'LOCK'), String(other.pid));
      const created = await cli(null, ['keys', 'create', '--workspace', 'acme', '--json'], env);
      expect(created.code, created.stderr).to.equal(0);
      const list = await cli(null, ['keys', 'list', '--json'], env);
      expect(JSON.parse(list.stdout).map((k: { keyId: string }) => k.keyId)).to.deep.equal([
        JSON.parse(created.stdout).keyId,
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('DATA_DIR held by a process that does not answer as a server: a clear message at once, not a wait or "fetch failed"', async () => {
    const env = testEnv('duckdb');
    const dir = env.TRACEGATE_DATA_DIR!;
    try {
      const holder = await bystander(dir);
      // as while a server starts: the lock taken, server.json not written yet
      const starting = await cli(null, ['keys', 'list'], env);
      expect(starting.code).to.equal(1);
      expect(starting.stderr).to.include(`held by process ${holder.pid}`).and.include('try again in a moment');
      // as while a server stops: server.json still there, its port closed
      const port = await freePort();
      writeFileSync(join(dir, 'server.json'), JSON.stringify({ pid: holder.pid, port, adminToken: 'x' }));
      const stopping = await cli(null, ['keys', 'list'], env);
      expect(stopping.code).to.equal(1);
      expect(stopping.stderr)
        .to.include(`(pid ${holder.pid}, port ${port}) did not answer (ECONNREFUSED)`)
        .and.not.include('fetch failed');
      // once it has let go, the CLI works offline
      holder.kill('SIGKILL');
      await new Promise((ok) => holder.once('exit', ok));
      const after = await cli(null, ['keys', 'list', '--json'], env);
      expect(after.code, after.stderr).to.equal(0);
      expect(JSON.parse(after.stdout)).to.deep.equal([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
