// Accepted signed deliveries, so that a replay is refused by every collector sharing the storage, not only by the one
// that took the delivery: claims in storage (the first claim of a delivery wins: WebhookStore.claimDelivery), or in
// Redis when TRACEGATE_REDIS_URL is set (SET NX with an expiry past the timestamp tolerance). While Redis fails,
// storage takes the claims.
import { Redis } from 'ioredis';
import type { Storage } from '../../core/ports/storage.ts';

/** A Redis command slower than this is given up (storage answers instead). */
const REDIS_TIMEOUT_MS = 500;
const REPORT_EVERY_MS = 60_000;

export class DeliveryClaims {
  private readonly storage: Pick<Storage, 'claimDelivery' | 'deliveryClaimed'>;
  private readonly redis: Redis | null;
  private readonly ttlSeconds: number;
  private readonly warn: (o: object, m: string) => void;
  private lastReport = 0;

  /** `ttlSeconds`: how long Redis keeps a claim (a replay older than the tolerance is stale anyway). */
  constructor(
    storage: Pick<Storage, 'claimDelivery' | 'deliveryClaimed'>,
    opts: { redisUrl?: string | undefined; ttlSeconds: number; warn: (o: object, m: string) => void },
  ) {
    this.storage = storage;
    this.ttlSeconds = opts.ttlSeconds;
    this.warn = opts.warn;
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

  private key(workspaceId: string, key: string): string {
    return `tracegate:webhook-delivery:${workspaceId}:${key}`;
  }

  private trouble(err: unknown): void {
    if (Date.now() - this.lastReport < REPORT_EVERY_MS) return;
    this.lastReport = Date.now();
    this.warn({ err }, 'webhook replay checks: Redis is failing; storage keeps the claims until it answers again');
  }

  /** Whether the delivery was accepted before. `read`: storage's reads under the routes' deadline. */
  async seen(workspaceId: string, key: string, read: <T>(work: () => Promise<T>) => Promise<T>): Promise<boolean> {
    if (this.redis) {
      try {
        if ((await this.redis.exists(this.key(workspaceId, key))) === 1) return true;
      } catch (err) {
        this.trouble(err);
      }
    }
    return read(() => this.storage.deliveryClaimed(workspaceId, key));
  }

  /** Claim the delivery as accepted: false when another claim of it won (a replay). */
  async claim(workspaceId: string, key: string, atMs: number): Promise<boolean> {
    if (this.redis) {
      try {
        return (await this.redis.set(this.key(workspaceId, key), String(atMs), 'EX', this.ttlSeconds, 'NX')) === 'OK';
      } catch (err) {
        this.trouble(err);
      }
    }
    return this.storage.claimDelivery(workspaceId, key, atMs);
  }

  async close(): Promise<void> {
    if (!this.redis) return;
    await this.redis.quit().catch(() => this.redis?.disconnect());
  }
}
