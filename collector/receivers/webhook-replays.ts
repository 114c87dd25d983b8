// Accepted signed deliveries, so that a replay is refused by every collector sharing the storage, not only by the one
// that took the delivery: claims in storage (the first claim of a delivery wins: WebhookStore.claimDeliveries), or in
// Redis when TRACEGATE_REDIS_URL is set (SET NX with an expiry past the timestamp tolerance). While Redis fails,
// storage takes the claims.
// Storage is asked for many deliveries at once: the checks and claims arriving while one storage call runs go
// together in the next (a claim is a write, an fsync on the embedded store and a part on ClickHouse, so one per
// delivery limited signed deliveries to a few dozen a second).
import { Redis } from 'ioredis';
import type { DeliveryClaim, Storage } from '../../core/ports/storage.ts';

/** A Redis command slower than this is given up (storage answers instead). */
const REDIS_TIMEOUT_MS = 500;
const REPORT_EVERY_MS = 60_000;
/** Deliveries asked about in one storage call at most. */
const MAX_BATCH = 1000;

/** Calls of `run` for items arriving while one runs go together in the next one. */
class Coalesced<I, O> {
  private readonly run: (items: I[]) => Promise<O[]>;
  private queue: Array<{ item: I; resolve: (o: O) => void; reject: (e: unknown) => void }> = [];
  private running = false;

  constructor(run: (items: I[]) => Promise<O[]>) {
    this.run = run;
  }

  call(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    while (this.queue.length) {
      const batch = this.queue.splice(0, MAX_BATCH);
      try {
        const out = await this.run(batch.map((b) => b.item));
        for (const [i, b] of batch.entries()) b.resolve(out[i]!);
      } catch (err) {
        for (const b of batch) b.reject(err);
      }
    }
    this.running = false;
  }
}

export class DeliveryClaims {
  private readonly redis: Redis | null;
  private readonly ttlSeconds: number;
  private readonly warn: (o: object, m: string) => void;
  private lastReport = 0;
  private readonly checks: Coalesced<DeliveryClaim, boolean>;
  private readonly claims: Coalesced<DeliveryClaim, boolean>;

  /**
   * `ttlSeconds`: how long Redis keeps a claim (a replay older than the tolerance is stale anyway); `read`: storage's
   * reads under the routes' deadline.
   */
  constructor(
    storage: Pick<Storage, 'claimDeliveries' | 'claimedDeliveries'>,
    opts: {
      redisUrl?: string | undefined;
      ttlSeconds: number;
      warn: (o: object, m: string) => void;
      read: <T>(work: () => Promise<T>) => Promise<T>;
    },
  ) {
    this.ttlSeconds = opts.ttlSeconds;
    this.warn = opts.warn;
    this.checks = new Coalesced((items) => opts.read(() => storage.claimedDeliveries(items)));
    this.claims = new Coalesced((items) => storage.claimDeliveries(items, Date.now()));
    this.redis = opts.redisUrl
      ? new Redis(opts.redisUrl, {
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          commandTimeout: REDIS_TIMEOUT_MS,
        })
      : null;
    // ioredis reconnects by itself; without a listener an outage would be an unhandled 'error' event.
    this.redis?.on('error', (err: unknown) => this.trouble(err));
  }

  private key(c: DeliveryClaim): string {
    return `tracegate:webhook-delivery:${c.workspaceId}:${c.key}`;
  }

  private trouble(err: unknown): void {
    if (Date.now() - this.lastReport < REPORT_EVERY_MS) return;
    this.lastReport = Date.now();
    this.warn({ err }, 'webhook replay checks: Redis is failing; storage keeps the claims until it answers again');
  }

  /** Whether the delivery was accepted before (in Redis, or in storage: claims taken while Redis failed). */
  async seen(c: DeliveryClaim): Promise<boolean> {
    if (this.redis) {
      try {
        if ((await this.redis.exists(this.key(c))) === 1) return true;
      } catch (err) {
        this.trouble(err);
      }
    }
    return this.checks.call(c);
  }

  /** Claim the delivery as accepted: false when another claim of it won (a replay). */
  async claim(c: DeliveryClaim): Promise<boolean> {
    if (this.redis) {
      try {
        return (await this.redis.set(this.key(c), String(Date.now()), 'EX', this.ttlSeconds, 'NX')) === 'OK';
      } catch (err) {
        this.trouble(err);
      }
    }
    return this.claims.call(c);
  }

  async close(): Promise<void> {
    if (!this.redis) return;
    await this.redis.quit().catch(() => this.redis?.disconnect());
  }
}
