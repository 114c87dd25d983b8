// The proxy's memory of the response ids it handed out: recent ones here, the rest proven by stored spans
// (core/response-ownership.ts), so calls about a stored response go out with the held key only for their owner.
import type { Storage } from '../../core/ports/storage.ts';
import { ownershipKey, type ResponseOwnership } from '../../core/response-ownership.ts';

export { ownershipOf, RESPONSE_ID, serverOf, upstreamOf } from '../../core/response-ownership.ts';

/** Ids this collector handed out lately: stored spans reach storage up to a flush interval later. */
const RECENT_MAX = 10_000;

export class ResponseOwners {
  private readonly recent = new Map<string, true>(); // insertion order: the oldest is dropped first
  private readonly storage: Pick<Storage, 'hasProxyResponse'>;
  private readonly lagMs: number;

  /** `lagMs`: how long a stored span may take to become readable (the flush interval, plus an insert). */
  constructor(storage: Pick<Storage, 'hasProxyResponse'>, lagMs: number) {
    this.storage = storage;
    this.lagMs = lagMs;
  }

  remember(o: ResponseOwnership): void {
    const key = ownershipKey(o);
    this.recent.delete(key);
    this.recent.set(key, true);
    if (this.recent.size > RECENT_MAX) this.recent.delete(this.recent.keys().next().value!);
  }

  /**
   * Whether the proxy gave `responseId` to this workspace from `upstream`. A miss is asked again after `lagMs`: the
   * id may have come from another collector on the same storage, or be in a spool replaying after a restart. `read`
   * runs the storage lookups (the routes' deadline: an outage is a 503, not a 404).
   */
  async owns(
    workspaceId: string,
    responseId: string,
    upstream: string,
    read: <T>(work: () => Promise<T>) => Promise<T>,
  ): Promise<boolean> {
    const key = ownershipKey({ workspaceId, upstream, responseId });
    const ask = () => read(() => this.storage.hasProxyResponse(workspaceId, responseId, upstream));
    if (this.recent.has(key) || (await ask())) return true;
    await new Promise((resolve) => setTimeout(resolve, this.lagMs));
    return this.recent.has(key) || ask();
  }
}
