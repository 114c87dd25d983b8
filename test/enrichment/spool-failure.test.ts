// A spool append that fails (disk full, I/O error) answers 503 and must leave no trace in the verification and
// audit chains: the processor thread goes back to the last durable chain heads (a new run, as after a restart)
// before it processes anything else, so nothing links to the lost records.
import { auditChain, verificationChain } from '../support/chains.ts';
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKey } from '../../collector/workspaces/admin.ts';
import { BACKENDS, cli, flushed, get, post, startTestServer, type TestServer } from '../support/server.ts';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Key = Awaited<ReturnType<typeof createKey>>;
type Sent = { id: string; k: Key; status: number };

/** `verify` passes with no problem; exactly the acknowledged requests are audited and verified. */
async function verifiedOn(s: TestServer, sent: Sent[], keys: Key[]): Promise<void> {
  expect(sent.filter((r) => ![200, 503].includes(r.status))).to.deep.equal([]);
  const refused = sent.filter((r) => r.status === 503);
  expect(refused.length).to.be.greaterThan(1);
  await flushed(s);
  for (const k of keys) {
    const res = await cli(s, ['verify', '--workspace', k.workspace, '--json']);
    const report = (
      JSON.parse(res.stdout) as Record<
        string,
        { ok: boolean; problems: unknown[]; audit: unknown[]; recordsChecked: number }
      >
    )[k.workspace]!;
    expect([report.problems, report.audit, report.ok, res.code]).to.deep.equal([[], [], true, 0]);
    const ok = sent.filter((r) => r.k === k && r.status === 200);
    expect(report.recordsChecked).to.equal(ok.length);
    expect((await auditChain(s.running.storage, k.workspaceId)).filter((r) => r.action === 'ingest').length).to.equal(
      ok.length,
    );
    const named = new Set((await verificationChain(s.running.storage, k.workspaceId)).records.map((r) => r.traceId));
    expect(refused.filter((r) => named.has(r.id)).map((r) => r.id)).to.deep.equal([]);
  }
  for (const r of sent.filter((x) => x.status === 200)) {
    const v = await get(`${s.url}/api/traces/${r.id}/verification`, { authorization: `Bearer ${r.k.key}` });
    expect([r.id, v.status, v.json.ok, v.json.problems]).to.deep.equal([r.id, 200, true, []]);
  }
}

for (const backend of BACKENDS) {
  describe(`failed spool appends (${backend})`, function () {
    this.timeout(240_000);
    let s: TestServer;
    let sent: Sent[];
    let n = 0;
    before(async () => {
      s = await startTestServer(backend);
    });
    beforeEach(() => {
      sent = [];
    });
    after(async () => {
      await s?.close();
    });

    const audited = (name: string) =>
      createKey(s.running.storage, `${name}-${backend}`, (e) =>
        s.running.pipeline.record([s.running.enrichment.audit.append(e)]),
      );
    const send = async (k: Key) => {
      const id = `sf-${n++}`;
      const res = await post(
        `${s.url}/api/traces`,
        { requestId: id, prompt: 'p', response: 'r' },
        { authorization: `Bearer ${k.key}` },
      );
      const r = { id, k, status: res.status };
      sent.push(r);
      return r;
    };
    const verified = (keys: Key[]) => verifiedOn(s, sent, keys);

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
      const early = await verificationChain(s.running.storage, b.workspaceId);
      expect(early.checkpoints.some((c) => c.seq === 2)).to.equal(true); // b's lost checkpoint was signed again

      // Concurrent requests: the directory comes back while frames made against the lost records are in flight.
      for (let round = 0; round < 3; round++) {
        await breakSpool();
        let back = false;
        await Promise.all(
          Array.from({ length: 40 }, (_, i) =>
            send(i % 3 ? a : b).then(() => {
              if (!back) {
                back = true;
                mkdirSync(spool);
              }
            }),
          ),
        );
        for (const k of [a, b]) expect((await send(k)).status).to.equal(200);
      }
      await verified([a, b]);
    });
  });

  // A full disk: the write into the active segment fails part way (ENOSPC), with more requests queued behind it.
  // The spool sits on a small tmpfs, so this needs mount permission (root), like the DuckDB full-disk test.
  describe(`failed spool appends on a full disk (${backend})`, function () {
    this.timeout(240_000);
    let s: TestServer;
    const sent: Sent[] = [];
    let n = 0;
    let spool = '';
    let mounted = false;
    before(async function () {
      const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-test-'));
      spool = join(dataDir, 'spool');
      mkdirSync(spool, { recursive: true });
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', spool], { stdio: 'pipe' });
        mounted = true;
      } catch (err) {
        console.warn(`      skipped: cannot mount a tmpfs here (needs root): ${(err as Error).message.split('\n')[0]}`);
        this.skip();
      }
      s = await startTestServer(backend, { TRACEGATE_DATA_DIR: dataDir });
    });
    after(async () => {
      try {
        await s?.running.close();
      } finally {
        if (mounted)
          try {
            execFileSync('umount', [spool], { stdio: 'pipe' });
          } catch {
            execFileSync('umount', ['-l', spool], { stdio: 'pipe' });
          }
        rmSync(join(spool, '..'), { recursive: true, force: true });
      }
    });

    it('a write that fails part way, with more queued behind it, leaves no gap either', async () => {
      const audited = (name: string) =>
        createKey(s.running.storage, `${name}-${backend}`, (e) =>
          s.running.pipeline.record([s.running.enrichment.audit.append(e)]),
        );
      const send = async (k: Key) => {
        const id = `full-${n++}`;
        // ~20 KB of text: the disk fills in the middle of a frame, not between two
        const res = await post(
          `${s.url}/api/traces`,
          { requestId: id, prompt: 'p'.repeat(20_000), response: 'r' },
          { authorization: `Bearer ${k.key}` },
        );
        sent.push({ id, k, status: res.status });
        return res;
      };
      const c = await audited('spoolfull-c');
      const d = await audited('spoolfull-d');
      for (const k of [c, d]) expect((await send(k)).status).to.equal(200);
      const filler = join(spool, 'filler');
      for (let round = 0; round < 3; round++) {
        // Fill what is left of the disk, then free it while requests are still arriving.
        const fd = openSync(filler, 'w');
        try {
          for (;;) writeSync(fd, Buffer.alloc(64 * 1024));
        } catch (err) {
          expect((err as NodeJS.ErrnoException).code).to.equal('ENOSPC');
        } finally {
          closeSync(fd);
        }
        let freed = false;
        await Promise.all(
          Array.from({ length: 60 }, (_, i) =>
            send(i % 2 ? c : d).then(() => {
              if (!freed && i >= 20) {
                freed = true;
                rmSync(filler);
              }
            }),
          ),
        );
        if (!freed) rmSync(filler);
        for (const k of [c, d]) expect((await send(k)).status).to.equal(200);
        await flushed(s); // the writer empties the little disk
      }
      expect(sent.filter((r) => r.status === 503).length).to.be.greaterThan(1);
      await verifiedOn(s, sent, [c, d]);
    });
  });
}

// The HTTP thread keeps an audit chain of its own: rejected authentication and admin changes, and every ingest
// request when enrichment is off. A failed append must leave no gap there either.
for (const backend of BACKENDS) {
  for (const enrichment of [true, false]) {
    describe(`failed spool appends, the HTTP thread's audit chain (${backend}, enrichment ${enrichment ? 'on' : 'off'})`, function () {
      this.timeout(240_000);
      let s: TestServer;
      before(async () => {
        s = await startTestServer(backend, {
          TRACEGATE_ENRICHMENT: String(enrichment),
          TRACEGATE_AUTH_FAILURE_LIMIT: '100000',
        });
      });
      after(async () => {
        await s?.close();
      });

      it('continues from the last durable record: verify finds no gap', async () => {
        const k = await createKey(s.running.storage, `mainchain-${backend}-${enrichment}`, (e) =>
          s.running.pipeline.record([s.running.enrichment.audit.append(e)]),
        );
        // A real key id with a wrong secret: the rejection is audited in the key's workspace, on this thread's chain.
        const wrong = `tg_${k.keyId}_${'x'.repeat(43)}`;
        let n = 0;
        const sendGood = () =>
          post(
            `${s.url}/api/traces`,
            { requestId: `mc-${n++}`, prompt: 'p', response: 'r' },
            { authorization: `Bearer ${k.key}` },
          );
        const sendBad = () =>
          post(`${s.url}/api/traces`, { requestId: `mc-bad-${n++}` }, { authorization: `Bearer ${wrong}` });
        const spool = join(s.dataDir, 'spool');
        let acked = 0;
        let refused = 0;
        const count = (r: { status: number }) => {
          if (r.status === 200) acked++;
          else if (r.status === 503) refused++;
          else expect.fail(`status ${r.status}`);
        };
        for (let i = 0; i < 3; i++) {
          count(await sendGood());
          expect((await sendBad()).status).to.equal(401);
        }
        for (let round = 0; round < 3; round++) {
          await s.running.pipeline.flush();
          rmSync(spool, { recursive: true, force: true });
          // A rejection's audit record is spooled after the answer: wait until its append has failed.
          expect((await sendBad()).status).to.equal(401);
          for (let i = 0; i < 200 && !s.running.pipeline.stats().spoolWriteFailure; i++) await sleep(10);
          expect(s.running.pipeline.stats().spoolWriteFailure).to.not.equal(null);
          // The lost rejection record is counted (the request had its answer already).
          expect(
            Number(
              /^tracegate_audit_records_dropped_total\{reason="spool_error"\} (\d+)$/m.exec(
                (await get(`${s.url}/metrics`)).text,
              )?.[1],
            ),
          ).to.be.greaterThan(0);
          // With enrichment off an ingest request's audit record rides in its own append: its 503 shows the failure.
          if (!enrichment) count(await sendGood());
          let back = false;
          await Promise.all(
            Array.from({ length: 30 }, (_, i) =>
              (i % 2 ? sendBad().then((r) => expect(r.status).to.equal(401)) : sendGood().then(count)).then(() => {
                if (!back) {
                  back = true;
                  mkdirSync(spool);
                }
              }),
            ),
          );
          for (let i = 0; i < 2; i++) {
            count(await sendGood());
            expect((await sendBad()).status).to.equal(401);
          }
        }
        if (!enrichment) expect(refused).to.be.greaterThan(0);
        await flushed(s);
        const res = await cli(s, ['verify', '--workspace', k.workspace, '--json']);
        const report = (
          JSON.parse(res.stdout) as Record<string, { ok: boolean; problems: unknown[]; audit: unknown[] }>
        )[k.workspace]!;
        expect([report.audit, report.problems, report.ok, res.code]).to.deep.equal([[], [], true, 0]);
        const chain = await auditChain(s.running.storage, k.workspaceId);
        expect(chain.filter((r) => r.action === 'auth.rejected').length).to.be.greaterThan(3);
        expect(chain.filter((r) => r.action === 'ingest' && r.outcome === 'ok').length).to.equal(acked);
      });
    });
  }
}
