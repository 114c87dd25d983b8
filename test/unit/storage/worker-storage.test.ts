// WorkerStorage specifics (the contract suite covers the interface): errors cross the thread intact,
// and a worker that dies is replaced on the next call, with the data still there.
import { expect } from 'chai';
import { statusOf } from '../../../collector/http/errors.ts';
import { TracegateError } from '../../../core/errors.ts';
import { emptySpan } from '../../../core/record.ts';
import type { WorkerStorage } from '../../../storage/worker-storage.ts';
import { workerFactory, type StoreHarness } from '../../support/stores.ts';

describe('storage on a worker thread', () => {
  let h: StoreHarness;
  beforeEach(async () => {
    h = await workerFactory();
  });
  afterEach(async () => {
    await h.destroy();
  });

  it('keeps an HTTP error (status, code) thrown by the backend', async () => {
    const err = await h.storage.listTraces('ws', { limit: 10, cursor: 'not-a-cursor' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(TracegateError);
    expect(statusOf(err as TracegateError)).to.equal(400);
  });

  it('replaces a worker that died and re-initializes it; stored data survives', async () => {
    const span = {
      ...emptySpan('ws', 'native'),
      traceId: 't1',
      spanId: 's1',
      startTimeNs: '1000000',
      endTimeNs: '2000000',
    };
    await h.storage.insertSpans([span]);
    const inner = h.storage as unknown as { rpc: { worker: { terminate(): Promise<number> } } };
    await inner.rpc.worker.terminate();
    await new Promise((r) => setTimeout(r, 20)); // let the exit event reach the client
    expect(await h.storage.countSpans('ws')).to.equal(1);
    expect((await h.storage.getTrace('ws', 't1')).map((s) => s.spanId)).to.deep.equal(['s1']);
    expect((h.storage as WorkerStorage).kind).to.equal('duckdb');
  });
});
