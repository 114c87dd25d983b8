// Prints scanText throughput on typical trace text (see throughput.ts) and guards against gross regressions.
// The floor is deliberately far below the target (≥ 20 MB/s per core) so a busy CI machine does not flake;
// run `node test/unit/governance/throughput.ts` for the full measurement.
import { expect } from 'chai';
import { measure } from './throughput.ts';
import { typicalRecords } from './typical-text.ts';

describe('governance throughput', () => {
  it('scanText on typical text (MB per CPU-second, one core)', function () {
    this.timeout(240_000);
    const r = measure('2 KiB records', typicalRecords(2e6, 2048), 2);
    console.log(
      `      ${r.label}: ${r.mbPerSec.toFixed(1)} MB/s per core (wall ${r.wallMbPerSec.toFixed(1)} MB/s, ${r.mb.toFixed(1)} MB)`,
    );
    expect(r.mbPerSec).to.be.greaterThan(3);
  });
});
