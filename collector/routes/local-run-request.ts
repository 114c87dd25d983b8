// The request of POST /api/local/run (spec: Local run request) and the checks that turn it into a run plan: 400 naming
// the field for anything malformed, 413 for too much text.
import { z } from 'zod';
import type { Config } from '../../config/index.ts';
import { TracegateError } from '../../core/errors.ts';
import type { AttrValue } from '../../core/record.ts';
import { COACH_CURATED, COACH_DRAFT, type RunTurn } from '../../mappers/local-run.ts';

const turn = z.object({
  role: z.enum(['system', 'user', 'assistant']),
  content: z.string(),
});

const curate = z.strictObject({
  draftTraceId: z.string().min(1).max(256).describe('The coach_local_draft trace to curate'),
  response: z.string().optional().describe("The edited answer; absent: the draft's answer is accepted as it is"),
});

export const runRequestSchema = z.strictObject({
  prompt: z.string().min(1).optional().describe('Input text of a single-turn run'),
  messages: z.array(turn).min(1).optional().describe('Chat turns (agent chat), instead of prompt'),
  model: z
    .string()
    .min(1)
    .max(256)
    .optional()
    .describe('A model the local server offers (default: TRACEGATE_LOCAL_MODEL)'),
  actionName: z.string().max(256).optional(),
  recordTrace: z.boolean().optional().describe('true: the run is stored as a trace and the answer names it (traceId)'),
  instructions: z.string().optional().describe("The agent's system prompt"),
  parameters: z
    .looseObject({
      source: z.enum(['agent_lab', 'coach']).optional().describe('agent_lab (default): runs and chat; coach'),
      coachSessionId: z.string().min(1).max(256).optional().describe('Links a coach session: required with coach'),
      trainingPreferred: z.boolean().optional(),
      curate: curate.optional().describe('Coach: record a curated answer (coach_curated) from a draft; calls no model'),
    })
    .optional(),
  stream: z.boolean().optional().describe('true: server-sent events (delta events, then a done event)'),
  maxTokens: z.number().int().min(1).max(1_000_000).optional(),
  temperature: z.number().min(0).max(2).optional(),
});
export type RunRequest = z.output<typeof runRequestSchema>;

/** What the route does with a request. */
export type RunPlan =
  | {
      kind: 'run';
      model: string;
      source: 'agent_lab' | 'coach';
      actionName: string;
      instructions?: string;
      turns: RunTurn[];
      record: boolean;
      stream: boolean;
      parameters: Record<string, AttrValue>;
      trainingPreferred: boolean;
      generation: { maxTokens?: number; temperature?: number };
    }
  | {
      kind: 'curate';
      draftTraceId: string;
      coachSessionId: string;
      response?: string;
      parameters: Record<string, AttrValue>;
    };

const invalid = (field: string, message: string) =>
  new TracegateError('invalid', 'invalid_request', `${field}: ${message}`, { details: [{ field, message }] });

export function parseRunRequest(
  body: unknown,
  config: Pick<Config, 'LOCAL_MODEL' | 'LOCAL_RUN_MAX_MESSAGES' | 'MAX_STRING_BYTES'>,
): RunPlan {
  const parsed = runRequestSchema.safeParse(body);
  if (!parsed.success) {
    const details = parsed.error.issues.map((i) => ({ field: i.path.join('.') || '(body)', message: i.message }));
    throw new TracegateError('invalid', 'invalid_request', `${details[0]!.field}: ${details[0]!.message}`, { details });
  }
  const req = parsed.data;
  const parameters = (req.parameters ?? {}) as Record<string, AttrValue>;
  if (req.parameters?.curate) return curatePlan(req);
  if (req.prompt === undefined && req.messages === undefined)
    throw invalid('prompt', 'send prompt (a single-turn run) or messages (chat turns)');
  if (req.prompt !== undefined && req.messages !== undefined)
    throw invalid('messages', 'send prompt or messages, not both');
  const turns: RunTurn[] = req.messages ?? [{ role: 'user', content: req.prompt! }];
  checkSize(req, turns, config);
  const model = req.model ?? config.LOCAL_MODEL;
  if (!model) throw invalid('model', 'required: this server has no default model (TRACEGATE_LOCAL_MODEL)');
  const source = req.parameters?.source ?? 'agent_lab';
  return {
    kind: 'run',
    model,
    source,
    actionName: actionNameOf(req, source),
    ...(req.instructions !== undefined ? { instructions: req.instructions } : {}),
    turns,
    record: req.recordTrace === true,
    stream: req.stream === true,
    parameters,
    trainingPreferred: req.parameters?.trainingPreferred === true,
    generation: {
      ...(req.maxTokens !== undefined ? { maxTokens: req.maxTokens } : {}),
      ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
    },
  };
}

/** Coach runs are drafts (coach_local_draft) of a coach session; agent_lab takes any action name. */
function actionNameOf(req: RunRequest, source: 'agent_lab' | 'coach'): string {
  if (source !== 'coach') return req.actionName ?? '';
  if (!req.parameters?.coachSessionId)
    throw invalid('parameters.coachSessionId', 'required with source coach: it links the draft and its curated answer');
  if (req.actionName !== undefined && req.actionName !== COACH_DRAFT)
    throw invalid('actionName', `a coach run is recorded as ${COACH_DRAFT} (leave actionName out)`);
  return COACH_DRAFT;
}

function curatePlan(req: RunRequest): RunPlan {
  const p = req.parameters!;
  if (p.source !== 'coach') throw invalid('parameters.source', 'curate is a coach step: source must be coach');
  if (!p.coachSessionId) throw invalid('parameters.coachSessionId', "required with curate: the draft's coach session");
  if (req.prompt !== undefined || req.messages !== undefined)
    throw invalid('parameters.curate', "curate takes the draft's prompt: send neither prompt nor messages");
  if (req.stream === true) throw invalid('stream', 'curate calls no model: there is nothing to stream');
  if (req.recordTrace === false) throw invalid('recordTrace', 'curate records the curated answer: it cannot be false');
  if (req.actionName !== undefined && req.actionName !== COACH_CURATED)
    throw invalid('actionName', `a curated answer is recorded as ${COACH_CURATED} (leave actionName out)`);
  return {
    kind: 'curate',
    draftTraceId: p.curate!.draftTraceId,
    coachSessionId: p.coachSessionId,
    ...(p.curate!.response !== undefined ? { response: p.curate!.response } : {}),
    parameters: p as Record<string, AttrValue>,
  };
}

/** The text sent to the model is held as the trace's prompt: at most TRACEGATE_MAX_STRING_BYTES, in few enough turns. */
function checkSize(
  req: RunRequest,
  turns: readonly RunTurn[],
  config: Pick<Config, 'LOCAL_RUN_MAX_MESSAGES' | 'MAX_STRING_BYTES'>,
): void {
  if (turns.length > config.LOCAL_RUN_MAX_MESSAGES)
    throw new TracegateError(
      'too_large',
      'too_many_messages',
      `messages: more than TRACEGATE_LOCAL_RUN_MAX_MESSAGES (${config.LOCAL_RUN_MAX_MESSAGES}) turns`,
      { details: { limit: config.LOCAL_RUN_MAX_MESSAGES } },
    );
  let bytes = Buffer.byteLength(req.instructions ?? '');
  for (const t of turns) bytes += Buffer.byteLength(t.content);
  if (bytes > config.MAX_STRING_BYTES)
    throw new TracegateError(
      'too_large',
      'prompt_too_large',
      `the prompt (instructions and turns) is longer than TRACEGATE_MAX_STRING_BYTES (${config.MAX_STRING_BYTES} bytes)`,
      { details: { limit: config.MAX_STRING_BYTES } },
    );
}
