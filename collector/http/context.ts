// What every route module receives from the app: its dependencies, the router and the guards.
import type { Context, Next } from 'koa';
import type Router from '@koa/router';
import type { Config } from '../../config/index.ts';
import type { Storage } from '../../core/ports/storage.ts';
import type { Ingestor } from '../../core/ports/ingest.ts';
import type { EnrichmentRecord } from '../../core/enrichment-records.ts';
import type { Logger } from '../../platform/logger.ts';
import type { Metrics } from './metrics.ts';
import type { HttpError } from '../../core/errors.ts';
import type { KeyVerifier } from '../workspaces/api-keys.ts';
import type { RateLimits } from './rate-limit.ts';
import type { SettingsStore } from '../workspaces/settings.ts';
import type { Enrichment } from '../../processors/index.ts';
import type { RouteDoc } from './openapi.ts';
import type { PipelineStats as FullPipelineStats } from '../../pipeline/pipeline.ts';

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
  enrichment: Enrichment;
  log: Logger;
  metrics: Metrics;
  /** Enables the loopback admin routes used by the CLI. */
  adminToken?: string;
  /** Route modules register cleanup here (connection pools); the server runs them at shutdown. */
  closers?: Array<() => Promise<void>>;
}

/** What each route module receives. */
export interface RouteContext extends AppDeps {
  router: Router;
  docs: RouteDoc[];
  /** auth + per-route rate limit, for ingest routes. */
  ingestGuard(route: string): Array<(ctx: Context, next: Next) => Promise<void>>;
  /** Register cleanup to run at shutdown. */
  onClose(fn: () => Promise<void>): void;
  /** auth only (routes that limit on their own terms). */
  requireKey: (ctx: Context, next: Next) => Promise<void>;
  /** auth + per-route rate limit, for read routes (`route` names the limiter, e.g. 'read:traces'). */
  readGuard(route: string): Array<(ctx: Context, next: Next) => Promise<void>>;
  /**
   * Runs a read route's storage work under the read deadline: a storage outage, hang or a read past
   * READ_DEADLINE_MS is answered 503 + Retry-After (code `unavailable`); other failures stay 500s. See ReadGate.
   */
  read<T>(work: () => Promise<T>): Promise<T>;
}

export function renderError(ctx: Context, err: HttpError): void {
  ctx.status = err.status;
  for (const [k, v] of Object.entries(err.headers)) ctx.set(k, v);
  ctx.body = { error: { code: err.code, message: err.message, details: err.details } };
}

export function bearer(ctx: Context): string | null {
  const h = ctx.get('authorization');
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m ? m[1]! : null;
}
