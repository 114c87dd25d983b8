// Replace finding spans with `[REDACTED:category]`, merging overlaps.
import { SEVERITY_RANK, type Finding } from './types.ts';

type Span = Pick<Finding, 'start' | 'end' | 'category' | 'severity'>;

/**
 * Each maximal group of overlapping spans becomes one marker, labelled with the category of its most severe
 * finding (the longest on a tie). Touching spans stay separate. Spans outside the text are clamped or dropped.
 */
export function redact(text: string, findings: readonly Span[]): string {
  const spans = findings
    .map((f) => ({ ...f, start: Math.max(0, f.start), end: Math.min(text.length, f.end) }))
    .filter((f) => f.end > f.start)
    .sort((a, b) => a.start - b.start || b.end - a.end);
  if (spans.length === 0) return text;
  let out = '';
  let cursor = 0;
  let i = 0;
  while (i < spans.length) {
    let group = spans[i]!;
    let end = group.end;
    let j = i + 1;
    while (j < spans.length && spans[j]!.start < end) {
      const s = spans[j]!;
      end = Math.max(end, s.end);
      const better =
        SEVERITY_RANK[s.severity] - SEVERITY_RANK[group.severity] || s.end - s.start - (group.end - group.start);
      if (better > 0) group = s;
      j++;
    }
    out += text.slice(cursor, spans[i]!.start) + `[REDACTED:${group.category}]`;
    cursor = end;
    i = j;
  }
  return out + text.slice(cursor);
}

/**
 * A copy of `obj` with the keys in `renames` (old → new) renamed, key order kept. A new name that another key
 * already has, or that an earlier rename took, is numbered ('[REDACTED:email] (2)'): a redacted key never
 * overwrites another value.
 */
export function renameKeys<T>(
  obj: Readonly<Record<string, T>>,
  renames: ReadonlyMap<string, string>,
): Record<string, T> {
  const keys = Object.keys(obj);
  const taken = new Set(keys.filter((k) => !renames.has(k)));
  const out: Record<string, T> = {};
  for (const k of keys) {
    const to = renames.get(k);
    let name = k;
    if (to !== undefined) {
      name = to;
      for (let n = 2; taken.has(name); n++) name = `${to} (${n})`;
      taken.add(name);
    }
    out[name] = obj[k]!;
  }
  return out;
}
