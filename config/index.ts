// Configuration from TRACEGATE_* environment variables, validated at start.
// A bad value stops the process with a message naming the variable.
import { z } from 'zod';

/**
 * A whole number written in decimal digits and nothing else: z.coerce.number() is JavaScript's Number(), which also
 * reads `0x10`, `1e3`, `0b1`, ` 42 ` and `''` (0), so a typo would start the server with a value nobody meant.
 */
const int = (def: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .regex(/^[0-9]+$/, 'must be a whole number in decimal digits (no sign, spaces, exponent or 0x)')
    .transform(Number)
    .pipe(z.number().min(min).max(max))
    .default(def);
// Node's timers hold at most 2^31-1 ms; a longer delay fires after 1 ms (a flush loop would spin, a window would never hold).
const MAX_TIMER_MS = 2 ** 31 - 1;
const ms = (def: number, min = 0) => int(def, min, MAX_TIMER_MS);
const seconds = (def: number, min = 0) => int(def, min, Math.floor(MAX_TIMER_MS / 1000));
const isHttpUrl = (u: string) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol);
/** An http(s) URL: z.string().url() also takes `localhost:8123` (scheme "localhost:") and ftp://. */
const httpUrl = () => z.string().refine(isHttpUrl, { message: 'not an http(s) URL' });
/** A scheme://host[:port] origin, as browsers send it in Origin (no path, query or credentials); stored normalized. */
const origin = () =>
  z
    .string()
    .refine(
      (u) => {
        if (!isHttpUrl(u)) return false;
        const url = new URL(u);
        return url.pathname === '/' && !url.search && !url.hash && !url.username && !url.password && !/[?#]/.test(u);
      },
      { message: 'an http(s) origin: scheme://host[:port], nothing after it' },
    )
    .transform((u) => new URL(u).origin);
const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1');

/** Default of TRACEGATE_MAX_JSON_VALUES (also the bound of bodies parsed without a configured one). */
export const DEFAULT_MAX_JSON_VALUES = 250_000;
export const DEFAULT_MAX_INFLIGHT_BODY_BYTES = 64 * 1024 * 1024;

// Each entry: env suffix → schema. The README's configuration table mirrors this list.
export const configSchema = z.object({
  PORT: int(4318, 0, 65535), // 0: any free port
  HOST: z.string().default('0.0.0.0'),
  DATA_DIR: z.string().default('./data'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),

  CLICKHOUSE_URL: httpUrl().optional(),
  CLICKHOUSE_DATABASE: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'letters, digits and _ only')
    .default('tracegate'),
  CLICKHOUSE_USER: z.string().default('default'),
  CLICKHOUSE_PASSWORD: z.string().default(''),
  // Rollups count a re-delivered span once (a key lookup per inserted trace; see clickhouse-rollup.ts).
  CLICKHOUSE_EXACT_ROLLUPS: bool(true),
  // Sharded: the cluster's name in remote_servers, and the HTTP URL of every node (schema on each).
  CLICKHOUSE_CLUSTER: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/, 'a cluster name from remote_servers')
    .optional(),
  CLICKHOUSE_NODES: z
    .string()
    .optional()
    .transform((v, ctx) => {
      const urls = (v ?? '')
        .split(',')
        .map((u) => u.trim())
        .filter(Boolean);
      for (const u of urls) if (!isHttpUrl(u)) ctx.addIssue({ code: 'custom', message: `not an http(s) URL: ${u}` });
      return urls;
    }),

  REDIS_URL: z.url({ protocol: /^rediss?$/, error: 'a redis:// or rediss:// URL' }).optional(),
  RATE_LIMIT_POINTS: int(6000, 1), // requests per window per route and key
  RATE_LIMIT_WINDOW_SECONDS: seconds(60, 1),
  AUTH_FAILURE_LIMIT: int(30, 1), // failed authentications per client IP per window before 429
  AUTH_FAILURE_WINDOW_SECONDS: seconds(60, 1),

  MAX_BODY_BYTES: int(20 * 1024 * 1024, 1024), // after decompression
  MAX_BATCH_ITEMS: int(1000, 1), // items per request of the native batch, the agents export and guardrail results
  // The agents export route's own body and JSON limits: a forceFlush posts up to 1,000 items whose input and output
  // the JS exporter caps at 100,000 JSON bytes each (about 100 MB for 1,000 full inputs).
  AGENTS_MAX_BODY_BYTES: int(128 * 1024 * 1024, 1024),
  AGENTS_MAX_JSON_VALUES: int(2_000_000, 1000),
  MAX_STRING_BYTES: int(1024 * 1024, 16), // prompt/response and other long strings
  MAX_ATTRIBUTES: int(2048, 1), // attributes per span (flattened conversations need many)
  MAX_EVENTS: int(128, 0), // events per span
  MAX_DEPTH: int(8, 1), // nesting depth of attribute values
  MAX_TRACE_SPANS: int(10_000, 10, 1_000_000), // spans GET /api/traces/:id answers at most (the rest by spanCursor)
  // A part of a trace ends once its spans' stored text reaches this (a JSON answer cannot pass ~512 MB, and costs several times its size)
  MAX_TRACE_PART_BYTES: int(16 * 1024 * 1024, 64 * 1024, 256 * 1024 * 1024),
  // The training export reads storage a page at a time: at most this many model calls, and a page ends once their
  // stored text reaches EXPORT_PAGE_BYTES (what an export holds at once, besides one group of equal prompts).
  EXPORT_PAGE_ROWS: int(500, 1, 10_000),
  EXPORT_PAGE_BYTES: int(8 * 1024 * 1024, 64 * 1024, 256 * 1024 * 1024),
  EXPORT_MAX_PAIRS_PER_PROMPT: int(8, 1, 1000), // openai_dpo: pairs made from the votes on one prompt
  EXPORT_MAX_TOOL_CALLS: int(128, 0, 10_000), // tool spans of a trace turned into tool calls
  EXPORT_MAX_CONCURRENT: int(2, 1, 64), // exports running at once per collector (503 beyond)
  EXPORT_READ_RETRIES: int(4, 0, 20), // storage unavailable once an export's answer began: reads again, 1, 2, 4, … s apart
  MAX_JSON_DEPTH: int(64, 8, 1000), // bracket depth of any JSON body
  MAX_JSON_VALUES: int(DEFAULT_MAX_JSON_VALUES, 1000), // JSON values in a body (containers + elements; 413 beyond)
  // Decompressed body bytes held at once across all requests, from arrival to answer (503 + Retry-After beyond);
  // ≥ MAX_BODY_BYTES. A request being processed costs about ten times its body: this bounds that memory too.
  MAX_INFLIGHT_BODY_BYTES: int(DEFAULT_MAX_INFLIGHT_BODY_BYTES, 1024),
  BODY_IDLE_TIMEOUT_MS: ms(15_000, 100), // a request body sending nothing this long is given up (408)
  SOCKET_IDLE_TIMEOUT_MS: ms(60_000, 1000), // a connection with no bytes either way this long is closed (a client not reading its response)
  // An answer given while its request body is still arriving (413, 401, 415, 429, 503, 404/405) is followed by reading
  // and discarding the rest of the body, up to this many bytes and this long, before the connection closes (lingering
  // close): closed at once, a client still sending gets a reset instead of the answer. 0: closed at once.
  LINGER_MAX_BYTES: int(64 * 1024 * 1024, 0, 1024 * 1024 * 1024),
  LINGER_TIMEOUT_MS: ms(10_000, 0),
  MAX_SPANS_PER_REQUEST: int(10000, 1),
  MAX_ATTRIBUTE_VALUE_BYTES: int(64 * 1024, 16), // longer attribute strings are truncated and marked
  MAX_ATTRIBUTE_KEY_BYTES: int(1024, 64), // longer attribute (and kvlist) keys are truncated and marked (OTLP)

  FLUSH_INTERVAL_MS: ms(1000, 10), // writer → storage cadence (reads lag writes by about this)
  FLUSH_MAX_ROWS: int(50000, 1),
  SPOOL_MAX_BYTES: int(1024 * 1024 * 1024, 1024 * 1024), // beyond this, ingestion answers 503
  SPOOL_FSYNC: bool(true),
  ISOLATE_AFTER_FAILURES: int(5, 1), // failed flushes in a row before refused records are set aside
  SHUTDOWN_FLUSH_MS: ms(10_000, 0), // longest wait for the final flush at SIGTERM; the rest replays at the next start
  ENRICHMENT: bool(true), // governance, alerts and verification at ingestion (audit always on)
  MAX_FINDINGS_PER_SPAN: int(100, 1), // finding records stored per span, most severe first
  WORKER_YOUNG_GEN_MB: int(32, 0), // young-generation cap of the processor and storage threads (0: V8 default)
  // `serve` runs V8's garbage collector on each thread itself, without its helper threads (auto: on 2 cores or fewer)
  SINGLE_THREADED_GC: z.enum(['auto', 'true', 'false', '1', '0']).default('auto'),
  DUCKDB_CHECKPOINT_MB: int(128, 0, 65536), // embedded store: write-ahead log MiB that start a checkpoint (0: DuckDB's 16)
  DUCKDB_WRITE_THREADS: int(1, 0, 256), // embedded store: DuckDB threads for batch inserts (0: DuckDB's own, as reads)
  SEMI_SPACE_MB: int(16, 0, 1024), // `serve`: V8's semi-space cap, every thread (it shrinks the HTTP thread's young generation; 0: V8 default)
  HEAP_GROWING_PERCENT: int(0, 0, 1000), // `serve`: V8's --heap-growing-percent, every thread: less RSS for more garbage collection (0: V8's own)
  SIGN_EACH_TRACE: bool(false), // an Ed25519 signature per trace, not one signed checkpoint per chain per second

  // The origin browsers reach this server at (behind a proxy that terminates TLS or renames the host): cookie-
  // authenticated requests that change state must come from it (default: scheme, host and port as the request came).
  PUBLIC_ORIGIN: origin().optional(),
  SESSION_IDLE_SECONDS: seconds(1800, 60), // a session unused this long ends
  SESSION_MAX_SECONDS: seconds(8 * 3600, 60), // a session ends this long after sign-in, used or not
  SESSION_LINK_SECONDS: seconds(600, 10), // a one-time sign-in link (tracegate sessions create) is good this long

  LOCAL_MODEL_URL: httpUrl().default('http://127.0.0.1:11434'), // the local model server /api/local/run calls
  LOCAL_MODEL_API: z.enum(['ollama', 'openai']).default('ollama'), // its protocol: Ollama's /api/chat, or OpenAI's /v1
  LOCAL_MODEL: z.string().min(1).max(256).optional(), // model of a request that names none
  LOCAL_MODEL_API_KEY: z.string().optional(), // sent as Authorization: Bearer (OpenAI-compatible servers started with a key)
  LOCAL_MODEL_CONNECT_TIMEOUT_MS: ms(5_000, 1), // connecting to it (then 503)
  LOCAL_MODEL_IDLE_TIMEOUT_MS: ms(120_000, 1), // longest wait for its first token (a model loading) or between two (504)
  LOCAL_MODEL_TIMEOUT_MS: ms(600_000, 1), // longest run, first byte to last (504)
  LOCAL_RUN_MAX_MESSAGES: int(1000, 1), // chat turns in one /api/local/run request

  PROVIDER_BASE_URL: httpUrl().default('https://api.openai.com/v1'),
  PROVIDER_API_KEY: z.string().optional(),
  ID_HASH_KEY: z.string().min(16).optional(), // keys redacted request ids' trace ids; default DATA_DIR/keys/id-hash.key
  // Encrypts webhook signing secrets at rest (AES-256-GCM): 64 hex digits; default DATA_DIR/keys/secrets.key. Collectors
  // sharing storage must share it (each must read the secrets the others stored).
  SECRETS_KEY: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, '64 hex digits (32 bytes), e.g. from `openssl rand -hex 32`')
    .optional(),
  // POST /api/ingest/webhooks: |now − X-Service-Delivery-Timestamp| at most this (either way), else 401 stale_delivery
  WEBHOOK_TOLERANCE_SECONDS: int(300, 1, 86_400),
  MAX_WEBHOOK_BODY_BYTES: int(256 * 1024, 1024, 64 * 1024 * 1024), // a security alert's body, stored whole (413 beyond)
  // Tool-call arguments and results longer than this (UTF-8 bytes) are cut, their SHA-256 kept
  MAX_TOOL_PAYLOAD_BYTES: int(64 * 1024, 256, 64 * 1024 * 1024),
  PROXY_CONNECT_TIMEOUT_MS: ms(10_000, 1), // TCP/TLS connect to the provider
  PROXY_HEADERS_TIMEOUT_MS: ms(600_000, 1), // until response headers (non-streamed reasoning can take minutes)
  PROXY_BODY_TIMEOUT_MS: ms(300_000, 1), // longest silence between two body chunks
  PROXY_MAX_CONNECTIONS: int(256, 1), // keep-alive sockets per upstream origin
  PROXY_KEEPALIVE_MS: ms(30_000, 1), // idle keep-alive sockets are closed after this
});

export type Config = z.infer<typeof configSchema>;

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, string> = {};
  for (const key of Object.keys(configSchema.shape)) {
    const v = env[`TRACEGATE_${key}`];
    if (v !== undefined && v !== '') raw[key] = v;
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `TRACEGATE_${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration\n  ${lines.join('\n  ')}`);
  }
  const c = parsed.data;
  if ((c.CLICKHOUSE_CLUSTER || c.CLICKHOUSE_NODES.length) && !c.CLICKHOUSE_URL) {
    throw new ConfigError(
      'invalid configuration\n  TRACEGATE_CLICKHOUSE_CLUSTER / _NODES: need TRACEGATE_CLICKHOUSE_URL (the node the collector talks to)',
    );
  }
  // Unset, the budget grows to hold one body at the largest body limit (TRACEGATE_AGENTS_MAX_BODY_BYTES's too).
  if (raw.MAX_INFLIGHT_BODY_BYTES === undefined)
    c.MAX_INFLIGHT_BODY_BYTES = Math.max(c.MAX_INFLIGHT_BODY_BYTES, c.MAX_BODY_BYTES, c.AGENTS_MAX_BODY_BYTES);
  const below = (limit: number, name: string) =>
    new ConfigError(
      `invalid configuration\n  TRACEGATE_MAX_INFLIGHT_BODY_BYTES: ${c.MAX_INFLIGHT_BODY_BYTES} is below ${name} (${limit}): a body at the limit could never be read`,
    );
  if (c.MAX_INFLIGHT_BODY_BYTES < c.MAX_BODY_BYTES) throw below(c.MAX_BODY_BYTES, 'TRACEGATE_MAX_BODY_BYTES');
  if (c.MAX_INFLIGHT_BODY_BYTES < c.AGENTS_MAX_BODY_BYTES) {
    // A budget set below the agents route's default limit bounds that route too; set below an explicit one, it is a mistake.
    if (raw.AGENTS_MAX_BODY_BYTES !== undefined)
      throw below(c.AGENTS_MAX_BODY_BYTES, 'TRACEGATE_AGENTS_MAX_BODY_BYTES');
    c.AGENTS_MAX_BODY_BYTES = c.MAX_INFLIGHT_BODY_BYTES;
  }
  if (c.SESSION_IDLE_SECONDS > c.SESSION_MAX_SECONDS) {
    throw new ConfigError(
      `invalid configuration\n  TRACEGATE_SESSION_IDLE_SECONDS: ${c.SESSION_IDLE_SECONDS} is above TRACEGATE_SESSION_MAX_SECONDS (${c.SESSION_MAX_SECONDS})`,
    );
  }
  if (c.CLICKHOUSE_NODES.length && !c.CLICKHOUSE_CLUSTER) {
    throw new ConfigError(
      'invalid configuration\n  TRACEGATE_CLICKHOUSE_NODES: only with TRACEGATE_CLICKHOUSE_CLUSTER',
    );
  }
  return c;
}
