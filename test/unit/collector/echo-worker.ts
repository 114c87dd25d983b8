// A worker for the WorkerRpc tests: 'echo' answers the message, 'clone-fail' answers with a value that
// cannot be posted back (a function), 'limits' with the thread's resource limits, 'fail' throws an error with the
// given fields.
import { resourceLimits } from 'node:worker_threads';
import { serveRpc } from '../../../platform/worker-rpc.ts';

serveRpc<{ id: number; op: string; value?: unknown }>(async (m) => {
  if (m.op === 'clone-fail') return { value: { f: () => 1 } };
  if (m.op === 'limits') return { value: resourceLimits };
  if (m.op === 'fail') throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8123'), m.value as object);
  return { value: m.value };
});
