// Reads keep only the findings and policy decisions of the span versions stored. A span delivered again with other
// content keeps its earlier versions' records in storage (ClickHouse cannot delete them cheaply), each stamped with
// its version's ingestion time, earlier than the stored version's.
import { CLEAN_POLICY_ATTRIBUTE, type FindingRecord, type PolicyRecord } from '../../core/enrichment-records.ts';
import type { SpanRecord } from '../../core/record.ts';
import type { FindingQuery, Page, SpanVersion, Storage } from '../../core/ports/storage.ts';
import { findingCursor } from '../../storage/enrichment.ts';

const keyOf = (s: { traceId: string; spanId: string }) => `${s.traceId}\u0000${s.spanId}`;

/**
 * The records of the stored versions of `spans` (each span's newest ingestedAtMs). A record whose span is not among
 * them is kept (not stored yet, or refused): nothing says it is outdated.
 */
export function ofStoredVersion<T extends { traceId: string; spanId: string; createdAtMs: number }>(
  records: readonly T[],
  spans: readonly SpanVersion[],
): T[] {
  const version = new Map(spans.map((s) => [keyOf(s), s.ingestedAtMs]));
  return records.filter((r) => r.createdAtMs >= (version.get(keyOf(r)) ?? 0));
}

/**
 * The policy decision of each stored span of `spans`: its policy record of the stored version, or, for a span allowed
 * with nothing to report (no record, CLEAN_POLICY_ATTRIBUTE set), an `allow` with no reasons. In record order: by
 * time, then span id.
 */
export function storedPolicy(records: readonly PolicyRecord[], spans: readonly SpanRecord[]): PolicyRecord[] {
  // A delivery gets the attribute or a record, never both: a stored span carrying the attribute was allowed clean,
  // and a record stamped with its very version came from another delivery in the same millisecond, which lost.
  const clean = spans.filter((s) => typeof s.attributes[CLEAN_POLICY_ATTRIBUTE] === 'number');
  const cleanKeys = new Set(clean.map(keyOf));
  const out = ofStoredVersion(records, spans).filter((r) => !cleanKeys.has(keyOf(r)));
  for (const s of clean) {
    const version = s.attributes[CLEAN_POLICY_ATTRIBUTE] as number;
    out.push({
      recordType: 'policy',
      workspaceId: s.workspaceId,
      traceId: s.traceId,
      spanId: s.spanId,
      policyVersion: version,
      decision: 'allow',
      reasons: '[]',
      createdAtMs: s.ingestedAtMs,
    });
  }
  return out.sort((a, b) => a.createdAtMs - b.createdAtMs || (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0));
}

/** Storage pages read for one answer at most; past them a page may be short (even empty), its nextCursor going on. */
export const MAX_FINDING_READS = 4;

/**
 * A page of findings of stored span versions: each storage page's spans are looked up in one query, and the pages
 * after it are read while findings were dropped and the answer is not full. The cursor is the last finding answered
 * (or the last one read, when the reads run out), so the next page neither repeats nor skips one.
 */
export async function listStoredFindings(
  storage: Pick<Storage, 'listFindings' | 'spanVersions'>,
  workspaceId: string,
  q: FindingQuery,
): Promise<Page<FindingRecord>> {
  const items: FindingRecord[] = [];
  let cursor = q.cursor;
  for (let read = 0; read < MAX_FINDING_READS; read++) {
    const page = await storage.listFindings(workspaceId, { ...q, cursor });
    const spans = new Map(page.items.map((f) => [keyOf(f), { traceId: f.traceId, spanId: f.spanId }]));
    const kept = spans.size
      ? ofStoredVersion(page.items, await storage.spanVersions(workspaceId, [...spans.values()]))
      : [];
    for (let i = 0; i < kept.length; i++) {
      items.push(kept[i]!);
      if (items.length < q.limit) continue;
      return { items, nextCursor: i === kept.length - 1 && page.nextCursor === null ? null : findingCursor(kept[i]!) };
    }
    if (page.nextCursor === null) return { items, nextCursor: null };
    cursor = page.nextCursor;
  }
  return { items, nextCursor: cursor ?? null };
}
