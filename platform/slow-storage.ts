// Lookups on the request path (keys, settings) against a storage that may hang rather than refuse: a hung
// ClickHouse held every request for the client's 30 s timeout, several times over. Past a short deadline the
// caller uses what it knew (stale cache, last-known copy) or answers a retryable 503, while the one lookup per
// id keeps running and refreshes the cache when storage answers. Reads (the GET routes) get a deadline of their
// own (read-gate.ts).

/** How long a request waits for storage before falling back. */
export const LOOKUP_DEADLINE_MS = 2_000;

/** How long a fallback value is used without asking storage again (a refresh that lands replaces it). */
export const STALE_GRACE_MS = 5_000;

/** The value if `p` settles within `ms`; null when it does not (a rejection within `ms` is thrown). */
export function within<T>(p: Promise<T>, ms: number): Promise<{ value: T } | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
  });
  return Promise.race([p.then((value) => ({ value })), late]).finally(() => clearTimeout(timer));
}

/**
 * One lookup in flight per id; its result (or failure) is shared by every caller asking meanwhile. A change made
 * here meanwhile (a revoked key, new settings) bumps the id's generation: what a lookup or a fallback begun
 * before it would cache is then stale, and `current(id, gen)` says so.
 */
export class SingleFlight<T> {
  private readonly inflight = new Map<string, Promise<T>>();
  private readonly generations = new Map<string, number>();

  run(id: string, lookup: (gen: number) => Promise<T>): Promise<T> {
    let p = this.inflight.get(id);
    if (!p) {
      const mine: Promise<T> = lookup(this.generation(id)).finally(() => {
        if (this.inflight.get(id) === mine) this.inflight.delete(id);
      });
      mine.catch(() => {}); // callers past their deadline no longer listen: never an unhandled rejection
      this.inflight.set(id, mine);
      p = mine;
    }
    return p;
  }

  generation(id: string): number {
    return this.generations.get(id) ?? 0;
  }
  current(id: string, gen: number): boolean {
    return this.generation(id) === gen;
  }

  /** A change to the id: lookups already running no longer count, the next caller starts a fresh one. */
  changed(id: string): void {
    this.generations.set(id, this.generation(id) + 1);
    this.inflight.delete(id);
    if (this.generations.size > 10_000) this.generations.clear(); // a cleared id restarts at 0: only in-flight ones could mistake it
  }
}
