// createStorage on ClickHouse (the shared test server). On DuckDB alone: test/unit/storage/create-storage.test.ts.
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../config/index.ts';
import { createStorage } from '../../storage/index.ts';
import { clickhouseUrl, uniqueDatabase, useSharedClickHouse } from '../support/shared.ts';

describe('createStorage', function () {
  useSharedClickHouse();

  it('uses ClickHouse when TRACEGATE_CLICKHOUSE_URL is set', async function () {
    const db = uniqueDatabase();
    const s = createStorage(
      loadConfig({ TRACEGATE_CLICKHOUSE_URL: clickhouseUrl(), TRACEGATE_CLICKHOUSE_DATABASE: db }),
    );
    try {
      expect(s.kind).to.equal('clickhouse');
      await s.init();
      expect(await s.ping()).to.equal(true);
    } finally {
      await s.close();
      await fetch(clickhouseUrl(), { method: 'POST', body: `DROP DATABASE IF EXISTS ${db}` });
    }
  });

  it('refuses a store a newer tracegate migrated (no silent downgrade), on both backends', async function () {
    const dir = await mkdtemp(join(tmpdir(), 'tracegate-newer-'));
    const db = uniqueDatabase();
    try {
      for (const env of [
        { TRACEGATE_DATA_DIR: join(dir, 'data') },
        {
          TRACEGATE_DATA_DIR: join(dir, 'data'),
          TRACEGATE_CLICKHOUSE_URL: clickhouseUrl(),
          TRACEGATE_CLICKHOUSE_DATABASE: db,
        },
      ]) {
        const s = createStorage(loadConfig(env));
        await s.init();
        const insert =
          s.kind === 'clickhouse'
            ? `INSERT INTO ${db}.schema_migrations VALUES (999, now())`
            : 'INSERT INTO schema_migrations VALUES (999, now())';
        if (s.kind === 'clickhouse') await fetch(clickhouseUrl(), { method: 'POST', body: insert });
        else
          await (
            s as unknown as { serial<T>(f: (c: { run(q: string): Promise<unknown> }) => Promise<T>): Promise<T> }
          ).serial((c) => c.run(insert));
        await s.close();
        const again = createStorage(loadConfig(env));
        try {
          let err: unknown = null;
          await again.init().catch((e: unknown) => {
            err = e;
          });
          expect(err, s.kind).to.be.instanceOf(Error);
          expect((err as Error).name).to.equal('StorageConfigError');
          expect((err as Error).message).to.match(
            /has schema version 999, newer than this tracegate knows \(\d+\).*downgrades are not supported/,
          );
        } finally {
          await again.close();
        }
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
      await fetch(clickhouseUrl(), { method: 'POST', body: `DROP DATABASE IF EXISTS ${db}` });
    }
  });
});
