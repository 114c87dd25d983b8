// What a trace read adds to its spans from elsewhere: the agent runtime's trace metadata (workflow name, session,
// metadata), the proxied call an agent's response span stands for (a link to that span, not a copy of its usage),
// and which guardrails tripped.
import { z } from 'zod';
import type { TraceMetaRecord } from '../../core/enrichment-records.ts';
import type { ProxyCall, Storage } from '../../core/ports/storage.ts';
import type { SpanRecord } from '../../core/record.ts';
import { isTripwire } from '../../processors/alerts.ts';
import type { ProxyCallMemory } from '../host/proxy-calls.ts';

export const linkSchema = z
  .object({
    traceId: z.string(),
    spanId: z.string(),
    model: z.string(),
    status: z.string(),
    prompt: z.string(),
    response: z.string(),
    promptTokens: z.number(),
    completionTokens: z.number(),
    totalTokens: z.number(),
    costUsd: z.number(),
  })
  .describe("The call tracegate's proxy recorded under this span's response id: its span (its usage is counted there)");
export type SpanLink = z.output<typeof linkSchema>;

const metadataSchema = z.record(z.string(), z.json()).nullable();
export const sessionFields = {
  session: z.string().nullable().describe("The agent runtime's group id: the conversation or session (null: none)"),
  metadata: metadataSchema.describe("The agent runtime's trace metadata (null: none)"),
};

export const workflowSchema = z
  .object({
    name: z.string(),
    organization: z.string().describe('OpenAI-Organization header of the export'),
    project: z.string().describe('OpenAI-Project header of the export'),
    source: z.string(),
    updatedAtMs: z.number(),
  })
  .nullable()
  .describe("The agent runtime's trace item (null: none arrived)");

export const guardrailMarkSchema = z.object({
  spanId: z.string(),
  name: z.string(),
  stage: z.string().nullable(),
  tripped: z.boolean(),
  executionFailed: z.boolean(),
});

/** Session and metadata of a trace metadata record, as reads show them. */
export function sessionOf(meta: TraceMetaRecord | undefined) {
  return {
    session: meta?.groupId ? meta.groupId : null,
    metadata: meta?.metadata ? (JSON.parse(meta.metadata) as Record<string, z.core.util.JSONType>) : null,
  };
}

export function workflowOf(meta: TraceMetaRecord | undefined): z.output<typeof workflowSchema> {
  if (!meta) return null;
  const { workflowName: name, organization, project, source, updatedAtMs } = meta;
  return { name, organization, project, source, updatedAtMs };
}

/** The response id an agents response span carries ('' for other spans). */
const responseIdOf = (s: SpanRecord) =>
  s.source === 'agents' && s.attributes['agents.span_type'] === 'response' ? s.requestId : '';

/**
 * The proxied call of each agents response span among `spans` whose response id the proxy recorded for this workspace,
 * by span id. Runs inside the route's read (its deadline).
 */
export async function proxiedLinks(
  storage: Pick<Storage, 'getSpans' | 'getTraces' | 'traceSizes'>,
  calls: ProxyCallMemory,
  workspaceId: string,
  spans: readonly SpanRecord[],
): Promise<Map<string, SpanLink>> {
  const out = new Map<string, SpanLink>();
  const ids = [...new Set(spans.map(responseIdOf).filter(Boolean))];
  if (ids.length === 0) return out;
  const found = await calls.find(
    workspaceId,
    ids.map((id) => ({ kind: 'response' as const, id })),
    (work) => work(),
  );
  const proxySpans = await spansOfCalls(storage, workspaceId, [...found.values()]);
  for (const s of spans) {
    const call = found.get(`response:${responseIdOf(s)}`);
    const p = call && proxySpans.get(`${call.traceId}:${call.spanId}`);
    if (!p) continue;
    out.set(s.spanId, {
      traceId: p.traceId,
      spanId: p.spanId,
      model: p.model,
      status: p.status,
      prompt: p.prompt,
      response: p.response,
      promptTokens: p.promptTokens,
      completionTokens: p.completionTokens,
      totalTokens: p.totalTokens,
      costUsd: p.costUsd,
    });
  }
  return out;
}

/** A proxy trace of at most this many spans is read whole, with the others, in one query. */
const SMALL_TRACE = 16;

/**
 * The proxy spans of these calls, by `trace:span`. A call the proxy made on its own is a trace of one span: those are
 * read together (getTraces); a call joined to a larger trace (traceparent) has its span read alone.
 */
async function spansOfCalls(
  storage: Pick<Storage, 'getSpans' | 'getTraces' | 'traceSizes'>,
  workspaceId: string,
  calls: readonly ProxyCall[],
): Promise<Map<string, SpanRecord>> {
  const out = new Map<string, SpanRecord>();
  if (calls.length === 0) return out;
  const wanted = new Set(calls.map((c) => `${c.traceId}:${c.spanId}`));
  const sizes = await storage.traceSizes(workspaceId, [...new Set(calls.map((c) => c.traceId))]);
  const small = [...sizes].filter(([, s]) => s.spans <= SMALL_TRACE).map(([t]) => t);
  const keep = (s: SpanRecord) => {
    if (wanted.has(`${s.traceId}:${s.spanId}`)) out.set(`${s.traceId}:${s.spanId}`, s);
  };
  if (small.length) for (const spans of (await storage.getTraces(workspaceId, small)).values()) spans.forEach(keep);
  for (const c of calls)
    if (!small.includes(c.traceId) && sizes.has(c.traceId))
      (await storage.getSpans(workspaceId, c.traceId, [c.spanId])).forEach(keep);
  return out;
}

/** The guardrail spans among `spans`, and whether each tripped. */
export function guardrailMarks(spans: readonly SpanRecord[]): Array<z.output<typeof guardrailMarkSchema>> {
  return spans
    .filter((s) => s.kind === 'guardrail')
    .map((s) => {
      const a = s.attributes;
      return {
        spanId: s.spanId,
        name: typeof a['guardrail.name'] === 'string' ? a['guardrail.name'] : s.name,
        stage: typeof a['guardrail.stage'] === 'string' ? a['guardrail.stage'] : null,
        tripped: isTripwire(s),
        executionFailed: a['guardrail.execution_failed'] === true,
      };
    });
}
