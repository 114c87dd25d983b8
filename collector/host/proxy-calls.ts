// Which span recorded a call the proxy made, by the provider's response id or request id: what an agent's response
// span and a guardrail result link to. This collector's recent calls are remembered here (a stored span becomes
// readable a flush interval after it was spooled); the rest, and those of other collectors, are in storage.
import type { ProxyCall, ProxyCallRef, Storage } from '../../core/ports/storage.ts';
import type { SpanRecord } from '../../core/record.ts';
import { callRefsOf } from '../../core/response-ownership.ts';

/** Calls remembered: the oldest is forgotten first. */
const RECENT_MAX = 10_000;

const keyOf = (workspaceId: string, ref: ProxyCallRef) => `${workspaceId}\n${ref.kind}\n${ref.id}`;

export class ProxyCallMemory {
  private readonly recent = new Map<string, ProxyCall>();
  private readonly storage: Pick<Storage, 'proxyCalls'>;

  constructor(storage: Pick<Storage, 'proxyCalls'>) {
    this.storage = storage;
  }

  /** A proxy span about to be spooled: its call is findable from now on. */
  remember(span: SpanRecord): void {
    for (const ref of callRefsOf(span)) {
      const key = keyOf(span.workspaceId, ref);
      this.recent.delete(key);
      this.recent.set(key, { ...ref, traceId: span.traceId, spanId: span.spanId });
      if (this.recent.size > RECENT_MAX) this.recent.delete(this.recent.keys().next().value!);
    }
  }

  /**
   * The span of each call the proxy recorded for this workspace, keyed `kind:id`; unknown calls are left out.
   * `read` runs the storage lookup (under the read deadline: an outage throws, as a 503).
   */
  async find(
    workspaceId: string,
    refs: readonly ProxyCallRef[],
    read: <T>(work: () => Promise<T>) => Promise<T>,
  ): Promise<Map<string, ProxyCall>> {
    const out = new Map<string, ProxyCall>();
    const ask: ProxyCallRef[] = [];
    for (const ref of refs) {
      const hit = this.recent.get(keyOf(workspaceId, ref));
      if (hit) out.set(`${ref.kind}:${ref.id}`, hit);
      else ask.push(ref);
    }
    if (ask.length)
      for (const c of await read(() => this.storage.proxyCalls(workspaceId, ask))) out.set(`${c.kind}:${c.id}`, c);
    return out;
  }
}
