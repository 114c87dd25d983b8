// What the app hands every route module: its dependencies, and the host's ways to serve a route (guards,
// receiver declarations, the read deadline).
import type Router from '@koa/router';
import type { Context, Next } from 'koa';
import type { Config } from '../../config/index.ts';
import type { EnrichmentRecord } from '../../core/enrichment-records.ts';
import type { Ingestor } from '../../core/ports/ingest.ts';
import type { Storage } from '../../core/ports/storage.ts';
import type { PipelineStats as FullPipelineStats } from '../../pipeline/pipeline.ts';
import type { Logger } from '../../platform/logger.ts';
import type { Enrichment } from '../../processors/index.ts';
import type { KeyVerifier } from '../auth/key-verifier.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import type { AuthName } from '../auth/strategy.ts';
import type { ErrorFamily } from '../http/errors.ts';
import type { Metrics } from '../http/metrics.ts';
import type { RouteDoc } from '../http/openapi.ts';
import type { RateLimits } from '../http/rate-limit.ts';
import type { ProxyCallMemory } from './proxy-calls.ts';
import type { SettingsStore } from '../workspaces/settings.ts';
import type { WebhookSecrets } from '../workspaces/webhook-secrets.ts';

/** What the routes read of the pipeline's stats (tests pass small doubles). */
export type PipelineStats = Pick<
  FullPipelineStats,
  | 'spoolBytes'
  | 'pendingRows'
  | 'storageHealthy'
  | 'lastFlushError'
  | 'lastFlushErrorCode'
  | 'spoolSyncs'
  | 'spoolAppends'
  | 'spoolWriteFailure'
>;

export interface AppDeps {
  config: Config;
  storage: Storage;
  pipeline: Ingestor & {
    stats(): PipelineStats;
    record(extra: EnrichmentRecord[]): Promise<void>;
    flush(): Promise<void>;
  };
  keys: KeyVerifier;
  limits: RateLimits;
  settings: SettingsStore;
  /** Webhook signing secrets, opened and cached for the webhook receiver; the admin routes manage them. */
  webhookSecrets: WebhookSecrets;
  enrichment: Enrichment;
  log: Logger;
  metrics: Metrics;
  /** Enables the loopback admin routes used by the CLI. */
  adminToken?: string;
  /** Route modules register cleanup here (connection pools); the server runs them at shutdown. */
  closers?: Array<() => Promise<void>>;
}

export type Middleware = (ctx: Context, next: Next) => Promise<void>;

/** How a route is guarded: who may call it, its rate-limit budget, and the shape its errors take. */
export interface GuardOptions {
  /**
   * Default `apiKey`; `none` for the public ops routes. A list: the first strategy whose credential the request
   * carries decides (an API key header, else the session cookie); with none of them, the first refuses it.
   */
  auth?: AuthName | readonly AuthName[] | 'none';
  /** The rate-limit bucket: one budget per caller and bucket (none: not limited). */
  limiter?: string;
  /** Default `envelope`, the JSON error body. */
  errors?: ErrorFamily;
  /** Audit the requests refused after authentication (routes taking a body; accepted ones the pipeline audits). */
  auditRefusals?: boolean;
}

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface RouteContext extends AppDeps {
  router: Router;
  docs: RouteDoc[];
  /** Serves `method path` behind its guard; a method `path` does not serve answers 405 in the guard's error shape. */
  on(method: Method, path: string, guard: GuardOptions, ...handlers: Middleware[]): void;
  /** The guard's middleware alone, for a route registered by hand. */
  guard(opts: GuardOptions): Middleware[];
  /** Authenticates a request with one strategy, for a route that takes a credential only in some cases. */
  authenticate(ctx: Context, name: AuthName): Promise<Caller>;
  /** Register cleanup to run at shutdown. */
  onClose(fn: () => Promise<void>): void;
  /**
   * Runs a read route's storage work under the read deadline: a storage outage, hang or a read past
   * READ_DEADLINE_MS is answered 503 + Retry-After (code `unavailable`); other failures stay 500s. See ReadGate.
   */
  read<T>(work: () => Promise<T>): Promise<T>;
  /** The calls the proxy recorded, by response or request id (the proxy remembers them; receivers and reads find them). */
  proxyCalls: ProxyCallMemory;
}
