// The fake Responses provider as its own process, so the load generator and it do not share an event loop.
import { startFakeResponses } from '../test/support/fake-responses.ts';

const fake = await startFakeResponses({
  port: Number(process.env.PORT ?? 0),
  delayMs: Number(process.env.DELAY_MS ?? 20),
  record: false,
});
process.send?.({ url: fake.url });
process.on('SIGTERM', () => void fake.close().then(() => process.exit(0)));
