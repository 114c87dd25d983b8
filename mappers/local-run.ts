// A local workbench run (POST /api/local/run: agent run, agent chat, coach) → one span record. Pure.
// Spec (Resources): parameters.source agent_lab for runs and chat, coach for coach; cost 0 (a locally hosted model);
// model, prompt (a chat's turns kept as messages), response, tokens and latency from the local model; actionName as
// given (coach: coach_local_draft, and coach_curated for the curated answer, preferred for training).
import { randomBytes } from 'node:crypto';
import { type AttrValue, emptySpan, isTrainable, msToNs, type SpanRecord } from '../core/record.ts';

export const COACH_DRAFT = 'coach_local_draft';
export const COACH_CURATED = 'coach_curated';

export interface RunTurn {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** A run as the route saw it: what was asked, what the local model answered, how it ended. */
export interface LocalRun {
  traceId: string;
  /** The request's X-Request-Id. */
  requestId: string;
  source: 'agent_lab' | 'coach';
  actionName: string;
  /** The model as the server named it in its answer, else as asked for. */
  model: string;
  /** The local model server's protocol: ollama, or openai (llama-server, LM Studio, vLLM). */
  api: 'ollama' | 'openai';
  /** The agent's system prompt, when given. */
  instructions?: string;
  /** The turns sent to the model after the instructions: the prompt as one user turn, or the chat's turns. */
  turns: RunTurn[];
  output: string;
  promptTokens: number;
  completionTokens: number;
  finishReason: string;
  latencyMs: number;
  /** When the answer ended (ms since the epoch). */
  endMs: number;
  status: 'completed' | 'error' | 'cancelled';
  statusMessage: string;
  /** The request's parameters as given (coachSessionId, trainingPreferred, curate, …). */
  parameters: Record<string, AttrValue>;
  trainingPreferred: boolean;
  generation: { maxTokens?: number; temperature?: number };
  /** More attributes (a curated answer names its draft). */
  extra?: Record<string, AttrValue>;
}

export const newTraceId = (): string => randomBytes(16).toString('hex');

/** The prompt as text: the instructions, then each turn as `role: text` (as the OTLP mapper writes messages). */
export function promptText(instructions: string | undefined, turns: readonly RunTurn[]): string {
  const lines = instructions ? [`system: ${instructions}`] : [];
  for (const t of turns) if (t.content !== '') lines.push(`${t.role}: ${t.content}`);
  return lines.join('\n');
}

export function mapLocalRun(run: LocalRun, workspaceId: string): SpanRecord {
  const r = emptySpan(workspaceId, run.source);
  r.traceId = run.traceId;
  r.spanId = randomBytes(8).toString('hex');
  r.requestId = run.requestId;
  r.name = run.actionName || 'local_run';
  r.kind = 'llm';
  r.endTimeNs = msToNs(run.endMs);
  r.startTimeNs = msToNs(run.endMs - run.latencyMs);
  r.durationMs = run.latencyMs;
  r.status = run.status;
  r.statusMessage = run.statusMessage;
  r.model = run.model;
  r.provider = run.api === 'ollama' ? 'ollama' : 'local'; // both priced at 0 (processors/cost.ts LOCAL_PROVIDERS)
  r.prompt = promptText(run.instructions, run.turns);
  r.response = run.output;
  r.promptTokens = run.promptTokens;
  r.completionTokens = run.completionTokens;
  r.totalTokens = run.promptTokens + run.completionTokens;
  r.costUsd = 0;
  r.finishReason = run.finishReason;
  r.actionName = run.actionName;
  r.trainingPreferred = run.trainingPreferred;
  r.trainable = isTrainable(r);
  r.ingestedAtMs = run.endMs;
  const generation: Record<string, AttrValue> = {};
  if (run.generation.maxTokens !== undefined) generation.maxTokens = run.generation.maxTokens;
  if (run.generation.temperature !== undefined) generation.temperature = run.generation.temperature;
  r.attributes = {
    parameters: { ...run.parameters, source: run.source },
    messages: run.turns.map((t) => ({ role: t.role, content: t.content })),
    ...(run.instructions !== undefined ? { instructions: run.instructions } : {}),
    ...(Object.keys(generation).length ? { 'local_model.generation': generation } : {}),
    'local_model.api': run.api,
    'tracegate.cost_source': 'local',
    ...run.extra,
  };
  return r;
}
