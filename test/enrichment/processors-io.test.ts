// Enrichment processors against the operating system: alert webhooks delivered to a real HTTP receiver (a listening
// socket), and a spool write failing on a full tmpfs (mount, as root). The pure processor tests are unit tests:
// test/unit/enrichment/processors.test.ts.
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptySpan, type SpanRecord } from '../../core/record.ts';
import { signDelivery, webhookNotifier, type DeliveryOutcome } from '../../processors/alerts.ts';
import { DEFAULT_POLICY } from '../../processors/governance/index.ts';
import { sleep } from '../support/process.ts';

function span(trace: string, id: string, over: Partial<SpanRecord> = {}): SpanRecord {
  return {
    ...emptySpan('ws1', 'native'),
    traceId: trace,
    spanId: id,
    startTimeNs: '1000',
    endTimeNs: '2000',
    ingestedAtMs: 5,
    ...over,
  };
}

describe('alert evaluator', () => {
  it('retries a webhook delivery after a 5xx or a refused connection, and not after another 4xx', async () => {
    const answers = [503, 200, 404, 302];
    const received: Array<{ body: string; ts: string; sig: string; id: string }> = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        received.push({
          body,
          ts: String(req.headers['x-service-delivery-timestamp']),
          sig: String(req.headers['x-service-signature']),
          id: String(req.headers['x-service-delivery-id']),
        });
        res.statusCode = answers.shift() ?? 404;
        res.end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
    const warnings: object[] = [];
    const notifier = webhookNotifier({ warn: (o) => warnings.push(o) }, 2000, [20, 20]);
    const alert = {
      recordType: 'alert' as const,
      workspaceId: 'ws',
      alertId: 'a1',
      ruleId: 'r',
      kind: 'cost',
      severity: 'high' as const,
      message: 'm',
      traceId: 't',
      value: 2,
      threshold: 1,
      windowStartMs: 0,
      atMs: 1,
      delivered: 'queued',
    };
    const outcomes: string[] = [];
    const done = (id: string) => (o: DeliveryOutcome) => outcomes.push(`${id} ${o}`);
    try {
      notifier.notify(url, 'whsec', alert, done('a1'));
      for (let i = 0; i < 100 && received.length < 2; i++) await sleep(10);
      expect(received).to.have.length(2); // 503, then 200
      for (const d of received) expect(d.sig).to.equal(signDelivery('whsec', d.ts, d.body));
      for (let i = 0; i < 100 && outcomes.length < 1; i++) await sleep(10);
      expect(outcomes).to.deep.equal(['a1 sent']);
      notifier.notify(url, 'whsec', { ...alert, alertId: 'a2' }, done('a2')); // 404: final
      for (let i = 0; i < 100 && warnings.length < 1; i++) await sleep(10);
      await sleep(100);
      expect(received).to.have.length(3);
      expect(warnings).to.deep.equal([{ status: 404, alertId: 'a2' }]);
      notifier.notify(url, 'whsec', { ...alert, alertId: 'a3' }, done('a3')); // a redirect: final, not followed
      for (let i = 0; i < 100 && warnings.length < 2; i++) await sleep(10);
      await sleep(100);
      expect(received).to.have.length(4);
      expect(warnings[1]).to.deep.equal({ status: 302, alertId: 'a3' });
      expect(received.map((r) => JSON.parse(r.body).alert.alertId)).to.deep.equal(['a1', 'a1', 'a2', 'a3']);
      expect(received.map((r) => r.id)).to.deep.equal(['a1', 'a1', 'a2', 'a3']); // X-Service-Delivery-Id
      expect(received.map((r) => 'delivered' in JSON.parse(r.body).alert)).to.deep.equal([false, false, false, false]);
      expect(outcomes).to.deep.equal(['a1 sent', 'a2 failed', 'a3 failed']);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
    // Nothing listening: three attempts, then one warning.
    const refused: object[] = [];
    webhookNotifier({ warn: (o) => refused.push(o) }, 2000, [20, 20]).notify(url, undefined, alert, done('refused'));
    for (let i = 0; i < 200 && refused.length < 1; i++) await sleep(10);
    expect(refused).to.have.length(1);
    expect(refused[0]).to.include({ alertId: 'a1', attempts: 3 });
    expect(outcomes.at(-1)).to.equal('refused failed');
  });
  it('at shutdown, lets a delivery in flight finish and drops the ones waiting for a retry at once, logging their ids', async () => {
    let hits = 0;
    const server = createServer((req, res) => {
      hits++;
      req.resume();
      // a slow receiver for "slow", an error (a retry 1 s later) for anything else
      if (req.url === '/slow') setTimeout(() => res.end(), 150);
      else {
        res.statusCode = 500;
        res.end();
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const alert = {
      recordType: 'alert' as const,
      workspaceId: 'ws',
      alertId: 'slow-1',
      ruleId: 'r',
      kind: 'cost',
      severity: 'high' as const,
      message: 'm',
      traceId: 't',
      value: 2,
      threshold: 1,
      windowStartMs: 0,
      atMs: 1,
      delivered: 'sent',
    };
    const warnings: object[] = [];
    try {
      const notifier = webhookNotifier({ warn: (o) => warnings.push(o) }, 2000, [1000, 1000]);
      notifier.notify(`${base}/fail`, undefined, { ...alert, alertId: 'fail-1' });
      for (let i = 0; i < 100 && hits < 1; i++) await sleep(10);
      await sleep(30); // its 500 answered: a retry waits 1 s
      notifier.notify(`${base}/slow`, undefined, alert);
      const t0 = Date.now();
      expect(await notifier.settle(2000)).to.deep.equal(['fail-1']); // waited for the 150 ms answer only
      expect(Date.now() - t0).to.be.below(900);
      expect(warnings).to.deep.equal([{ alertIds: ['fail-1'], count: 1 }]);
      await sleep(1200);
      expect(hits).to.equal(2); // the retry never ran
      notifier.notify(`${base}/slow`, undefined, { ...alert, alertId: 'late-1' }); // after shutdown: logged, not sent
      expect(warnings[1]).to.deep.equal({ alertIds: ['late-1'], count: 1 });
      await sleep(50);
      expect(hits).to.equal(2);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('processor worker thread', () => {
  it('a thread that dies after a failed write hands over the segment the failure sealed too (a full tmpfs; needs root)', async function () {
    const { ProcessorWorker } = await import('../../pipeline/processor-worker.ts');
    const { loadSegment } = await import('../../spool/spool.ts');
    const { execFileSync } = await import('node:child_process');
    const { mkdirSync, unlinkSync } = await import('node:fs');
    const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-procw-'));
    const spoolDir = join(dataDir, 'spool');
    mkdirSync(spoolDir);
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', spoolDir], { stdio: 'pipe' });
    } catch {
      rmSync(dataDir, { recursive: true, force: true });
      this.skip();
    }
    const w = new ProcessorWorker({
      dataDir,
      enabled: false,
      fsync: true,
      store: 'test',
      logLevel: 'silent',
      settings: { policyFor: async () => DEFAULT_POLICY, alertsFor: async () => ({ rules: [] }) },
    });
    const ctx = { workspaceId: 'ws', keyId: 'k1', route: 'test' };
    try {
      await w.open();
      await w.process([span('t1', 'a')], ctx); // acknowledged, in segment 1
      const filler = join(spoolDir, 'filler');
      try {
        writeFileSync(filler, Buffer.alloc(2 * 1024 * 1024));
      } catch {
        /* ENOSPC: the disk is full */
      }
      let err: Error | null = null;
      await w.process([span('t2', 'a', { prompt: 'x'.repeat(200_000) })], ctx).catch((e: Error) => {
        err = e;
      });
      expect(err!.name).to.equal('SpoolWriteError');
      unlinkSync(filler);
      await w.process([span('t3', 'a')], ctx); // segment 1 sealed after the failure, t3 in segment 2
      expect(w.state.unsealed).to.have.length(2);
      const inner = w as unknown as { rpc: { worker: { terminate(): Promise<number> } } };
      await inner.rpc.worker.terminate();
      await new Promise((r) => setTimeout(r, 50));
      await w.process([span('t4', 'a')], ctx);
      const traces: string[] = [];
      for (const seg of await w.seal())
        for (const r of await loadSegment(seg)) if (!('recordType' in r)) traces.push((r as SpanRecord).traceId);
      expect(traces).to.deep.equal(['t1', 't3', 't4']);
    } finally {
      await w.close();
      try {
        execFileSync('umount', [spoolDir], { stdio: 'pipe' });
      } catch {
        execFileSync('umount', ['-l', spoolDir], { stdio: 'pipe' });
      }
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
