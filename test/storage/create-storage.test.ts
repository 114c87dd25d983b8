import { expect } from 'chai';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../config/index.ts';
import { createStorage } from '../../storage/index.ts';
import { clickhouseUrl, uniqueDatabase } from '../support/shared.ts';

describe('createStorage', function () {
  it('uses DuckDB in DATA_DIR when no ClickHouse URL is configured', async function () {
    const dir = await mkdtemp(join(tmpdir(), 'tracegate-create-'));
    const s = createStorage(loadConfig({ TRACEGATE_DATA_DIR: join(dir, 'data') }));
    try {
      expect(s.kind).to.equal('duckdb');
      await s.init();
      expect((await stat(join(dir, 'data', 'tracegate.duckdb'))).isFile()).to.equal(true);
    } finally {
      await s.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('uses ClickHouse when TRACEGATE_CLICKHOUSE_URL is set', async function () {
    const db = uniqueDatabase();
    const s = createStorage(loadConfig({ TRACEGATE_CLICKHOUSE_URL: clickhouseUrl(), TRACEGATE_CLICKHOUSE_DATABASE: db }));
    try {
      expect(s.kind).to.equal('clickhouse');
      await s.init();
      expect(await s.ping()).to.equal(true);
    } finally {
      await s.close();
      await fetch(clickhouseUrl(), { method: 'POST', body: `DROP DATABASE IF EXISTS ${db}` });
    }
  });
});
