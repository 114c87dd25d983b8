// Configuration validation: values that would fail late (or never) are refused at start, naming the variable.
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { loadConfig } from '../../../config/index.ts';
import { decodeOtlpRequest, otlpLimits } from '../../../protocols/otlp/index.ts';

describe('configuration bounds', () => {
  it('TRACEGATE_CLICKHOUSE_URL must be an http(s) URL (localhost:8123 and ftp:// used to pass and retry forever)', () => {
    for (const bad of ['localhost:8123', 'ftp://ch.example:8123', 'clickhouse://h:9000', 'tcp://h:9000']) {
      expect(() => loadConfig({ TRACEGATE_CLICKHOUSE_URL: bad }), bad).to.throw(
        /TRACEGATE_CLICKHOUSE_URL: not an http\(s\) URL/,
      );
    }
    for (const good of ['http://localhost:8123', 'https://user:pw@ch.example:8443/']) {
      expect(loadConfig({ TRACEGATE_CLICKHOUSE_URL: good }).CLICKHOUSE_URL).to.equal(good);
    }
  });

  it('TRACEGATE_CLICKHOUSE_NODES keeps rejecting non-http(s) nodes with the same check', () => {
    expect(() =>
      loadConfig({
        TRACEGATE_CLICKHOUSE_URL: 'http://a:8123',
        TRACEGATE_CLICKHOUSE_CLUSTER: 'c',
        TRACEGATE_CLICKHOUSE_NODES: 'http://a:8123,localhost:8123',
      }),
    ).to.throw(/TRACEGATE_CLICKHOUSE_NODES: not an http\(s\) URL: localhost:8123/);
  });

  it('TRACEGATE_PROVIDER_BASE_URL must be an http(s) URL', () => {
    expect(() => loadConfig({ TRACEGATE_PROVIDER_BASE_URL: 'file:///etc/passwd' })).to.throw(
      /TRACEGATE_PROVIDER_BASE_URL: not an http\(s\) URL/,
    );
    expect(loadConfig({ TRACEGATE_PROVIDER_BASE_URL: 'http://127.0.0.1:9/v1' }).PROVIDER_BASE_URL).to.equal(
      'http://127.0.0.1:9/v1',
    );
  });

  it('TRACEGATE_PUBLIC_ORIGIN is an http(s) origin and nothing more, kept normalized', () => {
    expect(loadConfig({}).PUBLIC_ORIGIN).to.equal(undefined);
    expect(loadConfig({ TRACEGATE_PUBLIC_ORIGIN: 'https://TG.example.com:443/' }).PUBLIC_ORIGIN).to.equal(
      'https://tg.example.com',
    );
    for (const bad of ['tg.example.com', 'ftp://x', 'https://x/ui', 'https://x?a', 'https://u:p@x', 'https://x/#'])
      expect(() => loadConfig({ TRACEGATE_PUBLIC_ORIGIN: bad }), bad).to.throw(
        /TRACEGATE_PUBLIC_ORIGIN: an http\(s\) origin/,
      );
  });

  it('sessions: 30 min idle and 8 h at most by default; idle no longer than the maximum; links good 10 min', () => {
    const c = loadConfig({});
    expect([c.SESSION_IDLE_SECONDS, c.SESSION_MAX_SECONDS, c.SESSION_LINK_SECONDS]).to.deep.equal([1800, 28800, 600]);
    expect(() =>
      loadConfig({ TRACEGATE_SESSION_IDLE_SECONDS: '7200', TRACEGATE_SESSION_MAX_SECONDS: '3600' }),
    ).to.throw(/TRACEGATE_SESSION_IDLE_SECONDS: 7200 is above TRACEGATE_SESSION_MAX_SECONDS/);
    expect(() => loadConfig({ TRACEGATE_SESSION_IDLE_SECONDS: '59' })).to.throw(/TRACEGATE_SESSION_IDLE_SECONDS/);
  });

  it('the local model server: Ollama at 127.0.0.1:11434 by default, or an OpenAI-compatible one; an http(s) URL', () => {
    const c = loadConfig({});
    expect([c.LOCAL_MODEL_URL, c.LOCAL_MODEL_API, c.LOCAL_MODEL]).to.deep.equal([
      'http://127.0.0.1:11434',
      'ollama',
      undefined,
    ]);
    expect(loadConfig({ TRACEGATE_LOCAL_MODEL_API: 'openai' }).LOCAL_MODEL_API).to.equal('openai');
    expect(() => loadConfig({ TRACEGATE_LOCAL_MODEL_API: 'vllm' })).to.throw(/TRACEGATE_LOCAL_MODEL_API/);
    expect(() => loadConfig({ TRACEGATE_LOCAL_MODEL_URL: 'localhost:11434' })).to.throw(/TRACEGATE_LOCAL_MODEL_URL/);
  });

  it('TRACEGATE_PORT is 0 (any free port; the tests use it) to 65535', () => {
    for (const bad of ['70000', '65536', '-1', '80.5'])
      expect(() => loadConfig({ TRACEGATE_PORT: bad }), bad).to.throw(/TRACEGATE_PORT/);
    expect(loadConfig({ TRACEGATE_PORT: '0' }).PORT).to.equal(0);
    expect(loadConfig({ TRACEGATE_PORT: '65535' }).PORT).to.equal(65535);
  });

  it('millisecond and window settings stay within what Node timers hold (2^31-1 ms)', () => {
    for (const name of [
      'FLUSH_INTERVAL_MS',
      'SHUTDOWN_FLUSH_MS',
      'PROXY_CONNECT_TIMEOUT_MS',
      'PROXY_HEADERS_TIMEOUT_MS',
      'PROXY_BODY_TIMEOUT_MS',
      'PROXY_KEEPALIVE_MS',
    ]) {
      expect(() => loadConfig({ [`TRACEGATE_${name}`]: '2147483648' }), name).to.throw(new RegExp(`TRACEGATE_${name}`));
      expect(loadConfig({ [`TRACEGATE_${name}`]: '2147483647' })[name as 'FLUSH_INTERVAL_MS']).to.equal(2147483647);
    }
    for (const name of ['RATE_LIMIT_WINDOW_SECONDS', 'AUTH_FAILURE_WINDOW_SECONDS']) {
      expect(() => loadConfig({ [`TRACEGATE_${name}`]: '2147484' }), name).to.throw(new RegExp(`TRACEGATE_${name}`));
      expect(loadConfig({ [`TRACEGATE_${name}`]: '2147483' })[name as 'RATE_LIMIT_WINDOW_SECONDS']).to.equal(2147483);
    }
  });

  it('TRACEGATE_MAX_TRACE_PART_BYTES is 64 KiB to 256 MiB (a JSON answer cannot pass ~512 MB), 16 MiB by default', () => {
    for (const bad of ['65535', '268435457', '1e6']) {
      expect(() => loadConfig({ TRACEGATE_MAX_TRACE_PART_BYTES: bad }), bad).to.throw(/TRACEGATE_MAX_TRACE_PART_BYTES/);
    }
    expect(loadConfig({}).MAX_TRACE_PART_BYTES).to.equal(16 * 1024 * 1024);
    expect(loadConfig({ TRACEGATE_MAX_TRACE_PART_BYTES: '65536' }).MAX_TRACE_PART_BYTES).to.equal(65536);
  });

  it('TRACEGATE_MAX_ATTRIBUTE_KEY_BYTES sets the OTLP key limit (at least 64)', () => {
    expect(() => loadConfig({ TRACEGATE_MAX_ATTRIBUTE_KEY_BYTES: '10' })).to.throw(/TRACEGATE_MAX_ATTRIBUTE_KEY_BYTES/);
    const limits = otlpLimits(loadConfig({ TRACEGATE_MAX_ATTRIBUTE_KEY_BYTES: '100' }));
    const key = 'k'.repeat(300);
    const body = Buffer.from(
      JSON.stringify({
        resourceSpans: [
          {
            scopeSpans: [
              {
                spans: [
                  {
                    traceId: '5b8efff798038103d269b633813fc60c',
                    spanId: 'eee19b7ec3c1b174',
                    name: 's',
                    startTimeUnixNano: '1',
                    endTimeUnixNano: '2',
                    attributes: [{ key, value: { stringValue: 'v' } }],
                  },
                ],
              },
            ],
          },
        ],
      }),
    );
    const span = decodeOtlpRequest(body, 'json', limits).resourceSpans[0]!.scopeSpans[0]!.spans[0]!;
    const cut = `${key.slice(0, 91)}~${createHash('sha256').update(key).digest('hex').slice(0, 8)}`; // 100 bytes
    expect(span.attributes).to.deep.include({ [cut]: 'v', 'tracegate.truncated': [cut] });
  });
});
