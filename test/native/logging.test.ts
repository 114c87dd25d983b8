// The real server's log output (the CLI's `serve`, stdout captured): every request's line carries a request id,
// and neither API keys nor prompt text appear at info level or above.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { loadConfig } from '../../config/index.ts';
import { createStorage } from '../../storage/index.ts';
import { createKey } from '../../collector/workspaces/admin.ts';
import { get, post, testEnv } from '../support/server.ts';
import { freePort, terminate, waitReady } from '../support/process.ts';

interface Line {
  level: number;
  msg: string;
  requestId?: string;
  [k: string]: unknown;
}

describe('request logging', function () {
  this.timeout(120_000);
  let child: ChildProcess;
  let stdout = '';
  let dataDir: string;
  let url: string;
  let key: string;
  let keyId: string;
  before(async () => {
    const port = await freePort();
    // debug: the per-request line is a debug line; info-level lines are checked by their level below.
    const env = testEnv('duckdb', {
      TRACEGATE_PORT: String(port),
      TRACEGATE_LOG_LEVEL: 'debug',
      TRACEGATE_PROVIDER_BASE_URL: `http://127.0.0.1:${await freePort()}/v1`,
    });
    const config = loadConfig(env);
    dataDir = config.DATA_DIR;
    const storage = createStorage(config);
    await storage.init();
    ({ key, keyId } = await createKey(storage, 'log-co'));
    await storage.close();
    url = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, ['bin/tracegate.ts', 'serve'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.stdout!.on('data', (d) => (stdout += d));
    await waitReady(child, async () => (await fetch(`${url}/healthz`)).ok, 'tracegate', '/dev/null');
  });
  after(async () => {
    if (child) await terminate(child);
    rmSync(dataDir, { recursive: true, force: true });
  });

  const PROMPT = 'SECRET-PROMPT-do-not-log-7f3a';
  const lines = () =>
    stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Line);

  it('one line per request with its request id (the one sent, or the one generated and answered)', async () => {
    const auth = { authorization: `Bearer ${key}` };
    const answered: string[] = [];
    const track = <R extends { headers: Headers }>(r: R) => {
      answered.push(r.headers.get('x-request-id')!);
      return r;
    };
    expect(
      track(
        await post(
          `${url}/api/traces`,
          { requestId: 'r-1', prompt: PROMPT, response: 'ok' },
          { ...auth, 'x-request-id': 'client-req-42' },
        ),
      ).status,
    ).to.equal(200);
    expect(answered[0]).to.equal('client-req-42');
    expect(track(await post(`${url}/api/traces`, { prompt: PROMPT, status: 7 }, auth)).status).to.equal(400);
    expect(
      track(
        await post(`${url}/api/traces`, { prompt: PROMPT }, { authorization: `Bearer tg_${keyId}_${'Z'.repeat(43)}` }),
      ).status,
    ).to.equal(401);
    expect(
      track(await post(`${url}/api/traces`, { prompt: PROMPT }, { authorization: 'Bearer not-a-key-at-all' })).status,
    ).to.equal(401);
    expect(
      track(await post(`${url}/api/proxy/provider/responses`, { model: 'gpt-4o-mini', input: PROMPT }, auth)).status,
    ).to.be.within(500, 504);
    expect(
      track(
        await post(
          `${url}/v1/traces`,
          {
            resourceSpans: [
              {
                scopeSpans: [
                  {
                    spans: [
                      {
                        traceId: '5b8efff798038103d269b633813fc60c',
                        spanId: 'eee19b7ec3c1b174',
                        name: 'chat',
                        startTimeUnixNano: '1763787000000000000',
                        endTimeUnixNano: '1763787000800000000',
                        attributes: [{ key: 'gen_ai.prompt', value: { stringValue: PROMPT } }],
                      },
                    ],
                  },
                ],
              },
            ],
          },
          auth,
        ),
      ).status,
    ).to.equal(200);
    expect(track(await get(`${url}/nope`)).status).to.equal(404);
    await new Promise((r) => setTimeout(r, 200)); // pino writes asynchronously
    const requestLines = lines().filter((l) => l.msg === 'request');
    expect(requestLines.filter((l) => l.route !== '/healthz').map((l) => l.requestId)).to.have.members(answered); // /healthz: the readiness probe
    for (const l of requestLines) expect(l.requestId, JSON.stringify(l)).to.be.a('string').and.not.equal('');
  });

  it('no API key and no prompt text at info level or above', async () => {
    await terminate(child); // shutdown lines too
    const info = lines().filter((l) => l.level >= 30);
    expect(info.some((l) => l.msg === 'authentication rejected')).to.equal(true); // the requests above were logged
    const text = info.map((l) => JSON.stringify(l)).join('\n');
    // tg_<keyId>_<secret>: the secret is base64url and may itself hold '_' (it once ended in "_g": "g" is in every line)
    const secret = key.slice(`tg_${keyId}_`.length);
    expect(secret).to.have.length.above(20);
    for (const needle of [key, secret, 'Z'.repeat(43), 'not-a-key-at-all', PROMPT])
      expect(text, needle).to.not.include(needle);
  });
});
