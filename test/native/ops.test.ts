// Operability: configuration validation, OpenAPI, metrics, health/readiness, graceful shutdown, CLI help.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../config/index.ts';
import { createStorage } from '../../storage/index.ts';
import { createKey } from '../../collector/workspaces/admin.ts';
import { LastKnown, lastKnownFile } from '../../collector/workspaces/last-known.ts';
import { openOps } from '../../bin/shared/ops.ts';
import { cli, get, post, startTestServer, testEnv, type TestServer } from '../support/server.ts';
import { freePort, terminate, waitReady } from '../support/process.ts';
import { useSharedClickHouse } from '../support/shared.ts';

describe('configuration', () => {
  it('names the variable of a bad value', () => {
    expect(() => loadConfig({ TRACEGATE_PORT: 'eighty' })).to.throw(/TRACEGATE_PORT/);
    expect(() => loadConfig({ TRACEGATE_CLICKHOUSE_URL: 'not a url' })).to.throw(/TRACEGATE_CLICKHOUSE_URL/);
    expect(() => loadConfig({ TRACEGATE_SPOOL_FSYNC: 'maybe' })).to.throw(/TRACEGATE_SPOOL_FSYNC/);
    expect(loadConfig({}).PORT).to.equal(4318);
  });
  it('stops the process with that message', async () => {
    const out = await cli(null, ['serve'], { TRACEGATE_MAX_BODY_BYTES: '-5' });
    expect(out.code).to.equal(1);
    expect(out.stderr).to.include('TRACEGATE_MAX_BODY_BYTES');
  });
  it('names the setting when the server cannot listen (port taken, host not here)', async function () {
    this.timeout(120_000);
    const taken = await startTestServer('duckdb');
    try {
      const busy = await cli(null, ['serve'], {
        TRACEGATE_HOST: '127.0.0.1',
        TRACEGATE_PORT: String(taken.running.port),
      });
      expect([busy.code, busy.stderr]).to.satisfy(
        ([code, err]: [number, string]) => code === 1 && /TRACEGATE_PORT: 127\.0\.0\.1:\d+ is already in use/.test(err),
      );
    } finally {
      await taken.close();
    }
    const away = await cli(null, ['serve'], { TRACEGATE_HOST: '192.0.2.1', TRACEGATE_PORT: '0' }); // TEST-NET-1: never this machine's
    expect(away.code).to.equal(1);
    expect(away.stderr).to.match(/TRACEGATE_HOST: 192\.0\.2\.1 is not an address of this machine/);
  });
  it('has --help everywhere', async function () {
    this.timeout(240_000); // seven CLI processes one after another: slow on a loaded CI machine
    for (const args of [
      ['--help'],
      ['keys', '--help'],
      ['serve', '--help'],
      ['policy', '--help'],
      ['verify', '--help'],
      ['alerts', '--help'],
      ['provider', '--help'],
    ]) {
      const out = await cli(null, args);
      expect(out.code, args.join(' ')).to.equal(0);
      expect(out.stdout).to.match(/usage: tracegate/);
    }
    expect((await cli(null, ['nonsense'])).code).to.equal(2);
  });
});

describe('CLI without a running server', () => {
  it("keys revoke also marks the key revoked in the data directory's last-known copy (what a start during an outage reads)", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-revoke-'));
    try {
      const config = loadConfig({ TRACEGATE_DATA_DIR: dir });
      const ops = await openOps(config, { mayCreate: true });
      let k: { keyId: string; workspaceId: string }, other: { keyId: string };
      try {
        k = await ops.createKey('revoke-offline');
        other = await ops.createKey('revoke-offline');
        // As a server that served both keys left it.
        const copy = new LastKnown(lastKnownFile(dir));
        for (const id of [k.keyId, other.keyId])
          copy.rememberKey({ keyId: id, workspaceId: k.workspaceId, hash: 'h', createdAtMs: 1, revokedAtMs: 0 });
        await copy.flush();
        expect(await ops.revokeKey(k.keyId)).to.equal(true);
      } finally {
        await ops.close();
      }
      const after = new LastKnown(lastKnownFile(dir));
      expect(after.key(k.keyId)?.revokedAtMs).to.be.greaterThan(0);
      expect(after.key(other.keyId)?.revokedAtMs).to.equal(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('CLI against a server bound to one non-loopback address', () => {
  it('manages keys through a loopback admin listener that serves nothing else', async () => {
    const s = await startTestServer('duckdb', { TRACEGATE_HOST: '127.0.0.2' }); // on lo, but not 127.0.0.1
    try {
      const base = `http://127.0.0.2:${s.running.port}`;
      const k = JSON.parse((await cli(s, ['keys', 'create', '--workspace', 'bound-co', '--json'])).stdout);
      const h = { authorization: `Bearer ${k.key}` };
      expect((await post(`${base}/api/traces`, { prompt: 'p', response: 'r' }, h)).status).to.equal(200);
      const out = await cli(s, ['keys', 'revoke', k.keyId]);
      expect(out.code, out.stderr).to.equal(0);
      expect((await post(`${base}/api/traces`, { prompt: 'p', response: 'r' }, h)).status).to.equal(401);
      const { adminPort } = JSON.parse(readFileSync(join(s.dataDir, 'server.json'), 'utf8')) as { adminPort: number };
      expect(adminPort).to.not.equal(s.running.port);
      expect((await post(`http://127.0.0.1:${adminPort}/api/traces`, { prompt: 'p' }, h)).status).to.equal(404);
    } finally {
      await s.close();
    }
  });
});

describe('ops routes', () => {
  let s: TestServer;
  let auth: Record<string, string>;
  before(async () => {
    s = await startTestServer('duckdb');
    auth = { authorization: `Bearer ${(await s.key('ops')).key}` };
  });
  after(() => s.close());

  it('serves an OpenAPI 3.1 document of every route, from the validation schemas', async () => {
    const doc = (await get(`${s.url}/openapi.json`)).json;
    expect(doc.openapi).to.equal('3.1.0');
    for (const p of [
      '/api/traces',
      '/api/traces/{traceId}',
      '/v1/traces',
      '/api/integrations/otlp/v1/traces',
      '/api/audit',
      '/api/alerts',
      '/api/analytics/usage',
      '/api/traces/{traceId}/verification',
      '/healthz',
      '/readyz',
      '/metrics',
    ]) {
      expect(doc.paths, p).to.have.property(p);
    }
    const body = doc.paths['/api/traces'].post.requestBody.content['application/json'].schema;
    expect(JSON.stringify(body)).to.include('estimatedCostUsd').and.include('trainingPreferred');
    expect(doc.paths['/api/traces'].post.responses).to.have.keys(
      '200',
      '207',
      '400',
      '401',
      '408',
      '413',
      '415',
      '429',
      '503',
    );
    // OTLP errors are a google.rpc.Status, as the route answers them
    expect(doc.paths['/v1/traces'].post.responses['400'].content['application/json'].schema).to.deep.equal({
      $ref: '#/components/schemas/Status',
    });
    expect(doc.components.schemas.Status.properties).to.have.keys('code', 'message', 'details');
  });

  it('exposes Prometheus metrics: requests, records, spool, flushes', async () => {
    await post(`${s.url}/api/traces`, { prompt: 'p', response: 'r' }, auth);
    await s.running.pipeline.flush();
    const text = (await get(`${s.url}/metrics`)).text;
    expect(text).to.match(/tracegate_http_requests_total\{method="POST",route="\/api\/traces",status="200"\} \d+/);
    expect(text).to.match(/tracegate_records_ingested_total\{source="native"\} \d+/);
    expect(text).to.match(/tracegate_spool_bytes \d+/);
    expect(text).to.match(/tracegate_flush_batch_rows_count \d+/);
    // what only grows is a counter
    expect(text)
      .to.include('# TYPE tracegate_spool_syncs_total counter')
      .and.include('# TYPE tracegate_spool_appends_total counter');
    expect(Number(/^tracegate_spool_appends_total (\d+)/m.exec(text)?.[1])).to.be.greaterThan(0);
  });

  it('health and readiness', async () => {
    expect((await get(`${s.url}/healthz`)).json).to.deep.equal({ status: 'ok' });
    const ready = await get(`${s.url}/readyz`);
    expect(ready.status).to.equal(200);
    expect(ready.json).to.include({ status: 'ready', storage: 'ok' });
  });

  it('a failed flush shows in /readyz (no authentication) as its kind, never its text, which can quote stored data', async () => {
    /** What /readyz says while every flush fails with `err`; storage works again afterwards. */
    const readyzWhileFlushFails = async (err: Error) => {
      const storage = s.running.storage as unknown as Record<string, unknown>;
      const patched = ['insertSpans', 'insertSpoolFiles'];
      for (const m of patched)
        storage[m] = async () => {
          throw err;
        };
      try {
        expect(
          (await post(`${s.url}/api/traces`, { prompt: 'my-private-prompt-text', response: 'r' }, auth)).status,
        ).to.equal(200);
        await s.running.pipeline.flush().catch(() => {});
        return await get(`${s.url}/readyz`);
      } finally {
        for (const m of patched) delete storage[m]; // the prototype's methods again
        await s.running.pipeline.flush();
      }
    };
    const quoted = await readyzWhileFlushFails(
      new Error(
        'Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected \\t before: my-private-prompt-text',
      ),
    );
    expect(quoted.json.spool.lastFlushError).to.equal('clickhouse_27');
    expect(quoted.text).to.not.include('my-private');
    expect((await get(`${s.url}/readyz`)).json.spool.lastFlushError).to.equal(null);
    // @clickhouse/client gives the server's code on the error, its message without "Code:".
    const coded = await readyzWhileFlushFails(
      Object.assign(new Error('Memory limit exceeded inserting "my-private-prompt-text"'), { code: '241' }),
    );
    expect(coded.json.spool.lastFlushError).to.equal('clickhouse_241');
    expect(coded.text).to.not.include('my-private');
  });

  it('failureKind: a system error code, a ClickHouse code, a timeout, or just "error"', async () => {
    const { failureKind } = await import('../../collector/routes/ops.ts');
    expect(failureKind(null)).to.equal(null);
    expect(failureKind('Memory limit (for query) exceeded', '241')).to.equal('clickhouse_241');
    expect(failureKind('connect failed', 'ECONNREFUSED')).to.equal('ECONNREFUSED');
    expect(failureKind('connect failed', 'not a code')).to.equal('error');
    expect(failureKind('connect ECONNREFUSED 127.0.0.1:8123')).to.equal('ECONNREFUSED');
    expect(failureKind("ENOSPC: no space left on device, write '/srv/data/spool/0001.seg'")).to.equal('ENOSPC');
    expect(failureKind('Code: 241, e.displayText() = DB::Exception: Memory limit (for query) exceeded')).to.equal(
      'clickhouse_241',
    );
    expect(failureKind('storage call timed out after 30000 ms')).to.equal('timeout');
    expect(failureKind('Invalid Input Error: "secret text" is not valid UTF-8')).to.equal('error');
    // A word of the data is never the kind, even one that looks like an error code.
    expect(
      failureKind(
        'Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected \\t before: ENOENT ENTERPRISE',
      ),
    ).to.equal('clickhouse_27');
    expect(failureKind('Conversion failed for "ENTERPRISE-PLAN"')).to.equal('error');
  });

  it('is not ready while spool writes fail (disk full, I/O error), and ready again once one succeeds', async () => {
    const spoolDir = join(s.dataDir, 'spool');
    await s.running.pipeline.flush(); // seals the active segment: the next append needs a new file
    rmSync(spoolDir, { recursive: true, force: true });
    const refused = await post(`${s.url}/api/traces`, { prompt: 'p', response: 'r' }, auth);
    expect(refused.status).to.equal(503);
    const down = await get(`${s.url}/readyz`);
    expect(down.status).to.equal(503);
    expect(down.json.spool).to.include({ ok: false });
    expect(down.json.spool.lastWriteError).to.equal('ENOENT'); // its kind: the message (naming DATA_DIR) is logged
    mkdirSync(spoolDir);
    expect((await post(`${s.url}/api/traces`, { prompt: 'p', response: 'r' }, auth)).status).to.equal(200);
    const up = await get(`${s.url}/readyz`);
    expect([up.status, up.json.spool.lastWriteError]).to.deep.equal([200, null]);
  });

  it('answers unknown routes with the JSON error body and echoes a request id', async () => {
    const res = await get(`${s.url}/nope`);
    expect(res.status).to.equal(404);
    expect(res.json.error).to.have.keys('code', 'message', 'details');
    expect(res.headers.get('x-request-id')).to.be.a('string');
  });
});

describe('graceful shutdown', function () {
  this.timeout(120_000);
  useSharedClickHouse();
  it('SIGTERM flushes everything acknowledged to storage', async () => {
    const port = await freePort();
    const env = testEnv('clickhouse', { TRACEGATE_PORT: String(port), TRACEGATE_FLUSH_INTERVAL_MS: '600000' });
    const config = loadConfig(env);
    const storage = createStorage(config);
    await storage.init();
    const k = await createKey(storage, 'term-co');
    const child = spawn(process.execPath, ['bin/tracegate.ts', 'serve'], {
      env: { ...process.env, ...env },
      stdio: 'ignore',
    });
    try {
      await waitReady(
        child,
        async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok,
        'tracegate',
        '/dev/null',
      );
      for (let i = 0; i < 25; i++)
        expect(
          (
            await post(
              `http://127.0.0.1:${port}/api/traces`,
              { requestId: `t-${i}`, prompt: 'p' },
              { authorization: `Bearer ${k.key}` },
            )
          ).status,
        ).to.equal(200);
      expect(await storage.countSpans(k.workspaceId)).to.equal(0); // nothing flushed yet
      await terminate(child);
      expect(child.exitCode).to.equal(0);
      expect(await storage.countSpans(k.workspaceId)).to.equal(25);
    } finally {
      await terminate(child);
      await storage.close();
    }
  });
});
