// A worker for the WorkerRpc tests: 'echo' answers the message, 'clone-fail' answers with a value that
// cannot be posted back (a function).
import { serveRpc } from '../../collector/worker-rpc.ts';

serveRpc<{ id: number; op: string; value?: unknown }>(async (m) => {
  if (m.op === 'clone-fail') return { value: { f: () => 1 } };
  return { value: m.value };
});
