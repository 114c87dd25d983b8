// Shapes a stored trace for GET /api/traces/:traceId: flat spans, the span tree, and a roll-up.
import type { SpanRecord } from './record.ts';

export interface TreeNode { spanId: string; name: string; kind: string; children: TreeNode[] }

export function publicSpan(s: SpanRecord) {
  const { workspaceId: _ws, ...rest } = s;
  return rest;
}

export function spanTree(spans: SpanRecord[]): TreeNode[] {
  const nodes = new Map<string, TreeNode>();
  for (const s of spans) nodes.set(s.spanId, { spanId: s.spanId, name: s.name, kind: s.kind, children: [] });
  const roots: TreeNode[] = [];
  for (const s of spans) {
    const node = nodes.get(s.spanId)!;
    const parent = s.parentSpanId && s.parentSpanId !== s.spanId ? nodes.get(s.parentSpanId) : undefined;
    // A span whose parent never arrived is shown as a root rather than hidden.
    (parent ? parent.children : roots).push(node);
  }
  return roots;
}

/** Depth of each span from its root (orphans count as roots). */
function depths(spans: SpanRecord[]): Map<string, number> {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const out = new Map<string, number>();
  const depthOf = (s: SpanRecord, guard = 0): number => {
    const known = out.get(s.spanId);
    if (known !== undefined) return known;
    const parent = byId.get(s.parentSpanId);
    const d = parent && guard < 1000 ? depthOf(parent, guard + 1) + 1 : 0;
    out.set(s.spanId, d);
    return d;
  };
  for (const s of spans) depthOf(s);
  return out;
}

export function summarize(spans: SpanRecord[]) {
  if (spans.length === 0) return null;
  const d = depths(spans);
  const byStart = [...spans].sort((a, b) => (d.get(a.spanId)! - d.get(b.spanId)!) || (BigInt(a.startTimeNs) < BigInt(b.startTimeNs) ? -1 : 1));
  const root = byStart[0]!;
  const llm = byStart.find((s) => s.kind === 'llm' && (s.prompt || s.response)) ?? byStart.find((s) => s.kind === 'llm');
  let start = BigInt(spans[0]!.startTimeNs);
  let end = BigInt(spans[0]!.endTimeNs);
  let promptTokens = 0, completionTokens = 0, totalTokens = 0, costUsd = 0, errors = 0;
  for (const s of spans) {
    const a = BigInt(s.startTimeNs), b = BigInt(s.endTimeNs);
    if (a < start) start = a;
    if (b > end) end = b;
    promptTokens += s.promptTokens;
    completionTokens += s.completionTokens;
    totalTokens += s.totalTokens;
    costUsd += s.costUsd;
    if (s.status === 'error') errors++;
  }
  return {
    name: root.name,
    status: errors ? 'error' : root.status,
    startTimeNs: start.toString(),
    endTimeNs: end.toString(),
    durationMs: end > start ? Number(end - start) / 1e6 : 0,
    spanCount: spans.length,
    errorCount: errors,
    model: llm?.model ?? root.model,
    provider: llm?.provider ?? root.provider,
    prompt: llm?.prompt ?? root.prompt,
    response: llm?.response ?? root.response,
    promptTokens, completionTokens, totalTokens,
    costUsd: Math.round(costUsd * 1e9) / 1e9,
    actionName: root.actionName || (llm?.actionName ?? ''),
    environment: root.environment || (llm?.environment ?? ''),
    source: root.source,
  };
}
