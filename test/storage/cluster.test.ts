// ClickHouse as a cluster (TRACEGATE_CLICKHOUSE_CLUSTER): two 18.16 shards without ZooKeeper. The contract
// suites run on it too (harness.ts); this file checks what only a cluster has.
import { expect } from 'chai';
import { loadConfig } from '../../config/index.ts';
import { emptySpan, type SpanRecord } from '../../core/record.ts';
import { ClickHouseStorage } from '../../storage/clickhouse.ts';
import { createStorage } from '../../storage/index.ts';
import { storeIdentity } from '../../processors/chain-heads.ts';
import { clickhouseUrl, clusterTests, sharedCluster, uniqueDatabase, useSharedClickHouse } from '../support/shared.ts';
import { post, get, flushed, startTestServer } from '../support/server.ts';
import type { TestClickHouseCluster } from '../support/clickhouse.ts';

const sql = async (url: string, query: string): Promise<string> => {
  const res = await fetch(url, { method: 'POST', body: query });
  const text = await res.text();
  if (!res.ok) throw new Error(text);
  return text.trim();
};

const span = (ws: string, trace: string, id: string, over: Partial<SpanRecord> = {}): SpanRecord => ({
  ...emptySpan(ws, 'native'),
  traceId: trace,
  spanId: id,
  kind: 'llm',
  model: 'gpt-4o-mini',
  name: 'chat',
  startTimeNs: '1763800000000000000',
  endTimeNs: '1763800001000000000',
  durationMs: 1000,
  ingestedAtMs: 10,
  ...over,
});

(clusterTests ? describe : describe.skip)('ClickHouse cluster (2 shards)', function () {
  this.timeout(120_000);
  useSharedClickHouse(); // the configuration case names it
  let c: TestClickHouseCluster;
  const dbs: string[] = [];
  const open = (database: string, nodeUrls?: string[], name?: string) => {
    dbs.push(database);
    return new ClickHouseStorage({
      url: c.nodes[0]!.url,
      database,
      cluster: { name: name ?? c.name, nodeUrls: nodeUrls ?? c.nodes.map((n) => n.url) },
    });
  };
  /** Start a store on the cluster (migrations, Distributed tables) and close it again. */
  const initOnce = async (database: string, nodeUrls?: string[]) => {
    const s = open(database, nodeUrls);
    await s.init();
    await s.close();
  };
  /** init() must refuse with a message matching `re`. */
  const refuses = async (s: ClickHouseStorage, re: RegExp) => {
    await s.init().then(
      () => expect.fail('started'),
      (e: Error) => expect(e.message).to.match(re),
    );
    await s.close();
  };
  before(async () => {
    c = await sharedCluster();
  });
  after(async () => {
    for (const n of c.nodes)
      for (const db of dbs) for (const d of [db, `${db}_local`]) await sql(n.url, `DROP DATABASE IF EXISTS ${d}`);
  });

  it('spreads traces over both shards, keeps each trace on one, and collapses replays', async () => {
    const s = open(uniqueDatabase());
    await s.init();
    try {
      const spans = Array.from({ length: 60 }, (_, i) => span('ws-c', `trace-${i % 20}`, `s${i}`));
      await s.insertSpans(spans);
      await s.insertSpans(spans.slice(0, 30).map((x) => ({ ...x, ingestedAtMs: 11, name: 'replayed' })));
      const db = (s as unknown as { db: string }).db;
      const perShard = await Promise.all(
        c.nodes.map(async (n) =>
          (await sql(n.url, `SELECT trace_id FROM ${db}_local.spans FINAL GROUP BY trace_id FORMAT TSV`))
            .split('\n')
            .filter(Boolean),
        ),
      );
      expect(perShard[0]!.length).to.be.greaterThan(0);
      expect(perShard[1]!.length).to.be.greaterThan(0);
      expect(perShard[0]!.filter((t) => perShard[1]!.includes(t))).to.deep.equal([]); // no trace split
      expect(await s.countSpans('ws-c')).to.equal(60);
      const t = await s.getTrace('ws-c', 'trace-0');
      expect(t.map((x) => [x.spanId, x.name])).to.deep.equal([
        ['s0', 'replayed'],
        ['s20', 'replayed'],
        ['s40', 'chat'],
      ]);
      // Any node answers for the whole cluster.
      const other = new ClickHouseStorage({
        url: c.nodes[1]!.url,
        database: db,
        cluster: { name: c.name, nodeUrls: c.nodes.map((n) => n.url) },
      });
      try {
        expect(await other.countSpans('ws-c')).to.equal(60);
        expect((await other.usage('ws-c', { groupBy: 'model', bucket: 'hour' })).map((r) => r.requests)).to.deep.equal([
          60,
        ]);
      } finally {
        await other.close();
      }
    } finally {
      await s.close();
    }
  });

  it('a column a later migration adds on the shards reaches the Distributed table at the next start', async () => {
    const db = uniqueDatabase();
    await initOnce(db);
    for (const n of c.nodes) await sql(n.url, `ALTER TABLE ${db}_local.alerts ADD COLUMN note String DEFAULT 'n/a'`);
    await initOnce(db);
    expect(
      await sql(
        c.nodes[1]!.url,
        `SELECT type, default_kind FROM system.columns WHERE database = '${db}' AND table = 'alerts' AND name = 'note' FORMAT TSV`,
      ),
    ).to.equal('String\tDEFAULT');
    expect(
      await sql(
        c.nodes[0]!.url,
        `SELECT engine FROM system.tables WHERE database = '${db}' AND name = 'alerts' FORMAT TSV`,
      ),
    ).to.equal('Distributed');
  });

  it('a table a migration dropped on the shards loses its Distributed table at the next start (v10: trace_index)', async () => {
    const db = uniqueDatabase();
    await initOnce(db);
    // trace_index as a v9 start left it: a Distributed table over the shards' table, which v10 dropped
    for (const n of c.nodes)
      await sql(
        n.url,
        `CREATE TABLE ${db}.trace_index (workspace_id String, trace_id String, start_date Date) ENGINE = Distributed('${c.name}', '${db}_local', 'trace_index', cityHash64(workspace_id, trace_id))`,
      );
    await initOnce(db);
    for (const n of c.nodes)
      expect(
        await sql(
          n.url,
          `SELECT name FROM system.tables WHERE database IN ('${db}', '${db}_local') AND name IN ('trace_index', 'trace_days') FORMAT TSV`,
        ),
      ).to.equal('trace_days\ntrace_days');
  });

  it('refuses to start, naming the problem: an unknown cluster, a node left out, single-server tables', async () => {
    await refuses(
      open(uniqueDatabase(), undefined, 'no_such_cluster'),
      /cluster "no_such_cluster" is not in the server's remote_servers/,
    );
    await refuses(
      open(uniqueDatabase(), [c.nodes[0]!.url]),
      /a shard has no \w+_local tables; list every node in TRACEGATE_CLICKHOUSE_NODES/,
    );
    const db = uniqueDatabase();
    const single = new ClickHouseStorage({ url: c.nodes[0]!.url, database: db });
    await single.init(); // a single-server schema on node 0
    await single.close();
    await refuses(open(db), /is a \w*MergeTree table: in cluster mode/);
    await refuses(
      open(uniqueDatabase(), undefined, `${c.name}_replicated`),
      /has replicas: tracegate's tables are not Replicated/,
    );
  });

  it('refuses to change the Distributed tables while a shard lags behind the schema (a node missing from _NODES)', async () => {
    const db = uniqueDatabase();
    await initOnce(db);
    // Node 1 as if it had never run the migrations it has: the start through node 0 alone must not go ahead.
    await sql(c.nodes[1]!.url, `DROP TABLE ${db}_local.schema_migrations`);
    await sql(
      c.nodes[1]!.url,
      `CREATE TABLE ${db}_local.schema_migrations (version UInt32, applied_at DateTime) ENGINE = ReplacingMergeTree() ORDER BY version`,
    );
    await refuses(open(db, [c.nodes[0]!.url]), /1 of 2 shards lack schema version \d+ in \w+_local; list every node/);
    await initOnce(db); // with every node listed the migrations (idempotent) run there again
  });

  it('a collector started on a misconfigured cluster stops with the message instead of retrying as if it were down', async () => {
    const db = uniqueDatabase();
    dbs.push(db);
    const extra = {
      TRACEGATE_CLICKHOUSE_URL: c.nodes[0]!.url,
      TRACEGATE_CLICKHOUSE_DATABASE: db,
      TRACEGATE_CLICKHOUSE_CLUSTER: 'no_such_cluster',
    };
    await startTestServer('clickhouse', extra).then(
      async (s) => {
        await s.close();
        expect.fail('started');
      },
      (e: Error) => expect(e.message).to.match(/cluster "no_such_cluster" is not in the server's remote_servers/),
    );
  });

  it('is configured with TRACEGATE_CLICKHOUSE_CLUSTER and _NODES, and serves the routes', async () => {
    const db = uniqueDatabase();
    dbs.push(db);
    const extra = {
      TRACEGATE_CLICKHOUSE_URL: c.nodes[1]!.url,
      TRACEGATE_CLICKHOUSE_DATABASE: db,
      TRACEGATE_CLICKHOUSE_CLUSTER: c.name,
      TRACEGATE_CLICKHOUSE_NODES: c.nodes.map((n) => n.url).join(','),
    };
    const s = await startTestServer('clickhouse', extra);
    try {
      const { key } = await s.key('ws-route');
      const auth = { authorization: `Bearer ${key}` };
      for (let i = 0; i < 8; i++) {
        const r = await post(
          `${s.url}/api/traces`,
          { requestId: `req-${i}`, model: 'gpt-4o-mini', prompt: 'hi', response: 'hello', status: 'completed' },
          auth,
        );
        expect(r.status, r.text).to.equal(200);
      }
      await flushed(s);
      expect((await get(`${s.url}/api/traces/req-3`, auth)).json.trace.spans).to.have.length(1);
      expect((await get(`${s.url}/api/traces?limit=50`, auth)).json.items).to.have.length(8);
      expect((await get(`${s.url}/api/traces/req-3/verification`, auth)).json).to.include({ ok: true });
      const rows = await Promise.all(c.nodes.map((n) => sql(n.url, `SELECT count() FROM ${db}_local.spans`)));
      expect(rows.map(Number).reduce((a, b) => a + b)).to.equal(8);
    } finally {
      await s.close();
    }
  });

  it('configuration: a cluster needs a URL, nodes need a cluster, nodes must be http(s) URLs', () => {
    expect(() => loadConfig({ TRACEGATE_CLICKHOUSE_CLUSTER: 'x' })).to.throw(
      /TRACEGATE_CLICKHOUSE_CLUSTER \/ _NODES: need TRACEGATE_CLICKHOUSE_URL/,
    );
    expect(() =>
      loadConfig({ TRACEGATE_CLICKHOUSE_URL: clickhouseUrl(), TRACEGATE_CLICKHOUSE_NODES: clickhouseUrl() }),
    ).to.throw(/TRACEGATE_CLICKHOUSE_NODES: only with TRACEGATE_CLICKHOUSE_CLUSTER/);
    expect(() =>
      loadConfig({
        TRACEGATE_CLICKHOUSE_URL: clickhouseUrl(),
        TRACEGATE_CLICKHOUSE_CLUSTER: 'x',
        TRACEGATE_CLICKHOUSE_NODES: 'ftp://a,b',
      }),
    ).to.throw(/TRACEGATE_CLICKHOUSE_NODES: not an http\(s\) URL: ftp:\/\/a/);
    // The chains' heads belong to the cluster, whichever node the collector talks to.
    const at = (url: string) =>
      storeIdentity(loadConfig({ TRACEGATE_CLICKHOUSE_URL: url, TRACEGATE_CLICKHOUSE_CLUSTER: 'x' }));
    expect(at('http://node-a:8123')).to.equal(at('http://node-b:8123'));
    const one = createStorage(
      loadConfig({ TRACEGATE_CLICKHOUSE_URL: clickhouseUrl(), TRACEGATE_CLICKHOUSE_CLUSTER: 'x' }),
    );
    expect((one as unknown as { opts: { cluster: unknown } }).opts.cluster).to.deep.equal({
      name: 'x',
      nodeUrls: [clickhouseUrl()],
    });
    void one.close();
  });
});
