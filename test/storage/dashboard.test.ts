// What the web UI's dashboard and jump box read from storage, against every backend and layout (ClickHouse 18.16,
// current ClickHouse through chDB, the two-shard cluster, DuckDB directly and behind the storage thread):
// activity() per hour and day, each span and alert counted once however often it was delivered, and spanTraces().
import { expect } from 'chai';
import type { SecurityAlertRecord } from '../../core/enrichment-records.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { emptySpan, type SpanKind, type SpanRecord } from '../../core/record.ts';
import { CONTRACT_BACKENDS, type StoreHarness } from './harness.ts';

const T0 = Date.UTC(2025, 10, 22, 4, 10); // 04:10 UTC
const HOUR = 3_600_000;

function span(ws: string, traceId: string, spanId: string, atMs: number, over: Partial<SpanRecord> = {}): SpanRecord {
  return {
    ...emptySpan(ws, 'otlp'),
    traceId,
    spanId,
    name: 's',
    kind: 'other' as SpanKind,
    startTimeNs: `${atMs}000000`,
    endTimeNs: `${atMs + 5}000000`,
    durationMs: 5,
    status: 'completed',
    ingestedAtMs: T0,
    ...over,
  };
}

function alert(ws: string, alertId: string, receivedAtMs: number): SecurityAlertRecord {
  return {
    recordType: 'security_alert',
    workspaceId: ws,
    alertId,
    source: 'scanner',
    severity: 'high',
    rawSeverity: 'HIGH',
    title: 'prompt injection',
    category: 'prompt_injection',
    externalId: alertId,
    detectedAtMs: receivedAtMs,
    receivedAtMs,
    traceId: '',
    spanId: '',
    requestId: '',
    responseId: '',
    sessionId: '',
    userId: '',
    signature: 'unsigned',
    secretId: '',
    correlation: '{}',
    body: '{}',
  };
}

const hourIso = (ms: number) => new Date(Math.floor(ms / HOUR) * HOUR).toISOString();

for (const [name, factory] of CONTRACT_BACKENDS) {
  describe(`dashboard reads contract (${name})`, function () {
    let h: StoreHarness;
    let s: Storage;
    const ws = 'ws-dash';
    before(async () => {
      h = await factory();
      s = h.storage;
      // Trace a: 04:10, a tool call that failed, a guardrail, a model call; its last span at 05:20.
      // Trace b: starts 05:30 with a tool call that worked. Trace c: another workspace.
      const spans = [
        span(ws, 'a', 'a1', T0, { kind: 'agent' }),
        span(ws, 'a', 'a2', T0 + 1_000, { kind: 'tool', status: 'error' }),
        span(ws, 'a', 'a3', T0 + 2_000, { kind: 'guardrail' }),
        span(ws, 'a', 'a4', T0 + 70 * 60_000, { kind: 'llm' }),
        span(ws, 'b', 'b1', T0 + 80 * 60_000, { kind: 'tool' }),
        span('ws-other', 'c', 'c1', T0, { kind: 'tool', status: 'error' }),
      ];
      await s.insertSpans(spans);
      // Re-delivered: the same spans again (an exporter retry), and a newer version of a2 that now worked.
      await s.insertSpans(spans);
      await s.insertSpans([
        span(ws, 'a', 'a2', T0 + 1_000, { kind: 'tool', status: 'completed', ingestedAtMs: T0 + 9 }),
      ]);
      await s.insertEnrichment([
        alert(ws, 'al-1', T0 + 5),
        alert(ws, 'al-2', T0 + 65 * 60_000),
        alert('ws-other', 'al-3', T0),
      ]);
      await s.insertEnrichment([alert(ws, 'al-1', T0 + 5)]); // a redelivery
    });
    after(() => h?.destroy());

    it('activity per hour: traces by their first span, spans, failures, tool calls, guardrails, alerts; each once', async () => {
      const rows = await s.activity(ws, { bucket: 'hour' });
      expect(rows).to.deep.equal([
        {
          bucketStart: hourIso(T0),
          traces: 1,
          spans: 3,
          errorSpans: 0,
          toolCalls: 1,
          toolErrors: 0,
          guardrailChecks: 1,
          securityAlerts: 1,
        },
        {
          bucketStart: hourIso(T0 + HOUR),
          traces: 1,
          spans: 2,
          errorSpans: 0,
          toolCalls: 1,
          toolErrors: 0,
          guardrailChecks: 0,
          securityAlerts: 1,
        },
      ]);
      const other = await s.activity('ws-other', { bucket: 'hour' });
      expect(other.map((r) => [r.traces, r.toolErrors, r.securityAlerts])).to.deep.equal([[1, 1, 1]]);
      expect(await s.activity('ws-none', { bucket: 'day' })).to.deep.equal([]);
    });

    it('activity per day, and a range: [from, to) on span start and alert receive time', async () => {
      const day = await s.activity(ws, { bucket: 'day' });
      expect(day).to.deep.equal([
        {
          bucketStart: '2025-11-22T00:00:00.000Z',
          traces: 2,
          spans: 5,
          errorSpans: 0,
          toolCalls: 2,
          toolErrors: 0,
          guardrailChecks: 1,
          securityAlerts: 2,
        },
      ]);
      // From 05:00: trace a counts there by its first span in the range (a4), trace b too.
      const later = await s.activity(ws, { bucket: 'hour', fromMs: T0 + 50 * 60_000, toMs: T0 + 3 * HOUR });
      expect(later.map((r) => [r.bucketStart, r.traces, r.spans, r.securityAlerts])).to.deep.equal([
        [hourIso(T0 + HOUR), 2, 2, 1],
      ]);
      expect(await s.activity(ws, { bucket: 'hour', fromMs: T0 + 5 * HOUR })).to.deep.equal([]);
      // Bounds past what a ClickHouse Date or DateTime holds neither fail nor exclude anything.
      const wide = await s.activity(ws, { bucket: 'day', fromMs: 0, toMs: 8_000_000_000_000_000 });
      expect(wide.map((r) => r.spans)).to.deep.equal([5]);
    });

    it('a failed tool call counts as a tool error (its newest version)', async () => {
      await s.insertSpans([span(ws, 'd', 'd1', T0 + 3 * HOUR, { kind: 'tool', status: 'error' })]);
      const rows = await s.activity(ws, { bucket: 'hour', fromMs: T0 + 2 * HOUR });
      expect(rows.map((r) => [r.toolCalls, r.toolErrors, r.errorSpans, r.traces])).to.deep.equal([[1, 1, 1, 1]]);
    });

    it('spanTraces: the trace of each span id in the workspace; unknown and foreign ids left out', async () => {
      const got = await s.spanTraces(ws, ['a2', 'b1', 'c1', 'nope']);
      expect([...got.entries()].sort()).to.deep.equal([
        ['a2', 'a'],
        ['b1', 'b'],
      ]);
      expect((await s.spanTraces(ws, [])).size).to.equal(0);
      expect([...(await s.spanTraces('ws-other', ['c1'])).entries()]).to.deep.equal([['c1', 'c']]);
    });
  });
}
