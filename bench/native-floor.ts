// The floor under native ingestion with durable acknowledgements, as its own process: the bare-Koa ceiling
// (bench/ceiling.ts) plus the least that "a 2xx means the record is durable" and "stored in ClickHouse" add.
// Each body is appended to a file and answered once an fdatasync covering it returns (group commit: bodies that
// arrive while one fdatasync runs share the next). With STORE set to a ClickHouse URL, a worker thread reads what
// was appended once a second, maps it (mappers/native.ts) and writes it with tracegate's own ClickHouse schema.
// No auth, validation, rate limit, enrichment or hand-offs between threads per request: no implementation of the
// native route can do less per trace here, so its rate against the ceiling bounds the ratio issue 2 asks for.
import { mkdtempSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import Koa from 'koa';
import getRawBody from 'raw-body';
import { mapNative } from '../mappers/native.ts';
import type { NativeTrace } from '../mappers/native-schema.ts';
import { ClickHouseStorage } from '../storage/clickhouse.ts';

const NL = Buffer.from('\n');

async function serve(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tracegate-native-floor-'));
  const path = join(dir, 'spool');
  const fh = await open(path, 'a', 0o600);
  let pending: Buffer[] = [];
  let waiters: Array<() => void> = [];
  let syncing = false;
  let acked = 0;
  let committed = Promise.resolve();
  const commit = async () => {
    syncing = true;
    while (pending.length) {
      const bufs = pending,
        done = waiters;
      pending = [];
      waiters = [];
      await fh.writev(bufs);
      await fh.datasync();
      for (const w of done) w();
    }
    syncing = false;
  };
  const durable = (b: Buffer) =>
    new Promise<void>((resolve) => {
      pending.push(b, NL);
      waiters.push(resolve);
      if (!syncing) committed = commit();
    });

  const store = process.env.STORE
    ? new Worker(new URL(import.meta.url), { workerData: { path, url: process.env.STORE } })
    : undefined;
  const stored = store ? new Promise<number>((resolve) => store.once('message', resolve)) : Promise.resolve(0);

  const app = new Koa();
  app.use(async (ctx) => {
    const raw = await getRawBody(ctx.req, { limit: 1 << 20 });
    const body = JSON.parse(raw.toString('utf8')) as { requestId?: string };
    await durable(raw);
    acked++;
    ctx.body = { trace: { traceId: body.requestId ?? 'x', status: 'completed' } };
  });
  const server = app.listen(Number(process.env.PORT), '127.0.0.1', () => process.send?.('ready'));
  // SIGTERM: the worker writes what is left; the parent hears how many bodies were acknowledged and rows written.
  process.on('SIGTERM', () =>
    server.close(
      () =>
        void (async () => {
          // A client gone mid-request (the load generator stopping) lets the server close while a commit still runs,
          // and a body read before the close may still ask for one.
          while (syncing || pending.length) await (syncing ? committed : (committed = commit()));
          store?.postMessage('stop');
          const n = await stored;
          process.send?.({ stored: n, acked });
          await fh.close();
          rmSync(dir, { recursive: true, force: true });
          process.exit(0);
        })(),
    ),
  );
}

/** Once a second: the lines appended since the last pass, mapped and inserted; on 'stop', a last pass. */
async function storeLoop(path: string, url: string): Promise<void> {
  const storage = new ClickHouseStorage({
    url,
    database: `bench_native_floor_${process.pid}`,
    username: 'default',
    password: '',
    exactRollups: true,
  });
  await storage.init();
  const fh = await open(path, 'r');
  let offset = 0,
    stopping = false;
  parentPort!.on('message', () => {
    stopping = true;
  });
  const pass = async () => {
    const { size } = await fh.stat();
    if (size <= offset) return;
    const buf = Buffer.alloc(size - offset);
    await fh.read(buf, 0, buf.length, offset);
    const end = buf.lastIndexOf(10) + 1; // whole lines only
    const now = Date.now();
    const spans = buf
      .subarray(0, end)
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => mapNative({ status: 'completed', ...JSON.parse(line) } as NativeTrace, 'floor', now));
    if (spans.length) await storage.insertSpans(spans);
    offset += end;
  };
  while (!stopping) {
    const t0 = performance.now();
    await pass();
    await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (performance.now() - t0))));
  }
  await pass();
  const n = await storage.countSpans('floor'); // what ClickHouse holds, replays collapsed
  await storage.close();
  parentPort!.postMessage(n);
}

if (isMainThread) await serve();
else await storeLoop((workerData as { path: string }).path, (workerData as { url: string }).url);
