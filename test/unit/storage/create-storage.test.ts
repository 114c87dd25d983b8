// createStorage on DuckDB: where the database goes and the settings it gets. On ClickHouse (a server):
// test/storage/create-storage.test.ts.
import { expect } from 'chai';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../../config/index.ts';
import { createStorage, type Storage } from '../../../storage/index.ts';
import { emptySpan } from '../../../core/record.ts';

type Conn = { runAndReadAll(q: string): Promise<{ getRows(): unknown[][] }> };
/** A DuckDB setting as a statement sees it; `write`: inside a batch insert's turn on the connection. */
function duckSetting(s: Storage, name: string, write = false): Promise<unknown> {
  return (s as unknown as { serial<T>(f: (c: Conn) => Promise<T>, write?: boolean): Promise<T> }).serial(
    async (c) => (await c.runAndReadAll(`SELECT current_setting('${name}')`)).getRows()[0]![0],
    write,
  );
}

describe('createStorage', function () {
  it('uses DuckDB in DATA_DIR when no ClickHouse URL is configured', async function () {
    const dir = await mkdtemp(join(tmpdir(), 'tracegate-create-'));
    const s = createStorage(loadConfig({ TRACEGATE_DATA_DIR: join(dir, 'data') }));
    try {
      expect(s.kind).to.equal('duckdb');
      await s.init();
      expect((await stat(join(dir, 'data', 'tracegate.duckdb'))).isFile()).to.equal(true);
      // A checkpoint per 128 MiB of log, not DuckDB's 16 MiB (TRACEGATE_DUCKDB_CHECKPOINT_MB).
      expect(await duckSetting(s, 'checkpoint_threshold')).to.equal('128.0 MiB');
    } finally {
      await s.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("DuckDB: batch inserts run with TRACEGATE_DUCKDB_WRITE_THREADS threads, everything else with DuckDB's own setting", async function () {
    const dir = await mkdtemp(join(tmpdir(), 'tracegate-create-'));
    const s = createStorage(loadConfig({ TRACEGATE_DATA_DIR: dir, TRACEGATE_DUCKDB_WRITE_THREADS: '3' }));
    const threads = async (write: boolean) => Number(await duckSetting(s, 'threads', write));
    try {
      await s.init();
      const own = await threads(false);
      expect(own).to.be.at.least(1);
      expect(await threads(true)).to.equal(3);
      expect(await threads(false)).to.equal(own); // back for the next read
      const span = {
        ...emptySpan('ws-threads', 'native'),
        traceId: 'a'.repeat(32),
        spanId: 'b'.repeat(16),
        startTimeNs: '1700000000000000000',
        endTimeNs: '1700000000001000000',
      };
      await s.insertSpans([span]);
      expect(await s.countSpans('ws-threads')).to.equal(1);
      expect(await threads(false)).to.equal(own);
    } finally {
      await s.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
