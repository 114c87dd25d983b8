// Crash-test child: ingests records through a Pipeline and prints "acked <i>" as each ingest
// resolves; the parent SIGKILLs it mid-stream. argv: dataDir storage total concurrency
//   storage = "down"          inserts always fail (everything stays spooled)
//   storage = "jsonl:<file>"  inserts append rows to a file (flushes race with the kill)
//   storage = "duckdb:<dir>"  DuckDbStorage with its database file in <dir>
import { appendFileSync } from 'node:fs';
import { Pipeline } from '../../pipeline/pipeline.ts';
import type { SpanRecord } from '../../core/record.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { MapStorage, openDuckDb, span, testConfig } from './spool.ts';

const [dataDir, mode, totalArg, concArg] = process.argv.slice(2) as [string, string, string, string];
const total = Number(totalArg);
const concurrency = Number(concArg);

async function makeStorage(): Promise<Pick<Storage, 'insertSpans' | 'insertEnrichment' | 'ping'>> {
  if (mode === 'down') {
    const s = new MapStorage();
    s.fail = true;
    return s;
  }
  if (mode.startsWith('jsonl:')) {
    const file = mode.slice(6);
    const s = new MapStorage();
    s.insertSpans = async (rows: SpanRecord[]) => {
      appendFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    };
    return s;
  }
  if (mode.startsWith('duckdb:')) {
    return openDuckDb(mode.slice(7));
  }
  throw new Error(`unknown storage mode ${mode}`);
}

const storage = await makeStorage();
const pipeline = new Pipeline({
  config: testConfig(dataDir, { FLUSH_INTERVAL_MS: '15' }),
  storage,
  logger: {
    info() {},
    warn() {},
    error: (o: object, m?: string) => process.stderr.write(`${m} ${JSON.stringify(o)}\n`),
  },
});
await pipeline.start();
let next = 0;
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (next < total) {
      const i = next++;
      await pipeline.ingest([span(i, 512)]);
      process.stdout.write(`acked ${i}\n`);
    }
  }),
);
process.stdout.write('done\n');
setInterval(() => {}, 1000); // stay alive until killed
