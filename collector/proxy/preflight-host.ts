// Worker-thread side of PreflightThread: the same pure preflight over a body the main thread already validated.
import { serveRpc } from '../../platform/worker-rpc.ts';
import { preflight } from './preflight.ts';
import type { PreflightAnswer, PreflightMessage } from './preflight-thread.ts';

serveRpc<PreflightMessage & { id: number }>(async (m) => {
  const raw = Buffer.from(m.raw.buffer, m.raw.byteOffset, m.raw.byteLength);
  const body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>; // checked by parseJson before it was sent
  const pre = preflight(m.policy, raw, body, m.environment);
  // Unchanged bytes are not sent back; rewritten ones move to the main thread without a copy.
  const forward = pre.forward === raw ? null : new Uint8Array(pre.forward);
  const value: PreflightAnswer = { ...pre, forward };
  return { value, transfer: forward ? [forward.buffer as ArrayBuffer] : [] };
});
