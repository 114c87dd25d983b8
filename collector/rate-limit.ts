// Per route and per API key id. Redis when configured, with an in-memory limiter as
// insurance so a Redis outage degrades to per-instance limits instead of failing requests.
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { Redis } from 'ioredis';
import type { Context, Next } from 'koa';
import { HttpError } from './errors.ts';
import type { Caller } from './keys.ts';

export interface LimiterOptions { points: number; durationSeconds: number; redisUrl?: string }

export class RateLimits {
  private readonly limiters = new Map<string, RateLimiterAbstract>();
  private readonly redis: Redis | null;
  private readonly opts: LimiterOptions;
  constructor(opts: LimiterOptions) {
    this.opts = opts;
    this.redis = opts.redisUrl
      ? new Redis(opts.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: false })
      : null;
    // ioredis reconnects by itself; without a listener an outage would be an unhandled 'error' event.
    this.redis?.on('error', () => {});
  }

  private limiter(route: string): RateLimiterAbstract {
    let l = this.limiters.get(route);
    if (!l) {
      const base = { points: this.opts.points, duration: this.opts.durationSeconds, keyPrefix: `tg:rl:${route}` };
      const memory = new RateLimiterMemory(base);
      l = this.redis ? new RateLimiterRedis({ ...base, storeClient: this.redis, insuranceLimiter: memory }) : memory;
      this.limiters.set(route, l);
    }
    return l;
  }

  /** Koa middleware; expects ctx.state.caller to be set by auth. */
  middleware(route: string) {
    return async (ctx: Context, next: Next) => {
      const caller = ctx.state.caller as Caller | undefined;
      const key = caller ? caller.keyId : `ip:${ctx.ip}`;
      try {
        const res = await this.limiter(route).consume(key);
        ctx.set('X-RateLimit-Remaining', String(res.remainingPoints));
      } catch (err) {
        if (err instanceof RateLimiterRes) {
          const retry = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
          throw new HttpError(429, 'rate_limited', `rate limit of ${this.opts.points} requests per ${this.opts.durationSeconds}s exceeded for this route`,
            { retryAfterSeconds: retry }, { 'Retry-After': String(retry), 'X-RateLimit-Remaining': '0' });
        }
        throw err;
      }
      await next();
    };
  }

  async close(): Promise<void> {
    this.redis?.disconnect();
  }
}
