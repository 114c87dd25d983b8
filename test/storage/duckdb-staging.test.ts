// The embedded store's staging tables (temp tables the appender fills before one statement moves their rows) do not
// keep the rows of earlier inserts: emptied with DELETE, a temp table never checkpointed and kept them in memory,
// then in temp files, growing with everything ever ingested.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptySpan, type SpanRecord } from '../../core/record.ts';
import type { PolicyRecord } from '../../core/enrichment-records.ts';
import { DuckDbStorage } from '../../storage/duckdb.ts';

const T0 = 1_763_787_000_000_000_000n;
const PROMPT = 'Customer asks about a damaged order and the refund policy. '.repeat(16); // ~1 KB

function span(i: number): SpanRecord {
  return {
    ...emptySpan('ws', 'native'),
    traceId: `t${i}`,
    spanId: 's1',
    name: 'chat',
    kind: 'llm',
    prompt: PROMPT,
    response: PROMPT,
    startTimeNs: String(T0 + BigInt(i) * 1000n),
    endTimeNs: String(T0 + BigInt(i) * 1000n + 500n),
    ingestedAtMs: 1,
  };
}

function policy(i: number): PolicyRecord {
  return {
    recordType: 'policy',
    workspaceId: 'ws',
    traceId: `t${i}`,
    spanId: 's1',
    policyVersion: 1,
    decision: 'allow',
    reasons: `[{"code":"none","message":"${PROMPT.slice(0, 200)}"}]`,
    createdAtMs: 1,
  };
}

describe('embedded store: staging tables hold one insert at most', function () {
  this.timeout(120_000);
  let dir: string;
  let s: DuckDbStorage;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tracegate-staging-'));
    s = new DuckDbStorage(join(dir, 'db.duckdb'), { memoryLimit: '64MB' });
    await s.init();
  });
  after(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('~100 MB of spans and policy records inserted in batches: what the staging tables hold stays bounded', async () => {
    const batch = 2_000;
    const batches = 25; // 50,000 spans of ~2 KB and as many policy records
    let most = 0;
    for (let b = 0; b < batches; b++) {
      const ids = Array.from({ length: batch }, (_, j) => b * batch + j);
      await s.insertSpans(ids.map(span));
      await s.insertEnrichment(ids.map(policy));
      // DuckDB frees a replaced table's blocks lazily: a few batches' worth are held at times, then none.
      const t = (await s.memoryByTag()).IN_MEMORY_TABLE;
      expect(t, 'DuckDB reports IN_MEMORY_TABLE').to.not.equal(undefined);
      most = Math.max(most, t!.memory + t!.temp);
    }
    expect(await s.countSpans('ws')).to.equal(batch * batches);
    // The tag also counts table data not yet checkpointed (bounded by DuckDB's checkpoint threshold). Emptied with
    // DELETE, the staging tables took it to 85-88 MB by the end (part of it in temp files), growing with each batch.
    expect(most).to.be.above(0);
    expect(most / 2 ** 20).to.be.below(48);
  });
});
