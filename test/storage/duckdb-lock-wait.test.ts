// DuckDB lets one process have the file. A CLI command run while no server was up holds it for a moment: a server
// starting then waits for it instead of exiting (a deploy script running `make run` then `make key` once failed so).
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDbStorage } from '../../storage/duckdb.ts';

describe('embedded store held by another process', function () {
  this.timeout(120_000);
  it('opening waits until the other process lets go, then works', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-lock-'));
    const file = join(dir, 'tracegate.duckdb');
    const holder = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
      import { DuckDBInstance } from '@duckdb/node-api';
      const db = await DuckDBInstance.create(${JSON.stringify(file)});
      const c = await db.connect();
      await c.run('CREATE TABLE IF NOT EXISTS held (x INTEGER)');
      console.log('held');
      setTimeout(() => { c.closeSync(); db.closeSync(); process.exit(0); }, 2000);
    `,
      ],
      { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        holder.stdout!.on('data', (d: Buffer) => {
          if (d.toString().includes('held')) resolve();
        });
        holder.on('exit', (code) => reject(new Error(`holder exited ${code}`)));
      });
      const started = Date.now();
      const s = new DuckDbStorage(file);
      await s.init();
      expect(Date.now() - started).to.be.greaterThan(1000); // it waited for the holder
      expect(await s.ping()).to.equal(true);
      await s.close();
    } finally {
      holder.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
