// WorkerRpc: a message or answer that cannot cross the thread boundary fails that call, never hangs it,
// and the worker keeps serving.
import { expect } from 'chai';
import { WorkerRpc } from '../../collector/worker-rpc.ts';

describe('WorkerRpc', () => {
  const rpc = new WorkerRpc(new URL('./echo-worker.ts', import.meta.url), null, 'echo');
  after(() => rpc.close());

  it('answers calls', async () => {
    expect(await rpc.call({ op: 'echo', value: { a: [1, 2] } })).to.deep.equal({ a: [1, 2] });
  });

  it('a request that cannot be posted fails at once; the next call works', async () => {
    let err: unknown;
    try { await rpc.call({ op: 'echo', value: () => 1 }); } catch (e) { err = e; }
    expect(err).to.be.instanceOf(Error);
    expect((err as Error).name).to.equal('DataCloneError');
    expect(await rpc.call({ op: 'echo', value: 2 })).to.equal(2);
  });

  it('an answer that cannot be posted back fails that call instead of hanging it', async () => {
    let err: unknown;
    try { await rpc.call({ op: 'clone-fail' }); } catch (e) { err = e; }
    expect(err).to.be.instanceOf(Error);
    expect(String((err as Error).message)).to.match(/could not be cloned/);
    expect(await rpc.call({ op: 'echo', value: 3 })).to.equal(3);
  });

  it('caps the worker thread\'s young generation when asked (TRACEGATE_WORKER_YOUNG_GEN_MB)', async () => {
    const capped = new WorkerRpc(new URL('./echo-worker.ts', import.meta.url), null, 'echo', 32);
    try {
      expect(await capped.call<{ maxYoungGenerationSizeMb: number }>({ op: 'limits' })).to.include({ maxYoungGenerationSizeMb: 32 });
    } finally {
      await capped.close();
    }
  });
});
