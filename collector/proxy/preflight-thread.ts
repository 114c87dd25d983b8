// Large request bodies get their preflight on a thread of their own: the detectors take about 30 ms per MB, and on
// the main thread a multi-megabyte input would hold every other request (ingestion acknowledgements, health checks)
// that long. Small bodies stay inline, where a thread round trip would cost more than their scan.
import { WorkerRpc } from '../../platform/worker-rpc.ts';
import type { Policy } from '../../processors/governance/policy.ts';
import { preflight, type Preflight } from './preflight.ts';

/** Bodies from this size up are scanned off the main thread. */
export const OFFLOAD_BYTES = 256 * 1024;

export interface PreflightMessage {
  policy: Policy;
  raw: Uint8Array;
  environment: string;
}
/** As Preflight, with `forward` null when it is the caller's bytes unchanged (the main thread has them). */
export type PreflightAnswer = Omit<Preflight, 'forward'> & { forward: Uint8Array | null };

export class PreflightThread {
  private readonly rpc = new WorkerRpc(new URL('./preflight-host.ts', import.meta.url), null, 'preflight');

  /** `body` is `raw` parsed (and validated) by the caller. */
  async run(policy: Policy, raw: Buffer, body: Record<string, unknown>, environment: string): Promise<Preflight> {
    if (raw.length < OFFLOAD_BYTES) return preflight(policy, raw, body, environment);
    let answer: PreflightAnswer;
    try {
      answer = await this.rpc.call<PreflightAnswer>({ policy, raw, environment } satisfies PreflightMessage);
    } catch {
      return preflight(policy, raw, body, environment); // the thread failed: scan here rather than not at all
    }
    const { forward, ...rest } = answer;
    return { ...rest, forward: forward ? Buffer.from(forward.buffer, forward.byteOffset, forward.byteLength) : raw };
  }

  close(): Promise<void> {
    return this.rpc.close();
  }
}
