// One alert rule's sliding window: samples ordered by their time (the span's arrival), each remembering the span
// it came from, so a redelivered span (an exporter retry) is not counted twice.

export interface Sample {
  at: number;
  value: number;
  error: boolean;
  span: string;
}

/** The identity storage gives a span: a redelivery has the same one. */
export function spanKey(s: { workspaceId: string; traceId: string; spanId: string }): string {
  return `${s.workspaceId}\u0000${s.traceId}\u0000${s.spanId}`;
}

export class RuleWindow {
  private readonly samples: Sample[] = [];
  // Only the spans of samples still held: bounded like the window. A span dropped from it is older than every
  // sample held (time or cap), so its redelivery would be dropped again at once.
  private readonly spans = new Set<string>();
  private readonly maxSamples: number;
  lastFiredAt = -Infinity;
  /** Fires taken back while a later one stood: the fire each had followed (see takeBack). */
  private readonly takenBack = new Map<number, number>();

  constructor(maxSamples = 10_000) {
    this.maxSamples = maxSamples;
  }

  get size(): number {
    return this.samples.length;
  }
  get values(): readonly Sample[] {
    return this.samples;
  }

  /** Adds a sample; false when its span is already counted or it is too old to be held. */
  add(s: Sample): boolean {
    if (this.spans.has(s.span)) return false;
    // Before any sample of the same time, so at the cap the newcomer is the one dropped.
    let lo = 0;
    let hi = this.samples.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.samples[mid]!.at < s.at) lo = mid + 1;
      else hi = mid;
    }
    this.samples.splice(lo, 0, s);
    this.spans.add(s.span);
    if (this.samples.length > this.maxSamples) this.dropFirst(this.samples.length - this.maxSamples);
    return this.spans.has(s.span);
  }

  /**
   * Takes back the fire at `at` (lost before it was stored), which had followed `before`; true when lastFiredAt
   * changed. A fire that is no longer the last one is remembered as taken back, so that taking back a later one goes
   * past it too: two lost fires, whichever order they are taken back in, leave the fire before both.
   */
  takeBack(at: number, before: number): boolean {
    if (this.lastFiredAt !== at) {
      if (at !== before) this.takenBack.set(at, before); // (two fires in one millisecond: nothing to go past)
      return false;
    }
    let t = before;
    for (let next = this.takenBack.get(t); next !== undefined; next = this.takenBack.get(t)) {
      this.takenBack.delete(t);
      t = next;
    }
    this.lastFiredAt = t;
    return true;
  }

  /** Forgets the samples of these spans (a lost batch's: their redelivery counts again). */
  remove(spans: readonly string[]): void {
    const gone = new Set(spans.filter((k) => this.spans.delete(k)));
    if (gone.size === 0) return;
    const kept = this.samples.filter((x) => !gone.has(x.span));
    this.samples.length = 0;
    this.samples.push(...kept);
  }

  /** Forgets the samples older than `since`. */
  prune(since: number): void {
    let n = 0;
    while (n < this.samples.length && this.samples[n]!.at < since) n++;
    if (n) this.dropFirst(n);
  }

  private dropFirst(n: number): void {
    for (const s of this.samples.splice(0, n)) this.spans.delete(s.span);
  }
}
