// Records storage refused on their own (see storage/spool-files.ts insertIsolating): written durably to
// DATA_DIR/refused as NDJSON, one { atMs, error, record } per line, before their spool segment is removed.
// Records in the spool were already processed, so redacted text stays redacted here too.
import { hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { RefusedRecord } from '../storage/spool-files.ts';
import type { SpanRecord, StoredRecord } from '../core/record.ts';
import type { EnrichmentRecord, EnrichmentType } from '../core/enrichment-records.ts';
import { checkNs } from '../storage/codec.ts';
import { partitionEnrichment } from '../storage/enrichment.ts';
import { encodeFrame } from '../spool/spool.ts';

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
  await writeWhole(
    file,
    refused.map((r) => JSON.stringify({ atMs, error: r.error, record: r.record })).join('\n') + '\n',
  );
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

export interface RefusedFile {
  name: string;
  records: number;
  firstError: string;
}

interface RefusedLine {
  line: number;
  row: { atMs?: unknown; error?: unknown; record?: unknown };
}

/**
 * A refused file's lines, read one at a time (a file may hold more than one string can),
 * blank ones skipped, numbered as in the file; throws naming the file and line it cannot read.
 */
async function* readRefused(path: string): AsyncGenerator<RefusedLine> {
  const input = createReadStream(path, { encoding: 'utf8' });
  const lines = createInterface({ input, crlfDelay: Infinity });
  try {
    let line = 0;
    for await (const text of lines) {
      line++;
      if (!text.trim()) continue;
      let row: unknown;
      try {
        row = JSON.parse(text);
      } catch (err) {
        throw new Error(`${path}:${line}: not valid JSON (${(err as Error).message})`);
      }
      if (!isObject(row))
        throw new Error(`${path}:${line}: expected an object {"atMs","error","record"}, not ${kindOf(row)}`);
      yield { line, row };
    }
  } finally {
    lines.close();
    input.destroy();
  }
}

/** The files in DATA_DIR/refused, by name. */
export async function listRefused(dataDir: string): Promise<RefusedFile[]> {
  const dir = join(dataDir, 'refused');
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.ndjson')).sort();
  const out: RefusedFile[] = [];
  for (const name of names) {
    let records = 0;
    let firstError = '';
    for await (const { row } of readRefused(join(dir, name))) {
      if (records++ === 0) firstError = String(row.error ?? '');
    }
    out.push({ name, records, firstError });
  }
  return out;
}

// ---- what a record must be to go back into the spool ----

type FieldKind = 'string' | 'number' | 'boolean' | 'ns' | 'attributes' | 'events' | 'strings' | 'numbers';
type Fields<T> = Record<Exclude<keyof T, 'recordType'>, FieldKind>;

/** Every field of a span (core/record.ts), as the storage codecs read it. */
const SPAN_FIELDS = {
  workspaceId: 'string',
  traceId: 'string',
  spanId: 'string',
  parentSpanId: 'string',
  name: 'string',
  kind: 'string',
  source: 'string',
  startTimeNs: 'ns',
  endTimeNs: 'ns',
  durationMs: 'number',
  status: 'string',
  statusMessage: 'string',
  model: 'string',
  provider: 'string',
  prompt: 'string',
  response: 'string',
  promptTokens: 'number',
  completionTokens: 'number',
  totalTokens: 'number',
  costUsd: 'number',
  finishReason: 'string',
  actionName: 'string',
  environment: 'string',
  requestId: 'string',
  trainingPreferred: 'boolean',
  trainable: 'boolean',
  attributes: 'attributes',
  resourceAttributes: 'attributes',
  events: 'events',
  ingestedAtMs: 'number',
} as const satisfies Fields<SpanRecord>;

/** Every field of each enrichment record type (core/enrichment-records.ts). */
const ENRICHMENT_FIELDS: { [T in EnrichmentType]: Fields<Extract<EnrichmentRecord, { recordType: T }>> } = {
  finding: {
    workspaceId: 'string',
    traceId: 'string',
    spanId: 'string',
    detector: 'string',
    rule: 'string',
    category: 'string',
    severity: 'string',
    field: 'string',
    start: 'number',
    end: 'number',
    preview: 'string',
    score: 'number',
    action: 'string',
    createdAtMs: 'number',
  },
  policy: {
    workspaceId: 'string',
    traceId: 'string',
    spanId: 'string',
    policyVersion: 'number',
    decision: 'string',
    reasons: 'string',
    createdAtMs: 'number',
  },
  audit: {
    workspaceId: 'string',
    chainId: 'string',
    seq: 'number',
    atMs: 'number',
    actor: 'string',
    action: 'string',
    route: 'string',
    outcome: 'string',
    accepted: 'number',
    rejected: 'number',
    details: 'string',
    prevHash: 'string',
    hash: 'string',
  },
  alert: {
    workspaceId: 'string',
    alertId: 'string',
    ruleId: 'string',
    kind: 'string',
    severity: 'string',
    message: 'string',
    traceId: 'string',
    value: 'number',
    threshold: 'number',
    windowStartMs: 'number',
    atMs: 'number',
    delivered: 'string',
  },
  verification: {
    workspaceId: 'string',
    traceId: 'string',
    spanIds: 'strings',
    spanVersions: 'numbers',
    contentHash: 'string',
    chainId: 'string',
    seq: 'number',
    prevHash: 'string',
    hash: 'string',
    createdAtMs: 'number',
  },
  checkpoint: {
    workspaceId: 'string',
    chainId: 'string',
    seq: 'number',
    headHash: 'string',
    keyId: 'string',
    signature: 'string',
    atMs: 'number',
  },
  feedback: {
    workspaceId: 'string',
    voteKey: 'string',
    voteId: 'string',
    traceId: 'string',
    targetType: 'string',
    targetId: 'string',
    name: 'string',
    value: 'string',
    retracted: 'boolean',
    comment: 'string',
    userId: 'string',
    source: 'string',
    metadata: 'string',
    votedAtMs: 'number',
    receivedAtMs: 'number',
  },
  security_alert: {
    workspaceId: 'string',
    alertId: 'string',
    source: 'string',
    severity: 'string',
    rawSeverity: 'string',
    title: 'string',
    category: 'string',
    externalId: 'string',
    detectedAtMs: 'number',
    receivedAtMs: 'number',
    traceId: 'string',
    spanId: 'string',
    requestId: 'string',
    responseId: 'string',
    sessionId: 'string',
    userId: 'string',
    signature: 'string',
    secretId: 'string',
    correlation: 'string',
    body: 'string',
  },
  trace_meta: {
    workspaceId: 'string',
    traceId: 'string',
    workflowName: 'string',
    groupId: 'string',
    metadata: 'string',
    organization: 'string',
    project: 'string',
    source: 'string',
    updatedAtMs: 'number',
  },
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const kindOf = (v: unknown) =>
  v === null
    ? 'null'
    : Array.isArray(v)
      ? 'an array'
      : typeof v === 'object'
        ? 'an object'
        : `${typeof v} ${JSON.stringify(v)}`.slice(0, 60);

function fieldProblem(name: string, v: unknown, kind: FieldKind): string | null {
  switch (kind) {
    case 'string':
    case 'number':
    case 'boolean':
      return typeof v === kind ? null : `${name} is ${kindOf(v)}, not a ${kind}`;
    case 'ns':
      if (typeof v !== 'string') return `${name} is ${kindOf(v)}, not a decimal nanosecond string`;
      try {
        checkNs(v, name);
        return null;
      } catch (err) {
        return (err as Error).message;
      } // the storage codec's own check
    case 'attributes':
      return isObject(v) ? null : `${name} is ${kindOf(v)}, not an object`;
    case 'events':
      return Array.isArray(v) && v.every(isObject) ? null : `${name} is not an array of objects`;
    case 'strings':
    case 'numbers': {
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
  else if (typeof record.recordType === 'string' && Object.hasOwn(ENRICHMENT_FIELDS, record.recordType))
    fields = ENRICHMENT_FIELDS[record.recordType as EnrichmentType];
  else
    return `unknown recordType ${JSON.stringify(record.recordType)} (${Object.keys(ENRICHMENT_FIELDS).join(', ')}, or none for a span)`;
  const missing = Object.keys(fields).filter((name) => record[name] === undefined);
  const problems = missing.length ? [`missing ${missing.join(', ')}`] : [];
  for (const [name, kind] of Object.entries(fields)) {
    const p = record[name] === undefined ? null : fieldProblem(name, record[name], kind);
    if (p) problems.push(p);
  }
  if (!problems.length && record.recordType !== undefined) {
    try {
      partitionEnrichment([record as unknown as EnrichmentRecord]);
    } catch (err) {
      problems.push((err as Error).message);
    } // storage's normalization
  }
  return problems.length
    ? `${record.recordType === undefined ? 'span' : `${String(record.recordType)} record`}: ${problems.join('; ')}`
    : null;
}

/** Requeued records go to spool segments of about this size: the spool's replay reads a segment whole. */
const REQUEUE_SEGMENT_BYTES = 64 * 1024 * 1024;

/**
 * Move refused records back into the spool as new segments, for the next start to replay (after the cause was
 * fixed). Only with the collector stopped: the caller holds the DATA_DIR lock. Records refused again return to
 * DATA_DIR/refused. Its segments are durable before the refused file is deleted (a crash in between requeues the
 * file again on the next run; the replay collapses what was stored twice).
 *
 * Every record is checked first (storedRecordProblem): one that is not a record storage can take (an edit gone
 * wrong) would fail every flush of the next start. Then nothing is moved, and the error names each file, line and
 * problem.
 */
export async function requeueRefused(
  dataDir: string,
  names?: string[],
  segmentBytes = REQUEUE_SEGMENT_BYTES,
): Promise<{ files: number; records: number }> {
  const dir = join(dataDir, 'refused');
  const spoolDir = join(dataDir, 'spool');
  const all = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.ndjson')).sort();
  const chosen = names?.length ? [...new Set(names)] : all;
  for (const n of chosen) if (!all.includes(n)) throw new Error(`no refused file ${n} in ${dir}`);
  // Checked whole first, a line at a time: records are kept only while their file is written to the spool.
  const shown: string[] = [];
  let invalid = 0;
  for (const name of chosen) {
    const path = join(dir, name);
    for await (const { line, row } of readRefused(path)) {
      const p = row.record === undefined ? 'no "record" field' : storedRecordProblem(row.record);
      if (p && invalid++ < 20) shown.push(`${path}:${line}: ${p}`);
    }
  }
  if (invalid) {
    const list = shown.join('\n') + (invalid > 20 ? `\n… and ${invalid - 20} more` : '');
    throw new Error(
      `nothing requeued: ${invalid} record${invalid === 1 ? ' is' : 's are'} not valid (fix or remove ${invalid === 1 ? 'it' : 'them'}, then run requeue again)\n${list}`,
    );
  }
  await mkdir(spoolDir, { recursive: true });
  let records = 0;
  for (const name of chosen) {
    let frames: Buffer[] = [];
    let bytes = 0;
    let batch: StoredRecord[] = [];
    const endFrame = () => {
      if (!batch.length) return;
      frames.push(encodeFrame(batch));
      bytes += frames.at(-1)!.length;
      batch = [];
    };
    const endSegment = async () => {
      endFrame();
      if (!frames.length) return;
      await writeWhole(await nextSegment(spoolDir), Buffer.concat(frames));
      frames = [];
      bytes = 0;
    };
    for await (const { row } of readRefused(join(dir, name))) {
      batch.push(row.record as StoredRecord);
      records++;
      if (batch.length === 1000) endFrame();
      if (bytes >= segmentBytes) await endSegment();
    }
    await endSegment();
    await unlink(join(dir, name));
    await syncDir(dir);
  }
  return { files: chosen.length, records };
}

/** The path of a new spool segment after the last one. */
async function nextSegment(spoolDir: string): Promise<string> {
  const segs = (await readdir(spoolDir)).filter((n) => /^\d+\.seg$/.test(n)).sort();
  const seq = segs.length ? Number(segs[segs.length - 1]!.slice(0, -4)) + 1 : 1;
  return join(spoolDir, `${String(seq).padStart(12, '0')}.seg`);
}

/** A directory's new entries, durable (a renamed or new file survives a power loss). */
async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
