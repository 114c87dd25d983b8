// WorkerRpc: a message or answer that cannot cross the thread boundary fails that call, never hangs it,
// and the worker keeps serving.
import { expect } from 'chai';
import { WorkerRpc } from '../../../platform/worker-rpc.ts';

describe('WorkerRpc', () => {
  const rpc = new WorkerRpc(new URL('./echo-worker.ts', import.meta.url), null, 'echo');
  after(() => rpc.close());

  it('answers calls', async () => {
    expect(await rpc.call({ op: 'echo', value: { a: [1, 2] } })).to.deep.equal({ a: [1, 2] });
  });

  it('a request that cannot be posted fails at once; the next call works', async () => {
    let err: unknown;
    try {
      await rpc.call({ op: 'echo', value: () => 1 });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(Error);
    expect((err as Error).name).to.equal('DataCloneError');
    expect(await rpc.call({ op: 'echo', value: 2 })).to.equal(2);
  });

  it('an answer that cannot be posted back fails that call instead of hanging it', async () => {
    let err: unknown;
    try {
      await rpc.call({ op: 'clone-fail' });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(Error);
    expect(String((err as Error).message)).to.match(/could not be cloned/);
    expect(await rpc.call({ op: 'echo', value: 3 })).to.equal(3);
  });

  it("an error keeps its code across the thread (a system error's, or ClickHouse's number), which /readyz reports", async () => {
    for (const code of ['ECONNREFUSED', '241']) {
      const err = await rpc.call({ op: 'fail', value: { code } }).then(
        () => null,
        (e: unknown) => e as Error & { code?: string },
      );
      expect(err).to.be.instanceOf(Error);
      expect([err!.message, err!.code]).to.deep.equal(['connect ECONNREFUSED 127.0.0.1:8123', code]);
    }
    const plain = await rpc.call({ op: 'fail', value: {} }).then(
      () => null,
      (e: unknown) => e as Error & { code?: string },
    );
    expect(plain!.code).to.equal(undefined);
  });

  it("caps the worker thread's young generation when asked (TRACEGATE_WORKER_YOUNG_GEN_MB)", async () => {
    const capped = new WorkerRpc(new URL('./echo-worker.ts', import.meta.url), null, 'echo', 32);
    try {
      expect(await capped.call<{ maxYoungGenerationSizeMb: number }>({ op: 'limits' })).to.include({
        maxYoungGenerationSizeMb: 32,
      });
    } finally {
      await capped.close();
    }
  });
});
