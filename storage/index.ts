// Backend choice: ClickHouse when TRACEGATE_CLICKHOUSE_URL is set, else embedded DuckDB in DATA_DIR; either one with
// its outages classified (storage/errors.ts), so they keep their kind across the storage thread.
import { join } from 'node:path';
import type { Config } from '../config/index.ts';
import type { Storage } from '../core/ports/storage.ts';
import { ClickHouseStorage } from './clickhouse.ts';
import { classifying } from './errors.ts';
import { DuckDbStorage } from './duckdb.ts';

export function createStorage(config: Config): Storage {
  if (config.CLICKHOUSE_URL) {
    return classifying(
      new ClickHouseStorage({
        url: config.CLICKHOUSE_URL,
        database: config.CLICKHOUSE_DATABASE,
        username: config.CLICKHOUSE_USER,
        password: config.CLICKHOUSE_PASSWORD,
        exactRollups: config.CLICKHOUSE_EXACT_ROLLUPS,
        ...(config.CLICKHOUSE_CLUSTER
          ? {
              cluster: {
                name: config.CLICKHOUSE_CLUSTER,
                nodeUrls: config.CLICKHOUSE_NODES.length ? config.CLICKHOUSE_NODES : [config.CLICKHOUSE_URL],
              },
            }
          : {}),
      }),
    );
  }
  return classifying(
    new DuckDbStorage(join(config.DATA_DIR, 'tracegate.duckdb'), {
      checkpointMb: config.DUCKDB_CHECKPOINT_MB,
      writeThreads: config.DUCKDB_WRITE_THREADS,
    }),
  );
}

export type { Storage } from '../core/ports/storage.ts';
