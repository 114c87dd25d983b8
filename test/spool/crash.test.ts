// Real crash: a child process ingests, the test SIGKILLs it right after reading acks,
// then a new Pipeline on the same directory must deliver every acknowledged record.
import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pipeline } from '../../pipeline/pipeline.ts';
import type { SpanRecord } from '../../core/record.ts';
import { MapStorage, TestLogger, WS, crashChild, removeDir, tempDir, testConfig } from '../support/spool.ts';

describe('pipeline crash (SIGKILL child)', function () {
  this.timeout(120_000);
  let dir: string;
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(async () => {
    await removeDir(dir);
  });

  async function replay(storage: MapStorage): Promise<void> {
    const p = new Pipeline({ config: testConfig(join(dir, 'collector')), storage, logger: new TestLogger() });
    await p.start();
    await p.flush();
    await p.close();
  }

  it('storage down: every acknowledged record is replayed exactly once', async () => {
    for (const killAfter of [1, 137, 800]) {
      await removeDir(join(dir, 'collector'));
      const acked = await crashChild(join(dir, 'collector'), 'down', 2000, killAfter);
      expect(acked.size).to.be.at.least(killAfter);
      const storage = new MapStorage();
      await replay(storage);
      for (const i of acked)
        expect(storage.spans.has(`${WS}/trace-${Math.floor(i / 10)}/span-${i}`), `span-${i}`).to.equal(true);
      expect([...storage.deliveries.values()].every((n) => n === 1)).to.equal(true);
    }
  });

  it('flushes racing the kill: acknowledged records all stored, re-inserts are idempotent', async () => {
    for (const killAfter of [300, 1500, 4000]) {
      await removeDir(join(dir, 'collector'));
      const file = join(dir, `stored-${killAfter}.jsonl`);
      const acked = await crashChild(join(dir, 'collector'), `jsonl:${file}`, 5000, killAfter);
      // What the child's storage had committed before it died (a torn last line is dropped).
      const storage = new MapStorage();
      const before: SpanRecord[] = [];
      if (existsSync(file)) {
        for (const line of readFileSync(file, 'utf8').split('\n')) {
          try {
            before.push(JSON.parse(line) as SpanRecord);
          } catch {
            /* torn by the kill */
          }
        }
      }
      await storage.insertSpans(before);
      await replay(storage);
      for (const i of acked)
        expect(storage.spans.has(`${WS}/trace-${Math.floor(i / 10)}/span-${i}`), `span-${i}`).to.equal(true);
      expect(await storage.countSpans(WS))
        .to.be.at.least(acked.size)
        .and.at.most(5000);
    }
  });
});
