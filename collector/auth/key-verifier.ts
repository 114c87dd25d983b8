// API keys checked on the request path: looked up by id, cached briefly, and still known (last-known copy) while
// storage is unreachable, so ingestion continues into the spool.
import { BackpressureError } from '../../core/errors.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import type { ApiKeyRecord, Storage } from '../../core/ports/storage.ts';
import { LOOKUP_DEADLINE_MS, SingleFlight, STALE_GRACE_MS, within } from '../../platform/slow-storage.ts';
import { keyMatches, parseKey } from '../workspaces/api-keys.ts';
import type { LastKnown } from '../workspaces/last-known.ts';

/**
 * Looks keys up by id with a short cache so a busy ingest path does not query storage per request.
 * Revocation from another process takes effect within `ttlMs` (documented in the README).
 */
export class KeyVerifier {
  private readonly cache = new Map<string, { record: ApiKeyRecord | null; until: number }>();
  private readonly missing = new Map<string, { record: null; until: number }>();
  private readonly storage: Storage;
  private readonly ttlMs: number;
  private readonly lastKnown: LastKnown | undefined;
  private readonly deadlineMs: number;
  private readonly lookups = new SingleFlight<ApiKeyRecord | null>();
  constructor(storage: Storage, ttlMs = 30_000, lastKnown?: LastKnown, deadlineMs = LOOKUP_DEADLINE_MS) {
    this.storage = storage;
    this.ttlMs = ttlMs;
    this.lastKnown = lastKnown;
    this.deadlineMs = deadlineMs;
  }

  /**
   * Whether a lookup of this key costs nothing new: malformed (refused unlooked), answered from the cache, or a key
   * id this server has seen valid (now or before a restart: a real key, which must keep working from an address
   * that others' failures throttle). Only never-seen ids are subject to a throttled address's lookup budget.
   */
  known(key: string): boolean {
    const parsed = parseKey(key);
    if (!parsed) return true;
    const miss = this.missing.get(parsed.keyId);
    if (miss && miss.until >= Date.now()) return true;
    return this.cache.get(parsed.keyId)?.record != null || this.lastKnown?.key(parsed.keyId) !== undefined;
  }

  async verify(key: string): Promise<Caller | null> {
    const parsed = parseKey(key);
    if (!parsed) return null;
    const hit = this.cache.get(parsed.keyId) ?? this.missing.get(parsed.keyId);
    if (hit && hit.until >= Date.now()) return this.check(key, hit.record);
    const gen = this.lookups.generation(parsed.keyId);
    // Storage down or too slow: a key we knew stays valid (ingestion continues into the spool), also one known
    // before a restart; unknown keys get a retryable 503.
    const fallback = (err?: unknown) => {
      const record = hit ? hit.record : this.lastKnown?.key(parsed.keyId);
      if (record !== undefined) {
        // Held a little longer, so the requests that follow do not each wait out the deadline again (unless the
        // key was revoked here meanwhile: then the next request looks it up afresh).
        if (this.lookups.current(parsed.keyId, gen))
          this.cache.set(parsed.keyId, { record, until: Date.now() + STALE_GRACE_MS });
        return this.check(key, record);
      }
      throw Object.assign(
        new BackpressureError('cannot verify the API key while storage is unreachable; retry later', 5),
        { cause: err },
      );
    };
    let got: { value: ApiKeyRecord | null } | null;
    try {
      got = await within(
        this.lookups.run(parsed.keyId, (g) => this.lookup(parsed.keyId, g)),
        this.deadlineMs,
      );
    } catch (err) {
      return fallback(err);
    }
    return got ? this.check(key, got.value) : fallback();
  }

  /** Reads the key and caches what storage said (also when the asking request has given up waiting). */
  private async lookup(keyId: string, gen: number): Promise<ApiKeyRecord | null> {
    const record = await this.storage.getApiKey(keyId);
    if (!this.lookups.current(keyId, gen)) return record; // read before a revoke made here: not cached
    if (record) {
      this.lastKnown?.rememberKey(record);
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(keyId, { record, until: Date.now() + this.ttlMs });
      this.missing.delete(keyId);
    } else {
      // Unknown ids are kept apart: a flood of random ones must not push the real keys out.
      if (this.missing.size > 10_000) this.missing.clear();
      this.missing.set(keyId, { record: null, until: Date.now() + 2_000 });
      this.cache.delete(keyId);
    }
    return record;
  }

  private check(key: string, rec: ApiKeyRecord | null): Caller | null {
    if (!rec || rec.revokedAtMs > 0 || !keyMatches(key, rec)) return null;
    return { workspaceId: rec.workspaceId, keyId: rec.keyId };
  }

  /**
   * Why a key that failed `verify` failed, from the lookup just made (no storage call): the workspace owning a
   * well-formed key id whose secret was wrong or which was revoked, so its owners see attempts on their keys.
   */
  rejection(key: string): { workspaceId: string; reason: 'revoked_key' | 'wrong_secret' } | null {
    const parsed = parseKey(key);
    const rec = parsed ? this.cache.get(parsed.keyId)?.record : null;
    if (!rec) return null;
    return { workspaceId: rec.workspaceId, reason: rec.revokedAtMs > 0 ? 'revoked_key' : 'wrong_secret' };
  }

  /**
   * A key was revoked or changed here: look it up afresh. A revoked key is also marked so in the last-known copy,
   * which would otherwise let it in again whenever storage is too slow to answer (and after a restart meanwhile).
   */
  async forget(keyId: string, revokedAtMs?: number): Promise<void> {
    if (revokedAtMs !== undefined) await this.lastKnown?.revokeKey(keyId, revokedAtMs);
    this.cache.delete(keyId);
    this.missing.delete(keyId);
    this.lookups.changed(keyId);
  }
}
