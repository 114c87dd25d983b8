// The TraceLinkStore contract (trace metadata records, the index of the calls the proxy recorded), run against every
// backend and layout: ClickHouse 18.16, current ClickHouse through chDB, the two-shard cluster, DuckDB directly and
// behind the storage thread; through insertSpans/insertEnrichment and through a record batch (the writer's path).
import { expect } from 'chai';
import type { TraceMetaRecord } from '../../core/enrichment-records.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { emptySpan, type SpanRecord } from '../../core/record.ts';
import { CONTRACT_BACKENDS, type StoreHarness } from './harness.ts';

const NASTY = 'q\'uote "dq" \\back \n nl \t tab \u007f del 😀 «é» 世界';

function meta(ws: string, traceId: string, over: Partial<TraceMetaRecord> = {}): TraceMetaRecord {
  return {
    recordType: 'trace_meta',
    workspaceId: ws,
    traceId,
    workflowName: 'Support bot',
    groupId: 'group_0123',
    metadata: JSON.stringify({ customer: 'acme', note: NASTY }),
    organization: 'org-1',
    project: 'proj_1',
    source: 'agents',
    updatedAtMs: 1_000,
    ...over,
  };
}

/** A span the proxy stored for a call, with the provider's response and request ids. */
function proxySpan(ws: string, traceId: string, spanId: string, responseId: string, requestId: string): SpanRecord {
  return {
    ...emptySpan(ws, 'proxy'),
    traceId,
    spanId,
    name: 'responses.create',
    kind: 'llm',
    startTimeNs: '1763787000123456789',
    endTimeNs: '1763787000223456789',
    requestId,
    ingestedAtMs: 1_000,
    attributes: { 'gen_ai.response.id': responseId, 'server.address': '127.0.0.1', 'server.port': 9 },
  };
}

async function viaBatch(storage: Storage, records: Array<SpanRecord | TraceMetaRecord>): Promise<void> {
  const batch = (
    storage as Storage & { recordBatch?: () => { add(r: unknown): void; finish(): Promise<void> } }
  ).recordBatch?.();
  if (!batch) {
    const spans = records.filter((r): r is SpanRecord => !('recordType' in r));
    const others = records.filter((r): r is TraceMetaRecord => 'recordType' in r);
    if (spans.length) await storage.insertSpans(spans);
    if (others.length) await storage.insertEnrichment(others);
    return;
  }
  for (const r of records) batch.add(r);
  await batch.finish();
}

for (const [name, factory] of CONTRACT_BACKENDS) {
  describe(`trace links contract (${name})`, function () {
    let h: StoreHarness;
    before(async () => {
      h = await factory();
    });
    after(() => h?.destroy());

    it('trace metadata: stored as sent, the newest per trace wins, in any order and replayed', async () => {
      const s = h.storage;
      await s.insertEnrichment([meta('ws-a', 'trace_1', { updatedAtMs: 2_000, workflowName: 'newer' })]);
      await s.insertEnrichment([meta('ws-a', 'trace_1', { updatedAtMs: 1_000, workflowName: 'older' })]);
      await viaBatch(s, [meta('ws-a', 'trace_2'), meta('ws-a', 'trace_2')]);
      await s.insertEnrichment([meta('ws-a', 'trace_1', { updatedAtMs: 2_000, workflowName: 'newer' })]); // a replay
      const got = await s.traceMeta('ws-a', ['trace_1', 'trace_2', 'trace_unknown']);
      expect([...got.keys()].sort()).to.deep.equal(['trace_1', 'trace_2']);
      expect(got.get('trace_1')).to.deep.equal(meta('ws-a', 'trace_1', { updatedAtMs: 2_000, workflowName: 'newer' }));
      expect(JSON.parse(got.get('trace_2')!.metadata)).to.deep.equal({ customer: 'acme', note: NASTY });
      expect((await s.traceMeta('ws-a', [])).size).to.equal(0);
    });

    it('trace metadata is scoped to its workspace', async () => {
      const s = h.storage;
      await s.insertEnrichment([meta('ws-b', 'trace_shared', { workflowName: 'B' })]);
      await s.insertEnrichment([meta('ws-c', 'trace_shared', { workflowName: 'C' })]);
      expect((await s.traceMeta('ws-b', ['trace_shared'])).get('trace_shared')!.workflowName).to.equal('B');
      expect((await s.traceMeta('ws-c', ['trace_shared'])).get('trace_shared')!.workflowName).to.equal('C');
      expect((await s.traceMeta('ws-d', ['trace_shared'])).size).to.equal(0);
    });

    it('proxy calls: found by response id and by request id, scoped to the workspace; replays index once', async () => {
      const s = h.storage;
      const a = proxySpan('ws-p', 'tr_a', 'sp_a', 'resp_a', 'req_a');
      const b = proxySpan('ws-p', 'tr_b', 'sp_b', 'resp_b', 'req_b');
      const other = proxySpan('ws-q', 'tr_q', 'sp_q', 'resp_a', 'req_q');
      await s.insertSpans([a, other]);
      await viaBatch(s, [b, { ...b, ingestedAtMs: 2_000 }]);
      await s.insertSpans([a]); // a replay
      const found = await s.proxyCalls('ws-p', [
        { kind: 'response', id: 'resp_b' },
        { kind: 'response', id: 'resp_a' },
        { kind: 'request', id: 'req_b' },
        { kind: 'request', id: 'resp_a' }, // a response id asked as a request id: not one
        { kind: 'response', id: 'resp_none' },
      ]);
      expect(found).to.deep.equal([
        { kind: 'request', id: 'req_b', traceId: 'tr_b', spanId: 'sp_b' },
        { kind: 'response', id: 'resp_a', traceId: 'tr_a', spanId: 'sp_a' },
        { kind: 'response', id: 'resp_b', traceId: 'tr_b', spanId: 'sp_b' },
      ]);
      expect(await s.proxyCalls('ws-q', [{ kind: 'response', id: 'resp_a' }])).to.deep.equal([
        { kind: 'response', id: 'resp_a', traceId: 'tr_q', spanId: 'sp_q' },
      ]);
      expect(await s.proxyCalls('ws-p', [])).to.deep.equal([]);
    });

    it('only proxy spans are indexed (any key: a caller-key call too)', async () => {
      const s = h.storage;
      const notProxy = { ...proxySpan('ws-r', 'tr_n', 'sp_n', 'resp_n', 'req_n'), source: 'otlp' as const };
      const callerKey = proxySpan('ws-r', 'tr_k', 'sp_k', 'resp_k', 'req_k');
      callerKey.attributes['proxy.caller_key'] = true;
      await s.insertSpans([notProxy, callerKey]);
      const found = await s.proxyCalls('ws-r', [
        { kind: 'response', id: 'resp_n' },
        { kind: 'response', id: 'resp_k' },
      ]);
      expect(found.map((c) => c.id)).to.deep.equal(['resp_k']);
    });

    it('survive a restart', async () => {
      const s = await h.reopen();
      expect((await s.traceMeta('ws-a', ['trace_1'])).get('trace_1')!.workflowName).to.equal('newer');
      expect(await s.proxyCalls('ws-p', [{ kind: 'request', id: 'req_a' }])).to.have.length(1);
    });
  });
}
