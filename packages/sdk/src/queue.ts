// The items waiting to be sent, one lane per route, bounded as a whole: past the bound the oldest item (of any lane)
// is dropped, so a long outage keeps the newest data.

export type Lane = 'traces' | 'feedback' | 'toolCalls';
export const LANES: readonly Lane[] = ['traces', 'feedback', 'toolCalls'];

export interface Item {
  lane: Lane;
  /** Enqueue order across lanes: what `flush()` waits for and which item is the oldest. */
  seq: number;
  /** The item serialised when it was enqueued (later changes by the application do not leak in). */
  json: string;
  bytes: number;
}

/** A FIFO with O(1) push and shift (an array and a head index, compacted as the head advances). */
class Fifo {
  private items: Item[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }
  peek(): Item | undefined {
    return this.items[this.head];
  }
  push(item: Item): void {
    this.items.push(item);
  }
  shift(): Item | undefined {
    const item = this.items[this.head];
    if (item === undefined) return undefined;
    this.items[this.head++] = undefined as unknown as Item;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
}

export class BoundedQueue {
  private readonly lanes = new Map<Lane, Fifo>(LANES.map((l) => [l, new Fifo()]));
  private count = 0;

  private readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  get size(): number {
    return this.count;
  }

  sizeOf(lane: Lane): number {
    return this.lanes.get(lane)!.length;
  }

  /** Adds an item; returns the item dropped to make room, if one was. */
  push(item: Item): Item | undefined {
    let dropped: Item | undefined;
    if (this.count >= this.max) dropped = this.shiftOldest();
    this.lanes.get(item.lane)!.push(item);
    this.count++;
    return dropped;
  }

  /** The sequence number of the lane's oldest item. */
  headSeq(lane: Lane): number | undefined {
    return this.lanes.get(lane)!.peek()?.seq;
  }

  /** The sequence number of the oldest queued item. */
  oldestSeq(): number | undefined {
    let oldest: number | undefined;
    for (const f of this.lanes.values()) {
      const s = f.peek()?.seq;
      if (s !== undefined && (oldest === undefined || s < oldest)) oldest = s;
    }
    return oldest;
  }

  /** The lane's oldest items: at most `maxItems`, and at most `maxBytes` unless the first alone is larger. */
  take(lane: Lane, maxItems: number, maxBytes: number): Item[] {
    const f = this.lanes.get(lane)!;
    const out: Item[] = [];
    let bytes = 0;
    while (out.length < maxItems) {
      const next = f.peek();
      if (!next || (out.length > 0 && bytes + next.bytes > maxBytes)) break;
      out.push(f.shift()!);
      bytes += next.bytes;
    }
    this.count -= out.length;
    return out;
  }

  /** Everything queued, oldest lane first (for a shutdown that ran out of time). */
  drain(): Item[] {
    const out: Item[] = [];
    for (const lane of LANES) out.push(...this.take(lane, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY));
    return out;
  }

  private shiftOldest(): Item | undefined {
    let from: Fifo | undefined;
    for (const f of this.lanes.values()) {
      const s = f.peek()?.seq;
      if (s !== undefined && (!from || s < from.peek()!.seq)) from = f;
    }
    const item = from?.shift();
    if (item) this.count--;
    return item;
  }
}
