// Shapes a stored trace for GET /api/traces/:traceId: flat spans, the span tree, and a roll-up.
import { USAGE_KINDS, type SpanRecord } from './record.ts';
import { roundSum } from '../storage/codec.ts';

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
  // Parents that form a cycle (A under B under A) reach no root: cut each cycle at its earliest span.
  const seen = new Set<TreeNode>();
  const mark = (n: TreeNode) => { const stack = [n]; while (stack.length) { const x = stack.pop()!; if (!seen.has(x)) { seen.add(x); for (const c of x.children) stack.push(c); } } };
  roots.forEach(mark);
  for (const s of spans) {
    const node = nodes.get(s.spanId)!;
    if (seen.has(node)) continue;
    const parent = nodes.get(s.parentSpanId);
    if (parent) parent.children = parent.children.filter((c) => c !== node);
    roots.push(node);
    mark(node);
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

/** The order the list query picks "first" spans in: no parent first, then earliest start, then lowest span id. */
function listOrder(a: SpanRecord, b: SpanRecord): number {
  const pa = a.parentSpanId !== '' ? 1 : 0, pb = b.parentSpanId !== '' ? 1 : 0;
  if (pa !== pb) return pa - pb;
  const sa = BigInt(a.startTimeNs), sb = BigInt(b.startTimeNs);
  if (sa !== sb) return sa < sb ? -1 : 1;
  return a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0;
}

/**
 * Tokens and cost of a trace. Agent and chain spans (an agent invocation, Vercel's generateText around its
 * doGenerate steps) report the sum of the model calls under them, so adding every span counts those calls twice:
 * the trace's usage is the sum over its model-call spans (llm, embedding). A trace with none takes the largest
 * wrapper figure, the outermost aggregate. GET /api/traces computes the same in storage (fromAggRow).
 */
function usageRollup(spans: SpanRecord[]) {
  const calls = spans.filter((s) => USAGE_KINDS.has(s.kind));
  const pick = (f: (s: SpanRecord) => number) => (calls.length ? calls.reduce((t, s) => t + f(s), 0) : spans.reduce((m, s) => Math.max(m, f(s)), 0));
  return {
    promptTokens: pick((s) => s.promptTokens), completionTokens: pick((s) => s.completionTokens),
    totalTokens: pick((s) => s.totalTokens), costUsd: pick((s) => s.costUsd),
  };
}

export function summarize(spans: SpanRecord[]) {
  if (spans.length === 0) return null;
  const d = depths(spans);
  const byStart = [...spans].sort((a, b) => (d.get(a.spanId)! - d.get(b.spanId)!) || (BigInt(a.startTimeNs) < BigInt(b.startTimeNs) ? -1 : 1));
  // The root the list shows too: no parent first, then earliest start (an orphan never outranks a real root).
  const root = [...spans].sort(listOrder)[0]!;
  const llm = byStart.find((s) => s.kind === 'llm' && (s.prompt || s.response)) ?? byStart.find((s) => s.kind === 'llm');
  // The model shown is the list's: of the first LLM span in list order (the root's when there is none).
  const firstLlm = spans.filter((s) => s.kind === 'llm').sort(listOrder)[0];
  let start = BigInt(spans[0]!.startTimeNs);
  let end = BigInt(spans[0]!.endTimeNs);
  let errors = 0;
  for (const s of spans) {
    const a = BigInt(s.startTimeNs), b = BigInt(s.endTimeNs);
    if (a < start) start = a;
    if (b > end) end = b;
    if (s.status === 'error') errors++;
  }
  const { promptTokens, completionTokens, totalTokens, costUsd } = usageRollup(spans);
  return {
    name: root.name,
    status: errors ? 'error' : root.status,
    startTimeNs: start.toString(),
    endTimeNs: end.toString(),
    durationMs: end > start ? Number(end - start) / 1e6 : 0,
    spanCount: spans.length,
    errorCount: errors,
    model: firstLlm?.model ?? root.model,
    provider: firstLlm?.provider ?? root.provider,
    prompt: llm?.prompt ?? root.prompt,
    response: llm?.response ?? root.response,
    promptTokens, completionTokens, totalTokens,
    costUsd: roundSum(costUsd),
    // The root's, as the list shows (a child's action would make the two disagree).
    actionName: root.actionName,
    environment: root.environment,
    source: root.source,
  };
}
