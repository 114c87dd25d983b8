// Throughput of scanText on typical trace text, one core. Run: node test/unit/governance/throughput.ts [MB]
import { scanText } from '../../../processors/governance/index.ts';
import { typicalRecords } from './typical-text.ts';

/**
 * Rates are per CPU-second of this process (process.cpuUsage), which is what "one core" means and stays
 * meaningful when other work shares the machine; wall-clock rates are reported alongside.
 */
export interface ThroughputResult {
  label: string;
  mb: number;
  cpuSeconds: number;
  mbPerSec: number;
  wallMbPerSec: number;
  findings: number;
}

export function measure(label: string, records: string[], rounds = 3): ThroughputResult {
  const chars = records.reduce((n, r) => n + r.length, 0);
  for (const r of records.slice(0, 200)) scanText(r); // warm-up
  let bestCpu = Infinity;
  let bestWall = Infinity;
  let findings = 0;
  for (let i = 0; i < rounds; i++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    findings = 0;
    for (const r of records) findings += scanText(r).length;
    bestWall = Math.min(bestWall, Number(process.hrtime.bigint() - t0) / 1e9);
    const c = process.cpuUsage(c0);
    bestCpu = Math.min(bestCpu, (c.user + c.system) / 1e6);
  }
  const mb = chars / 1e6; // ASCII text: characters ≈ bytes
  return { label, mb, cpuSeconds: bestCpu, mbPerSec: mb / bestCpu, wallMbPerSec: mb / bestWall, findings };
}

export function runThroughput(totalMb = 8): ThroughputResult[] {
  const total = totalMb * 1e6;
  return [
    measure('2 KiB records', typicalRecords(total, 2048)),
    measure('32 KiB records', typicalRecords(total, 32768)),
    measure('1 MiB records', typicalRecords(total, 1 << 20), 2),
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const r of runThroughput(Number(process.argv[2] ?? 8))) {
    console.log(
      `${r.label.padEnd(16)} ${r.mb.toFixed(1)} MB in ${r.cpuSeconds.toFixed(3)} CPU-s = ${r.mbPerSec.toFixed(1)} MB/s per core (wall ${r.wallMbPerSec.toFixed(1)} MB/s; ${r.findings} findings)`,
    );
  }
}
