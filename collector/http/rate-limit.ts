// Per route and per API key id. Redis when configured, with an in-memory limiter as
// insurance so a Redis outage degrades to per-instance limits instead of failing requests.
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { Redis } from 'ioredis';
import type { Context, Next } from 'koa';
import { HttpError } from './errors.ts';
import type { Caller } from '../../core/ports/ingest.ts';

export interface LimiterOptions {
  points: number;
  durationSeconds: number;
  redisUrl?: string;
  /** Failed authentications allowed per client IP per window (default 30 per 60 s). */
  authFailures?: { points: number; durationSeconds: number };
  /**
   * Told when Redis fails (a connection error, or a command answered by the insurance limiter): limits are then
   * per instance. At most once per REDIS_REPORT_MS with the failures counted since, so an outage is one log line
   * a minute, not one per request.
   */
  onRedisTrouble?: (failures: number, err: unknown) => void;
}

const REDIS_REPORT_MS = 60_000;
/** Storage lookups of keys not cached, per window, for an address throttled for failed authentications. */
const THROTTLED_LOOKUPS = 10;

/** What a failed authentication costs its client IP: `throttled` once over the limit; `tripped` on the first throttled one of a window. */
export interface AuthFailureResult {
  throttled: boolean;
  tripped: boolean;
  retryAfterSeconds: number;
}

/** A Redis command slower than this falls back to the in-memory limiter (a hung server never answers). */
const REDIS_COMMAND_TIMEOUT_MS = 200;
/** After a timeout, Redis is left alone this long: requests do not each wait out the timeout meanwhile. */
const REDIS_SKIP_MS = 5000;

/**
 * The in-memory limiter as Redis's insurance: rate-limiter-flexible calls its consume() when a Redis command fails
 * (a timeout included), which is how a failure is noticed (not by wall time: an event-loop stall is not Redis's).
 */
class Insurance extends RateLimiterMemory {
  onFallback: () => void = () => {};
  override consume(...args: Parameters<RateLimiterMemory['consume']>): Promise<RateLimiterRes> {
    this.onFallback();
    return super.consume(...args);
  }
  /** Used directly while Redis is skipped: not a new failure. */
  consumeHere(key: string): Promise<RateLimiterRes> {
    return super.consume(key);
  }
}

interface RouteLimiter {
  shared: RateLimiterAbstract;
  memory: Insurance;
}

export class RateLimits {
  private readonly limiters = new Map<string, RouteLimiter>();
  private readonly redis: Redis | null;
  private redisSkipUntil = 0;
  private readonly opts: LimiterOptions;
  private readonly authFailures: { points: number; durationSeconds: number };
  constructor(opts: LimiterOptions) {
    this.opts = opts;
    this.authFailures = opts.authFailures ?? { points: 30, durationSeconds: 60 };
    this.redis = opts.redisUrl
      ? new Redis(opts.redisUrl, {
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          lazyConnect: false,
          commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
        })
      : null;
    // ioredis reconnects by itself; without a listener an outage would be an unhandled 'error' event.
    this.redis?.on('error', (err: unknown) => this.trouble(err));
  }

  /** Redis failures since start (the metric tracegate_rate_limit_redis_failures_total). */
  redisFailures = 0;
  private troubles = 0;
  private reportedAt = -Infinity;
  private trouble(err: unknown): void {
    this.redisFailures++;
    this.troubles++;
    const now = Date.now();
    if (now - this.reportedAt < REDIS_REPORT_MS) return;
    this.reportedAt = now;
    const n = this.troubles;
    this.troubles = 0;
    this.opts.onRedisTrouble?.(n, err);
  }

  /**
   * Consume a point of `route` for `key`. Through Redis when configured; its in-memory insurance limiter answers
   * when a command fails or times out, and, for REDIS_SKIP_MS after that, every request.
   */
  private consume(
    route: string,
    key: string,
    points = this.opts.points,
    duration = this.opts.durationSeconds,
  ): Promise<RateLimiterRes> {
    let l = this.limiters.get(route);
    if (!l) {
      const base = { points, duration, keyPrefix: `tg:rl:${route}` };
      const memory = new Insurance(base);
      memory.onFallback = () => {
        this.redisSkipUntil = Date.now() + REDIS_SKIP_MS;
        this.trouble(new Error('a Redis command failed or timed out; the in-memory limiter answered'));
      };
      l = {
        memory,
        shared: this.redis
          ? new RateLimiterRedis({ ...base, storeClient: this.redis, insuranceLimiter: memory })
          : memory,
      };
      this.limiters.set(route, l);
    }
    if (this.memoryOnly(l)) return l.memory.consumeHere(key);
    return l.shared.consume(key);
  }

  /** No Redis, or Redis skipped after a failure: the in-memory limiter answers. */
  private memoryOnly(l: RouteLimiter): boolean {
    return l.shared === l.memory || Date.now() < this.redisSkipUntil;
  }

  /** Koa middleware; expects ctx.state.caller to be set by auth. */
  middleware(route: string) {
    return async (ctx: Context, next: Next) => {
      const caller = ctx.state.caller as Caller | undefined;
      const key = caller ? caller.keyId : `ip:${ctx.ip}`;
      try {
        const res = await this.consume(route, key);
        ctx.set('X-RateLimit-Remaining', String(res.remainingPoints));
      } catch (err) {
        if (err instanceof RateLimiterRes) {
          const retry = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
          throw new HttpError(
            429,
            'rate_limited',
            `rate limit of ${this.opts.points} requests per ${this.opts.durationSeconds}s exceeded for this route`,
            { retryAfterSeconds: retry },
            { 'Retry-After': String(retry), 'X-RateLimit-Remaining': '0' },
          );
        }
        throw err;
      }
      await next();
    };
  }

  /**
   * Count a failed authentication against the client's IP. Only failures are counted, so a valid key keeps working
   * from an address shared with a misbehaving client; past the limit, bad keys are answered 429 and not audited
   * one by one (a flood of bad keys would otherwise fill a workspace's audit log).
   */
  async authFailure(ip: string): Promise<AuthFailureResult> {
    const { points, durationSeconds } = this.authFailures;
    try {
      await this.consume('auth-failure', `ip:${ip}`, points, durationSeconds);
      return { throttled: false, tripped: false, retryAfterSeconds: 0 };
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) return { throttled: false, tripped: false, retryAfterSeconds: 0 };
      return {
        throttled: true,
        tripped: err.consumedPoints === points + 1,
        retryAfterSeconds: Math.max(1, Math.ceil(err.msBeforeNext / 1000)),
      };
    }
  }

  /**
   * Whether a key id the server has never seen valid may be looked up in storage for this address. While the
   * address is throttled for failed authentications, only a few lookups a window are: random key ids would otherwise
   * cost a storage query each, throttled or not. Refused attempts are answered 429 unchecked, so none can succeed.
   */
  async lookupAllowed(ip: string): Promise<{ allowed: boolean; retryAfterSeconds: number }> {
    const yes = { allowed: true, retryAfterSeconds: 0 };
    const l = this.limiters.get('auth-failure');
    if (!l) return yes; // no failure counted yet
    let seen: RateLimiterRes | null;
    try {
      seen = await (this.memoryOnly(l) ? l.memory : l.shared).get(`ip:${ip}`);
    } catch {
      return yes;
    }
    if (!seen || seen.consumedPoints <= this.authFailures.points) return yes;
    try {
      await this.consume('auth-lookup-throttled', `ip:${ip}`, THROTTLED_LOOKUPS, this.authFailures.durationSeconds);
      return yes;
    } catch {
      return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(seen.msBeforeNext / 1000)) };
    }
  }

  /**
   * While an address is throttled, an attempt on a real key id (wrong secret, revoked key) is still audited in that
   * key's workspace, once per address, key id and window: its owners see the attack, which cannot hide behind a
   * limit tripped with junk keys, and cannot flood their log either.
   */
  async firstThrottledAttempt(ip: string, keyId: string): Promise<boolean> {
    try {
      await this.consume('auth-failure-key', `ip:${ip}:${keyId}`, 1, this.authFailures.durationSeconds);
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.redis?.disconnect();
  }
}
