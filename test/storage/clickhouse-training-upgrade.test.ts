// A ClickHouse store at schema v15 (training_spans, which named calls only) upgraded to v16 (training_calls, which
// carries their text): the calls stored before stay exportable at their stored version, the superseded table and
// view go, a second collector running v16 again adds no line, and calls stored after are indexed by the new view.
import { expect } from 'chai';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import type { TrainingKey, TrainingPage } from '../../core/ports/storage.ts';
import { emptySpan, isTrainable, type SpanRecord } from '../../core/record.ts';
import { CLICKHOUSE_MIGRATIONS } from '../../storage/clickhouse-migrations.ts';
import { ClickHouseStorage, runStatement } from '../../storage/clickhouse.ts';
import { sharedClickHouse, uniqueDatabase } from '../support/shared.ts';
import { chdbConnection } from './harness.ts';

const T0 = 1_795_900_000_000_000_000n;

function call(traceId: string, response: string, at: number): SpanRecord {
  const r: SpanRecord = {
    ...emptySpan('ws', 'native'),
    traceId,
    spanId: `s-${traceId}`,
    name: 'call',
    kind: 'llm',
    status: 'completed',
    startTimeNs: T0.toString(),
    endTimeNs: (T0 + 1_000_000n).toString(),
    model: 'gpt-4o-mini',
    prompt: `prompt of ${traceId}`,
    response,
    ingestedAtMs: at,
  };
  r.trainable = isTrainable(r);
  return r;
}

/** Every exported (trace id, response), two index rows a page. */
async function exported(s: ClickHouseStorage): Promise<string[][]> {
  const rows: TrainingPage['rows'] = [];
  let after: TrainingKey | undefined;
  for (;;) {
    const page = await s.trainingPage('ws', {
      filter: {},
      limit: 2,
      votes: false,
      tools: 0,
      ...(after ? { after } : {}),
    });
    rows.push(...page.rows);
    if (!page.more || !page.last) break;
    after = page.last;
  }
  return rows.map((r) => [r.span.traceId, r.span.response]).sort();
}

const SERVERS: ReadonlyArray<
  [string, () => Promise<{ client: ClickHouseClient; store: (db: string) => ClickHouseStorage }>]
> = [
  [
    'ClickHouse 18.16',
    async () => {
      const url = await sharedClickHouse();
      return {
        client: createClient({ url, log: { level: ClickHouseLogLevel.OFF } }),
        store: (database) => new ClickHouseStorage({ url, database }),
      };
    },
  ],
  [
    'ClickHouse 26 (chDB)',
    async () => ({
      client: createClient({
        url: 'http://chdb.invalid',
        connection: chdbConnection() as never,
        log: { level: ClickHouseLogLevel.OFF },
      }),
      store: (database) =>
        new ClickHouseStorage({ url: 'http://chdb.invalid', database, connection: chdbConnection() as never }),
    }),
  ],
];

for (const [name, open] of SERVERS) {
  describe(`training index upgrade v15 → v16 (${name})`, function () {
    this.timeout(120_000);

    it('keeps the calls stored before exportable at their stored version, once', async () => {
      const { client, store } = await open();
      const db = uniqueDatabase();
      try {
        await client.command({ query: `CREATE DATABASE ${db}` });
        await client.command({
          query: `CREATE TABLE ${db}.schema_migrations (version UInt32, applied_at DateTime) ENGINE = ReplacingMergeTree() ORDER BY version`,
        });
        for (const m of CLICKHOUSE_MIGRATIONS.filter((x) => x.version <= 15)) {
          for (const st of m.statements(db)) await runStatement(client, st);
          await client.command({ query: `INSERT INTO ${db}.schema_migrations VALUES (${m.version}, now())` });
        }
        const old = store(db); // a collector at v15 writing (no init, which would migrate)
        await old.insertSpans([call('a', 'answer a', 1_000), call('b', 'answer b', 1_000)]);
        await old.insertSpans([call('a', 'better a', 2_000)]); // the v15 index keeps both versions of a
        await old.close();

        const s = store(db);
        await s.init(); // v16
        expect(await exported(s)).to.deep.equal([
          ['a', 'better a'],
          ['b', 'answer b'],
        ]);
        const tables = await client.query({
          query: `SELECT name FROM system.tables WHERE database = '${db}' AND name LIKE 'training%' ORDER BY name`,
          format: 'JSONEachRow',
        });
        expect((await tables.json<{ name: string }>()).map((t) => t.name)).to.deep.equal([
          'training_calls',
          'training_calls_mv',
        ]);
        // A second collector migrating at once runs v16 again: rows collapse, no line twice.
        for (const st of CLICKHOUSE_MIGRATIONS.find((m) => m.version === 16)!.statements(db))
          await runStatement(client, st);
        await s.insertSpans([call('c', 'answer c', 3_000), call('b', 'better b', 3_000)]);
        expect(await exported(s)).to.deep.equal([
          ['a', 'better a'],
          ['b', 'better b'],
          ['c', 'answer c'],
        ]);
        await s.close();
      } finally {
        await client.command({ query: `DROP DATABASE IF EXISTS ${db}` });
        await client.close();
      }
    });
  });
}
