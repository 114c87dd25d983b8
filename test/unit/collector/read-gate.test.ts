// ReadGate (collector/http/read-gate.ts) on its own, with short deadlines: what a read route answers when storage
// refuses, hangs, is merely slow, or has a bug; and that abandoned reads do not pile up.
import { expect } from 'chai';
import { DuckDBInstance } from '@duckdb/node-api';
import { MAX_ABANDONED_READS, ReadGate } from '../../../collector/http/read-gate.ts';
import {
  fromWire,
  isStorageOutage,
  isStorageOutOfMemory,
  StorageUnavailableError,
  storageUnreachable,
  toWire,
} from '../../../core/errors.ts';
import { HttpError, headersOf, statusOf } from '../../../collector/http/errors.ts';
import { classifyStorageError, storageFailure } from '../../../storage/errors.ts';
import { StorageNotReadyError } from '../../../storage/startup.ts';
import { sleep } from '../../support/process.ts';

const never = <T>() => new Promise<T>(() => {});
const timed = async (p: Promise<unknown>) => {
  const t = performance.now();
  const r = await p.then(
    (v) => ({ v, e: null as unknown }),
    (e: unknown) => ({ v: null, e }),
  );
  return { ...r, ms: performance.now() - t };
};
function expect503(e: unknown): void {
  expect(e).to.be.instanceOf(StorageUnavailableError);
  const err = e as StorageUnavailableError;
  expect(statusOf(err)).to.equal(503);
  expect(err.code).to.equal('unavailable');
  expect(headersOf(err)['Retry-After']).to.equal('5');
}

describe('ReadGate', () => {
  it('outage errors become 503 unavailable; bugs and HTTP errors pass through unchanged', async () => {
    const gate = new ReadGate(async () => true);
    for (const err of [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8123'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
      Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }),
      new Error('Timeout error.'),
      new StorageNotReadyError('storage is not reachable yet (migrations pending)'),
      // a cluster's shard down, as ClickHouse reports it
      Object.assign(new Error('Code: 279. DB::Exception: All connection tries failed. (ALL_CONNECTION_TRIES_FAILED)'), {
        name: 'ClickHouseError',
      }),
      // the same once classified by the storage thread and carried across it: by kind, whatever its text
      fromWire(toWire(classifyStorageError(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })))),
      storageUnreachable('storage worker exited (code 1)'),
    ]) {
      expect(storageFailure(err), err.message).to.equal('outage');
      const { e } = await timed(gate.run(() => Promise.reject(err)));
      expect503(e);
      expect((e as Error).cause).to.equal(err);
    }
    for (const err of [
      new TypeError('x is not a function'),
      new Error('Code: 62. DB::Exception: Syntax error'),
      Object.assign(new Error('Code: 62. DB::Exception: Syntax error: failed at position 1'), {
        name: 'ClickHouseError',
      }),
      new HttpError(404, 'not_found', 'no'),
      new RangeError('Timeout error.'),
      // message-only errors are not taken for outages: outages are told by code where they happen, by kind after
      new Error('read ECONNRESET'),
    ]) {
      expect(storageFailure(err), err.message).to.not.equal('outage');
      expect(isStorageOutage(classifyStorageError(err)), err.message).to.equal(false);
      const { e } = await timed(gate.run(() => Promise.reject(err)));
      expect(e).to.equal(err);
    }
    const thrown = new TypeError('sync');
    expect(
      (
        await timed(
          gate.run(() => {
            throw thrown;
          }),
        )
      ).e,
    ).to.equal(thrown);
  });

  it('a read storage had no memory for is 503 too, and storage is not taken for down (the next read goes ahead)', async () => {
    let pings = 0;
    const gate = new ReadGate(async () => {
      pings++;
      return false;
    });
    for (const err of [
      // as they read once they crossed the storage thread (name and message)
      new Error('Out of Memory Error: could not allocate block of size 256.0 KiB (204.5 MiB/256.0 MiB used)'),
      Object.assign(
        new Error(
          'Code: 241. DB::Exception: Memory limit (for query) exceeded: would use 9.31 GiB. (MEMORY_LIMIT_EXCEEDED)',
        ),
        { name: 'ClickHouseError' },
      ),
      new Error('Code: 241, e.displayText() = DB::Exception: Memory limit (for query) exceeded: would use 1.00 GiB'),
    ]) {
      expect(isStorageOutOfMemory(classifyStorageError(err)), err.message).to.equal(true);
      expect(isStorageOutage(classifyStorageError(err)), err.message).to.equal(false);
      const { e } = await timed(gate.run(() => Promise.reject(err)));
      expect503(e);
      expect((e as Error).message).to.equal('storage has not enough memory for this read now; retry later');
      expect((e as Error).cause).to.equal(err);
      expect((await timed(gate.run(() => Promise.resolve(7)))).v).to.equal(7);
    }
    // DuckDB's own, from the library
    const db = await DuckDBInstance.create(':memory:', { memory_limit: '10MB' });
    const c = await db.connect();
    const oom = await c.run('SELECT list(range) FROM range(10000000)').then(
      () => null,
      (e: unknown) => e,
    );
    c.closeSync();
    db.closeSync();
    expect(isStorageOutOfMemory(classifyStorageError(oom)), String(oom)).to.equal(true);
    expect503((await timed(gate.run(() => Promise.reject(oom)))).e);
    expect(pings).to.equal(0);
    for (const err of [
      new TypeError('Out of Memory Error'),
      new Error('Code: 2410. DB::Exception: x'),
      new HttpError(500, 'internal', 'Out of Memory Error'),
    ]) {
      expect(isStorageOutOfMemory(classifyStorageError(err)), err.message).to.equal(false);
    }
  });

  it('a hung storage: the first read is answered 503 after the liveness check, the next ones at once without a new read', async () => {
    let pings = 0;
    const gate = new ReadGate(
      () => {
        pings++;
        return never<boolean>();
      },
      { deadlineMs: 5_000, livenessAfterMs: 100, pingDeadlineMs: 100 },
    );
    const first = await timed(gate.run(() => never()));
    expect503(first.e);
    expect(first.ms).to.be.within(190, 1_000);
    let reads = 0;
    const next = await timed(
      gate.run(() => {
        reads++;
        return Promise.resolve(1);
      }),
    );
    expect503(next.e);
    expect(next.ms).to.be.below(50);
    expect(reads).to.equal(0);
    expect(pings).to.equal(1); // one ping in flight however many ask
    expect(gate.pending).to.equal(1);
  });

  it('a slow read on a storage that answers pings gets the whole deadline; past it, 503 and the read is counted until it settles', async () => {
    const gate = new ReadGate(async () => true, { deadlineMs: 400, livenessAfterMs: 50, pingDeadlineMs: 100 });
    const slow = await timed(gate.run(() => sleep(200).then(() => 'rows')));
    expect(slow.e).to.equal(null);
    expect(slow.v).to.equal('rows');
    let finish: () => void = () => {};
    const late = await timed(
      gate.run(
        () =>
          new Promise<void>((r) => {
            finish = r;
          }),
      ),
    );
    expect503(late.e);
    expect(late.ms).to.be.within(390, 1_000);
    expect(gate.pending).to.equal(1);
    finish();
    await sleep(10);
    expect(gate.pending).to.equal(0);
    expect((await timed(gate.run(async () => 'again'))).v).to.equal('again'); // ping answers: reads go on
  });

  it('with more reads running than a ping can fairly answer for, slow reads still get the whole deadline', async () => {
    const gate = new ReadGate(async () => true, { deadlineMs: 600, livenessAfterMs: 50, pingDeadlineMs: 100 });
    const reads = await Promise.all(
      Array.from({ length: 10 }, () => timed(gate.run(() => sleep(300).then(() => 'rows')))),
    );
    for (const r of reads) expect(r.v).to.equal('rows');
  });

  it('without a liveness check (DuckDB), only the deadline applies', async () => {
    let pings = 0;
    const gate = new ReadGate(
      async () => {
        pings++;
        return true;
      },
      { deadlineMs: 300 },
    );
    const slow = await timed(gate.run(() => sleep(200).then(() => 1)));
    expect(slow.v).to.equal(1);
    expect(pings).to.equal(0);
    expect503((await timed(gate.run(() => never()))).e);
  });

  it(`with ${MAX_ABANDONED_READS} abandoned reads still running, further reads are refused at once`, async () => {
    const gate = new ReadGate(async () => true, { deadlineMs: 20 });
    const finishers: Array<() => void> = [];
    await Promise.all(
      Array.from({ length: MAX_ABANDONED_READS }, () =>
        timed(gate.run(() => new Promise<void>((r) => finishers.push(r)))),
      ),
    );
    expect(gate.pending).to.equal(MAX_ABANDONED_READS);
    let reads = 0;
    const refused = await timed(
      gate.run(async () => {
        reads++;
      }),
    );
    expect503(refused.e);
    expect(refused.ms).to.be.below(15);
    expect(reads).to.equal(0);
    for (const f of finishers) f();
    await sleep(10);
    expect(gate.pending).to.equal(0);
    expect((await timed(gate.run(async () => 'ok'))).v).to.equal('ok');
  });
});
