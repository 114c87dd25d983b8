// A short-lived Node program (a script, a CLI, a serverless handler's process): it queues SDK_COUNT traces and
// returns without flushing. The SDK's beforeExit flush must deliver them, within flushTimeoutMs when the server is
// down. Prints the SDK's errors and final stats on stderr for the test to read.
import { Tracegate } from '../../../packages/sdk/src/index.ts';

const count = Number(process.env.SDK_COUNT ?? '100');
const tg = new Tracegate({
  flushAt: Number(process.env.SDK_FLUSH_AT ?? '50'),
  flushIntervalMs: 60_000,
  flushTimeoutMs: Number(process.env.SDK_FLUSH_TIMEOUT_MS ?? '10000'),
  retryBaseDelayMs: 100,
  onError: (e) => process.stderr.write(`error ${e.code} ${e.count}\n`),
});
for (let i = 0; i < count; i++) tg.trace('gpt-4o-mini', `exit prompt ${i}`, { response: `answer ${i}`, i });
process.on('exit', () => process.stderr.write(`stats ${JSON.stringify(tg.stats)}\n`));
