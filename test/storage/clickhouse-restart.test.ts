// ClickHouse 18.16 restarted under a store: rollups written before the restart must still read and merge.
// Up to schema v6 the usage cost was a sumKahan state, which 18.16 cannot read back after a restart: every
// usage query and every merge of usage_hourly failed. v7 moves it to a sum state and rebuilds the cost.
import { expect } from 'chai';
import { emptySpan, type SpanRecord } from '../../core/record.ts';
import { CLICKHOUSE_MIGRATIONS } from '../../storage/clickhouse-migrations.ts';
import { ClickHouseStorage, runStatement } from '../../storage/clickhouse.ts';
import { ClickHouseLogLevel, createClient } from '@clickhouse/client';
import { startClickHouse, type TestClickHouse } from '../support/clickhouse.ts';

const T0 = 1_763_787_000_000;

function call(ws: string, id: string, model: string, costUsd: number, over: Partial<SpanRecord> = {}): SpanRecord {
  const ns = (BigInt(T0) * 1_000_000n).toString();
  return {
    ...emptySpan(ws, 'native'),
    traceId: `t-${id}`,
    spanId: 'a1b2c3d4e5f60718',
    kind: 'llm',
    name: 'chat',
    model,
    startTimeNs: ns,
    endTimeNs: ns,
    durationMs: 10,
    promptTokens: 2,
    totalTokens: 2,
    costUsd,
    ingestedAtMs: T0,
    ...over,
  };
}

describe('ClickHouse restarted under a store', function () {
  this.timeout(240_000);
  let ch: TestClickHouse;
  before(async function () {
    if (process.env.TRACEGATE_TEST_CLICKHOUSE_URL) this.skip(); // needs a server of its own to restart
    ch = await startClickHouse();
  });
  after(async () => {
    await ch?.dispose();
  });

  it('a store at schema v6 keeps its usage cost through the v7 migration; after restarts usage reads and merges', async () => {
    const db = 'restart_v6';
    const sql = createClient({ url: ch.url, log: { level: ClickHouseLogLevel.OFF } });
    await sql.command({ query: `CREATE DATABASE ${db}` });
    await sql.command({
      query: `CREATE TABLE ${db}.schema_migrations (version UInt32, applied_at DateTime) ENGINE = ReplacingMergeTree() ORDER BY version`,
    });
    for (const m of CLICKHOUSE_MIGRATIONS.filter((x) => x.version <= 6)) {
      for (const st of m.statements(db)) await runStatement(sql, st);
      await sql.command({ query: `INSERT INTO ${db}.schema_migrations VALUES (${m.version}, now())` });
    }
    // This version's writer stands in for a v6 collector: it indexes traces in v10's table.
    await runStatement(sql, CLICKHOUSE_MIGRATIONS.find((m) => m.version === 10)!.statements(db)[0]!);
    const store = () => new ClickHouseStorage({ url: ch.url, database: db, username: 'default', password: '' });
    const old = store(); // the tables exist: a collector at v6 writing (no init, which would migrate)
    await old.insertSpans([call('w', '1', 'a', 0.25), call('w', '2', 'a', 0.5), call('w', '3', 'b', 1)]);
    // a changed version: the view adds it, a correction takes the old one out
    await old.insertSpans([call('w', '2', 'a', 2, { ingestedAtMs: T0 + 1 })]);
    await old.close();
    const usage = async (s: ClickHouseStorage) =>
      (await s.usage('w', { groupBy: 'model', bucket: 'hour' })).map((r) => [r.key, r.requests, r.costUsd]);

    await ch.restart();
    const s = store();
    await s.init(); // v7
    const expected = [
      ['a', 2, 2.25],
      ['b', 1, 1],
    ];
    expect(await usage(s)).to.deep.equal(expected);
    await s.insertSpans([call('w', '4', 'b', 0.125)]);
    await ch.restart();
    expect(await usage(s)).to.deep.equal([
      ['a', 2, 2.25],
      ['b', 2, 1.125],
    ]);
    await sql.command({ query: `OPTIMIZE TABLE ${db}.usage_hourly FINAL` }); // merges read the states back too
    expect(await usage(s)).to.deep.equal([
      ['a', 2, 2.25],
      ['b', 2, 1.125],
    ]);
    // the rebuild adds nothing when run again (a second collector migrating at once)
    for (const st of CLICKHOUSE_MIGRATIONS.find((m) => m.version === 7)!.statements(db)) await runStatement(sql, st);
    expect(await usage(s)).to.deep.equal([
      ['a', 2, 2.25],
      ['b', 2, 1.125],
    ]);
    await s.close();
    await sql.close();
  });
});
