// Records storage refused on their own (see storage/spool-files.ts insertIsolating): written durably to
// DATA_DIR/refused as NDJSON, one { atMs, error, record } per line, before their spool segment is removed.
// Records in the spool were already processed, so redacted text stays redacted here too.
import { hash } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RefusedRecord } from '../storage/spool-files.ts';
import type { SpanRecord, StoredRecord } from './record.ts';
import type { EnrichmentRecord, EnrichmentType } from './enrichment-records.ts';
import { checkNs } from '../storage/codec.ts';
import { partitionEnrichment } from '../storage/enrichment.ts';
import { encodeFrame, syncDir } from './spool.ts';

/**
 * Named after the spool segment the records were in plus a hash of the records: a retry after a crash (file
 * written, segment not yet removed) rewrites the same file instead of adding a second copy, while a later
 * segment that reuses the number (numbering restarts with an empty spool) gets a file of its own.
 */
export async function writeRefused(dir: string, segment: string, refused: RefusedRecord[]): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const atMs = Date.now();
  const digest = hash('sha256', JSON.stringify(refused.map((r) => r.record)), 'hex').slice(0, 16);
  const file = join(dir, `${segment}-${digest}.ndjson`);
  await writeWhole(file, refused.map((r) => JSON.stringify({ atMs, error: r.error, record: r.record })).join('\n') + '\n');
  return file;
}

/** Durably, under a temporary name first ('w': a crash may have left one), so a reader never sees a partial file. */
async function writeWhole(file: string, data: string | Buffer): Promise<void> {
  const fh = await open(`${file}.tmp`, 'w', 0o600);
  try {
    await fh.writeFile(data);
    await fh.datasync();
  } finally {
    await fh.close();
  }
  await rename(`${file}.tmp`, file);
  await syncDir(dirname(file));
}

export interface RefusedFile { name: string; records: number; firstError: string }

interface RefusedLine { line: number; row: { atMs?: unknown; error?: unknown; record?: unknown } }

/** A refused file's lines (blank ones skipped, numbered as in the file); throws naming the file and line it cannot read. */
async function readRefused(path: string): Promise<RefusedLine[]> {
  const out: RefusedLine[] = [];
  const lines = (await readFile(path, 'utf8')).split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.trim()) continue;
    let row: unknown;
    try {
      row = JSON.parse(lines[i]!);
    } catch (err) {
      throw new Error(`${path}:${i + 1}: not valid JSON (${(err as Error).message})`);
    }
    if (!isObject(row)) throw new Error(`${path}:${i + 1}: expected an object {"atMs","error","record"}, not ${kindOf(row)}`);
    out.push({ line: i + 1, row });
  }
  return out;
}

/** The files in DATA_DIR/refused, by name. */
export async function listRefused(dataDir: string): Promise<RefusedFile[]> {
  const dir = join(dataDir, 'refused');
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.ndjson')).sort();
  const out: RefusedFile[] = [];
  for (const name of names) {
    const lines = await readRefused(join(dir, name));
    out.push({ name, records: lines.length, firstError: lines.length ? String(lines[0]!.row.error ?? '') : '' });
  }
  return out;
}

// ---- what a record must be to go back into the spool ----

type FieldKind = 'string' | 'number' | 'boolean' | 'ns' | 'attributes' | 'events' | 'strings' | 'numbers';
type Fields<T> = Record<Exclude<keyof T, 'recordType'>, FieldKind>;

/** Every field of a span (collector/record.ts), as the storage codecs read it. */
const SPAN_FIELDS = {
  workspaceId: 'string', traceId: 'string', spanId: 'string', parentSpanId: 'string', name: 'string', kind: 'string',
  source: 'string', startTimeNs: 'ns', endTimeNs: 'ns', durationMs: 'number', status: 'string', statusMessage: 'string',
  model: 'string', provider: 'string', prompt: 'string', response: 'string', promptTokens: 'number',
  completionTokens: 'number', totalTokens: 'number', costUsd: 'number', finishReason: 'string', actionName: 'string',
  environment: 'string', requestId: 'string', trainingPreferred: 'boolean', trainable: 'boolean',
  attributes: 'attributes', resourceAttributes: 'attributes', events: 'events', ingestedAtMs: 'number',
} as const satisfies Fields<SpanRecord>;

/** Every field of each enrichment record type (collector/enrichment-records.ts). */
const ENRICHMENT_FIELDS: { [T in EnrichmentType]: Fields<Extract<EnrichmentRecord, { recordType: T }>> } = {
  finding: {
    workspaceId: 'string', traceId: 'string', spanId: 'string', detector: 'string', rule: 'string', category: 'string',
    severity: 'string', field: 'string', start: 'number', end: 'number', preview: 'string', score: 'number',
    action: 'string', createdAtMs: 'number',
  },
  policy: {
    workspaceId: 'string', traceId: 'string', spanId: 'string', policyVersion: 'number', decision: 'string',
    reasons: 'string', createdAtMs: 'number',
  },
  audit: {
    workspaceId: 'string', chainId: 'string', seq: 'number', atMs: 'number', actor: 'string', action: 'string',
    route: 'string', outcome: 'string', accepted: 'number', rejected: 'number', details: 'string', prevHash: 'string',
    hash: 'string',
  },
  alert: {
    workspaceId: 'string', alertId: 'string', ruleId: 'string', kind: 'string', severity: 'string', message: 'string',
    traceId: 'string', value: 'number', threshold: 'number', windowStartMs: 'number', atMs: 'number', delivered: 'string',
  },
  verification: {
    workspaceId: 'string', traceId: 'string', spanIds: 'strings', spanVersions: 'numbers', contentHash: 'string',
    chainId: 'string', seq: 'number', prevHash: 'string', hash: 'string', createdAtMs: 'number',
  },
  checkpoint: {
    workspaceId: 'string', chainId: 'string', seq: 'number', headHash: 'string', keyId: 'string', signature: 'string',
    atMs: 'number',
  },
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const kindOf = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : `${typeof v} ${JSON.stringify(v)}`.slice(0, 60));

function fieldProblem(name: string, v: unknown, kind: FieldKind): string | null {
  switch (kind) {
    case 'string': case 'number': case 'boolean':
      return typeof v === kind ? null : `${name} is ${kindOf(v)}, not a ${kind}`;
    case 'ns':
      if (typeof v !== 'string') return `${name} is ${kindOf(v)}, not a decimal nanosecond string`;
      try { checkNs(v, name); return null; } catch (err) { return (err as Error).message; } // the storage codec's own check
    case 'attributes':
      return isObject(v) ? null : `${name} is ${kindOf(v)}, not an object`;
    case 'events':
      return Array.isArray(v) && v.every(isObject) ? null : `${name} is not an array of objects`;
    case 'strings': case 'numbers': {
      const t = kind === 'strings' ? 'string' : 'number';
      return Array.isArray(v) && v.every((x) => typeof x === t) ? null : `${name} is not an array of ${t}s`;
    }
  }
}

/** Why storage could not take this record (a span, or an enrichment record of a known type, every field present and of its type), or null. */
export function storedRecordProblem(record: unknown): string | null {
  if (!isObject(record)) return `the record is ${kindOf(record)}, not a span or an enrichment record`;
  let fields: Record<string, FieldKind>;
  if (record.recordType === undefined) fields = SPAN_FIELDS;
  else if (typeof record.recordType === 'string' && Object.hasOwn(ENRICHMENT_FIELDS, record.recordType)) fields = ENRICHMENT_FIELDS[record.recordType as EnrichmentType];
  else return `unknown recordType ${JSON.stringify(record.recordType)} (${Object.keys(ENRICHMENT_FIELDS).join(', ')}, or none for a span)`;
  const missing = Object.keys(fields).filter((name) => record[name] === undefined);
  const problems = missing.length ? [`missing ${missing.join(', ')}`] : [];
  for (const [name, kind] of Object.entries(fields)) {
    const p = record[name] === undefined ? null : fieldProblem(name, record[name], kind);
    if (p) problems.push(p);
  }
  if (!problems.length && record.recordType !== undefined) {
    try { partitionEnrichment([record as unknown as EnrichmentRecord]); } catch (err) { problems.push((err as Error).message); } // storage's normalization
  }
  return problems.length ? `${record.recordType === undefined ? 'span' : `${String(record.recordType)} record`}: ${problems.join('; ')}` : null;
}

/**
 * Move refused records back into the spool as a new segment, for the next start to replay (after the cause was
 * fixed). Only with the collector stopped: the caller holds the DATA_DIR lock. Records refused again return to
 * DATA_DIR/refused. The segment is durable before the refused file is deleted.
 *
 * Every record is checked first (storedRecordProblem): one that is not a record storage can take (an edit gone
 * wrong) would fail every flush of the next start. Then nothing is moved, and the error names each file, line and
 * problem.
 */
export async function requeueRefused(dataDir: string, names?: string[]): Promise<{ files: number; records: number }> {
  const dir = join(dataDir, 'refused');
  const spoolDir = join(dataDir, 'spool');
  const all = (await listRefused(dataDir)).map((f) => f.name);
  const chosen = names?.length ? [...new Set(names)] : all;
  for (const n of chosen) if (!all.includes(n)) throw new Error(`no refused file ${n} in ${dir}`);
  const files: Array<{ name: string; rows: StoredRecord[] }> = [];
  const problems: string[] = [];
  for (const name of chosen) {
    const path = join(dir, name);
    const rows: StoredRecord[] = [];
    for (const { line, row } of await readRefused(path)) {
      const p = row.record === undefined ? 'no "record" field' : storedRecordProblem(row.record);
      if (p) problems.push(`${path}:${line}: ${p}`);
      else rows.push(row.record as StoredRecord);
    }
    files.push({ name, rows });
  }
  if (problems.length) {
    const shown = problems.slice(0, 20).join('\n') + (problems.length > 20 ? `\n… and ${problems.length - 20} more` : '');
    throw new Error(`nothing requeued: ${problems.length} record${problems.length === 1 ? ' is' : 's are'} not valid (fix or remove ${problems.length === 1 ? 'it' : 'them'}, then run requeue again)\n${shown}`);
  }
  await mkdir(spoolDir, { recursive: true });
  let records = 0;
  for (const { name, rows } of files) {
    const segs = (await readdir(spoolDir)).filter((n) => /^\d+\.seg$/.test(n)).sort();
    const seq = segs.length ? Number(segs[segs.length - 1]!.slice(0, -4)) + 1 : 1;
    const seg = join(spoolDir, `${String(seq).padStart(12, '0')}.seg`);
    const frames: Buffer[] = [];
    for (let i = 0; i < rows.length; i += 1000) frames.push(encodeFrame(rows.slice(i, i + 1000)));
    await writeWhole(seg, Buffer.concat(frames));
    await unlink(join(dir, name));
    await syncDir(dir);
    records += rows.length;
  }
  return { files: chosen.length, records };
}
