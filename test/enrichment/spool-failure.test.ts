// A spool append that fails (disk full, I/O error) answers 503 and must leave no trace in the verification and
// audit chains: the processor thread goes back to the last durable chain heads (a new run, as after a restart),
// and frames it made before that are refused, since they may link to the lost records.
import { expect } from 'chai';
import { mkdirSync, rmSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { createKey } from '../../collector/admin.ts';
import { BACKENDS, cli, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Key = Awaited<ReturnType<typeof createKey>>;
type Sent = { id: string; k: Key; status: number };

for (const backend of BACKENDS) {
  describe(`failed spool appends (${backend})`, function () {
    this.timeout(120_000);
    let s: TestServer;
    let sent: Sent[];
    let n = 0;
    before(async () => { s = await startTestServer(backend); });
    beforeEach(() => { sent = []; });
    after(async () => { await s?.close(); });

    const audited = (name: string) => createKey(s.running.storage, `${name}-${backend}`, (e) => s.running.pipeline.record([s.running.enrichment.audit.append(e)]));
    const send = async (k: Key) => {
      const id = `sf-${n++}`;
      const res = await post(`${s.url}/api/traces`, { requestId: id, prompt: 'p', response: 'r' }, { authorization: `Bearer ${k.key}` });
      const r = { id, k, status: res.status };
      sent.push(r);
      return r;
    };
    /** `verify` passes with no problem; exactly the acknowledged requests are audited and verified. */
    const verified = async (keys: Key[]) => {
      expect(sent.filter((r) => ![200, 503].includes(r.status))).to.deep.equal([]);
      const refused = sent.filter((r) => r.status === 503);
      expect(refused.length).to.be.greaterThan(1);
      await flushed(s);
      for (const k of keys) {
        const res = await cli(s, ['verify', '--workspace', k.workspace, '--json']);
        const report = (JSON.parse(res.stdout) as Record<string, { ok: boolean; problems: unknown[]; audit: unknown[]; recordsChecked: number }>)[k.workspace]!;
        expect([report.problems, report.audit, report.ok, res.code]).to.deep.equal([[], [], true, 0]);
        const ok = sent.filter((r) => r.k === k && r.status === 200);
        expect(report.recordsChecked).to.equal(ok.length);
        expect((await s.running.storage.auditChain(k.workspaceId)).filter((r) => r.action === 'ingest').length).to.equal(ok.length);
        const named = new Set((await s.running.storage.verificationChain(k.workspaceId)).records.map((r) => r.traceId));
        expect(refused.filter((r) => named.has(r.id)).map((r) => r.id)).to.deep.equal([]);
      }
      for (const r of sent.filter((x) => x.status === 200)) {
        const v = await get(`${s.url}/api/traces/${r.id}/verification`, { authorization: `Bearer ${r.k.key}` });
        expect([r.id, v.status, v.json.ok, v.json.problems]).to.deep.equal([r.id, 200, true, []]);
      }
    };

    it('leave no gap in the chains: verify passes and every acknowledged trace verifies', async () => {
      const a = await audited('spoolfail-a');
      const b = await audited('spoolfail-b');
      const spool = join(s.dataDir, 'spool');
      const breakSpool = async () => {
        await s.running.pipeline.flush(); // seals the active segment: the next append needs a new file
        rmSync(spool, { recursive: true, force: true });
      };

      // b's second record waits for its checkpoint (at most one a second), which then rides in a's lost frame.
      for (const k of [a, b, b]) expect((await send(k)).status).to.equal(200);
      await sleep(1100);
      await breakSpool();
      expect((await send(a)).status).to.equal(503);
      mkdirSync(spool);
      expect((await send(a)).status).to.equal(200);
      await flushed(s);
      const early = await s.running.storage.verificationChain(b.workspaceId);
      expect(early.checkpoints.some((c) => c.seq === 2)).to.equal(true); // b's lost checkpoint was signed again

      // Concurrent requests: the directory comes back while frames made against the lost records are in flight.
      for (let round = 0; round < 3; round++) {
        await breakSpool();
        let back = false;
        await Promise.all(Array.from({ length: 40 }, (_, i) => send(i % 3 ? a : b).then(() => {
          if (!back) { back = true; mkdirSync(spool); }
        })));
        for (const k of [a, b]) expect((await send(k)).status).to.equal(200);
      }
      await verified([a, b]);
    });

    it('a write failing with later frames queued behind it (a full disk) leaves no gap either', async () => {
      const c = await audited('spoolfail-c');
      const d = await audited('spoolfail-d');
      for (const k of [c, d]) expect((await send(k)).status).to.equal(200);
      // The spool's next write fails after a while, as on a full disk; frames that queue behind it meanwhile
      // would be written to a new segment if the pipeline handed them over.
      const probe = await open(join(s.dataDir, 'probe'), 'w');
      const proto = Object.getPrototypeOf(probe) as { write: (this: FileHandle, ...args: unknown[]) => Promise<unknown> };
      await probe.close();
      const write = proto.write;
      let armed = true;
      proto.write = async function (this: FileHandle, ...args: unknown[]) {
        if (!armed) return write.apply(this, args);
        armed = false;
        await sleep(300);
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      };
      try {
        for (let round = 0; round < 3; round++) {
          armed = true;
          await Promise.all(Array.from({ length: 60 }, (_, i) => send(i % 2 ? c : d)));
          expect(armed).to.equal(false);
          for (const k of [c, d]) expect((await send(k)).status).to.equal(200);
        }
      } finally {
        proto.write = write;
      }
      await verified([c, d]);
    });
  });
}
