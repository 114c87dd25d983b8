// Shapes a stored trace for GET /api/traces/:traceId: flat spans, the span tree, and a roll-up.
import { USAGE_KINDS, type SpanRecord } from '../../core/record.ts';
import { roundSum } from '../../storage/codec.ts';
import { LOG_INDEX_ATTR, LOG_SIGNAL_ATTR } from '../../protocols/otlp/logs.ts';

export interface TreeNode {
  spanId: string;
  name: string;
  kind: string;
  children: TreeNode[];
}

const EVENT_ORDER: Record<string, number> = {
  'gen_ai.system.message': 0,
  'gen_ai.user.message': 1,
  'gen_ai.assistant.message': 2,
  'gen_ai.tool.message': 3,
  'gen_ai.choice': 4,
};
const isLogEvent = (s: SpanRecord) => s.attributes[LOG_SIGNAL_ATTR] === 'logs';
/** Nanosecond times (decimal strings, beyond 2^53) compared. */
const byNs = (x: string, y: string) => {
  const a = BigInt(x),
    b = BigInt(y);
  return a < b ? -1 : a > b ? 1 : 0;
};
const startOrder = (a: SpanRecord, b: SpanRecord) => byNs(a.startTimeNs, b.startTimeNs);

/**
 * The trace's spans as GET /api/traces/:id shows them: in start order (a parent before its children at the same
 * instant, then by span id), and a span whose prompt or response arrived as log records (GenAI events on the logs
 * signal, stored as event spans under it) shows their text, in event order.
 */
export function viewSpans(stored: SpanRecord[]): SpanRecord[] {
  const d = depths(stored);
  const spans = [...stored].sort(
    (a, b) =>
      startOrder(a, b) ||
      d.get(a.spanId)! - d.get(b.spanId)! ||
      (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0),
  );
  const events = new Map<string, SpanRecord[]>();
  for (const s of spans) {
    if (!isLogEvent(s) || (!s.prompt && !s.response)) continue;
    const list = events.get(s.parentSpanId);
    if (list) list.push(s);
    else events.set(s.parentSpanId, [s]);
  }
  if (events.size === 0) return spans;
  const rank = (s: SpanRecord) => EVENT_ORDER[s.name] ?? 5;
  const index = (s: SpanRecord) => {
    const i = s.attributes[LOG_INDEX_ATTR];
    return typeof i === 'number' ? i : 0;
  };
  // The events' text, unless the span's own says more: it may hold part of it (a Responses call's instructions).
  const pick = (own: string, events: string) =>
    events !== '' && (own === '' || (events !== own && events.includes(own))) ? events : own;
  return spans.map((s) => {
    const list = isLogEvent(s) ? undefined : events.get(s.spanId);
    if (!list) return s;
    // Same instant: the order the instrumentation sent them in (one request), else the conversation's roles.
    list.sort((a, b) => startOrder(a, b) || index(a) - index(b) || rank(a) - rank(b) || (a.spanId < b.spanId ? -1 : 1));
    const join = (f: (x: SpanRecord) => string) =>
      list
        .map(f)
        .filter((t) => t !== '')
        .join('\n');
    return {
      ...s,
      prompt: pick(
        s.prompt,
        join((x) => x.prompt),
      ),
      response: pick(
        s.response,
        join((x) => x.response),
      ),
      finishReason: s.finishReason || (list.find((x) => x.finishReason)?.finishReason ?? ''),
    };
  });
}

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
  const mark = (n: TreeNode) => {
    const stack = [n];
    while (stack.length) {
      const x = stack.pop()!;
      if (!seen.has(x)) {
        seen.add(x);
        for (const c of x.children) stack.push(c);
      }
    }
  };
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
  const pa = a.parentSpanId !== '' ? 1 : 0,
    pb = b.parentSpanId !== '' ? 1 : 0;
  if (pa !== pb) return pa - pb;
  const t = startOrder(a, b);
  if (t !== 0) return t;
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
  const pick = (f: (s: SpanRecord) => number) =>
    calls.length ? calls.reduce((t, s) => t + f(s), 0) : spans.reduce((m, s) => Math.max(m, f(s)), 0);
  return {
    promptTokens: pick((s) => s.promptTokens),
    completionTokens: pick((s) => s.completionTokens),
    totalTokens: pick((s) => s.totalTokens),
    costUsd: pick((s) => s.costUsd),
  };
}

export function summarize(spans: SpanRecord[]) {
  if (spans.length === 0) return null;
  const d = depths(spans);
  const byStart = [...spans].sort((a, b) => d.get(a.spanId)! - d.get(b.spanId)! || startOrder(a, b));
  // The root the list shows too: no parent first, then earliest start (an orphan never outranks a real root).
  const root = [...spans].sort(listOrder)[0]!;
  const llm =
    byStart.find((s) => s.kind === 'llm' && (s.prompt || s.response)) ?? byStart.find((s) => s.kind === 'llm');
  // A tool loop's first model call answers with tool calls only (no text): the answer the trace gave is the last
  // model call's text, or the root's (an agent span carrying the final output).
  const lastAnswer = () =>
    [...spans]
      .filter((s) => s.kind === 'llm' && s.response)
      .sort((a, b) => byNs(a.endTimeNs, b.endTimeNs))
      .at(-1)?.response;
  // The model shown is the list's: of the first LLM span in list order (the root's when there is none).
  const firstLlm = spans.filter((s) => s.kind === 'llm').sort(listOrder)[0];
  let start = BigInt(spans[0]!.startTimeNs);
  let end = BigInt(spans[0]!.endTimeNs);
  let errors = 0;
  for (const s of spans) {
    const a = BigInt(s.startTimeNs),
      b = BigInt(s.endTimeNs);
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
    prompt: llm?.prompt || root.prompt,
    response: llm?.response || root.response || lastAnswer() || '',
    promptTokens,
    completionTokens,
    totalTokens,
    costUsd: roundSum(costUsd),
    // The root's, as the list shows (a child's action would make the two disagree).
    actionName: root.actionName,
    environment: root.environment,
    source: root.source,
  };
}
