// The local workbench: POST /api/local/run (agent run, agent chat, coach) and GET /api/local/models, against the
// locally hosted model the server's configuration names (collector/local-model). Session cookie only (spec,
// Authentication), rate-limited per session. A trace is recorded only when recordTrace is true (spec, rule 4), through
// the pipeline, durable before the answer that names it; a recorded run that failed is stored with status error.
import type { Context } from 'koa';
import type { Caller } from '../../core/ports/ingest.ts';
import { TracegateError } from '../../core/errors.ts';
import type { AttrValue, SpanRecord } from '../../core/record.ts';
import {
  COACH_CURATED,
  COACH_DRAFT,
  type LocalRun,
  mapLocalRun,
  newTraceId,
  type RunTurn,
} from '../../mappers/local-run.ts';
import type { RouteContext } from '../host/context.ts';
import { bodyKind, parseJson, readBody, releaseBody } from '../http/body.ts';
import { publicError } from '../http/errors.ts';
import { type ChatResult, LocalModel, RunCancelled } from '../local-model/client.ts';
import { localRunDocs } from './local-run-docs.ts';
import { parseRunRequest, type RunPlan } from './local-run-request.ts';

export const RUN_PATH = '/api/local/run';
export const MODELS_PATH = '/api/local/models';
const ROUTE = `POST ${RUN_PATH}`;

type Run = Extract<RunPlan, { kind: 'run' }>;
type Curate = Extract<RunPlan, { kind: 'curate' }>;

/** The answer (spec: Local run response), `traceId` when a trace was ingested. */
interface RunAnswer {
  output: string;
  model: string;
  usage: { promptTokens: number; completionTokens: number; totalTokens: number };
  latencyMs: number;
  finishReason: string;
  traceId?: string;
}

export function localRunRoutes(r: RouteContext): void {
  const model = new LocalModel(r.config);
  r.onClose(() => model.close());
  r.docs.push(...localRunDocs());
  const guard = { auth: 'session', limiter: 'local-run', auditRefusals: true } as const;

  /** The model may take minutes (a large one loading): the connection waits as long as a run may last. */
  const waits = async (ctx: Context, next: () => Promise<unknown>) => {
    ctx.state.ownIdleTimeout = true;
    ctx.req.socket.setTimeout(r.config.LOCAL_MODEL_TIMEOUT_MS + 5_000);
    await next();
  };

  r.on('post', RUN_PATH, guard, waits, async (ctx) => {
    bodyKind(ctx, ['json']);
    const body = parseJson(
      await readBody(ctx, r.config.MAX_BODY_BYTES),
      r.config.MAX_JSON_DEPTH,
      r.config.MAX_JSON_VALUES,
    );
    const plan = parseRunRequest(body, r.config);
    releaseBody(ctx); // the wait for the model may be long: the body budget is for bodies still being read
    if (plan.kind === 'curate') return curate(r, ctx, plan);
    const rec = new Recorder(r, ctx, plan, model.api);
    return plan.stream ? streamRun(model, ctx, plan, rec) : jsonRun(model, ctx, plan, rec);
  });

  r.on('get', MODELS_PATH, { auth: 'session', limiter: 'local-run' }, async (ctx) => {
    ctx.body = { api: model.api, defaultModel: r.config.LOCAL_MODEL ?? null, models: await model.models() };
  });
}

/** Aborted when the client goes away before its answer is written: the model's generation stops too. */
function clientGone(ctx: Context): AbortSignal {
  const gone = new AbortController();
  ctx.res.once('close', () => {
    if (!ctx.res.writableFinished) gone.abort();
  });
  if (ctx.req.socket.destroyed) gone.abort();
  return gone.signal;
}

function answerOf(res: ChatResult, latencyMs: number, traceId?: string): RunAnswer {
  return {
    output: res.output,
    model: res.model,
    usage: {
      promptTokens: res.promptTokens,
      completionTokens: res.completionTokens,
      totalTokens: res.promptTokens + res.completionTokens,
    },
    latencyMs,
    finishReason: res.finishReason,
    ...(traceId ? { traceId } : {}),
  };
}

async function jsonRun(model: LocalModel, ctx: Context, plan: Run, rec: Recorder): Promise<void> {
  let res: ChatResult;
  try {
    res = await model.chat(request(plan), undefined, clientGone(ctx));
  } catch (err) {
    const traceId = await rec.failed(err, '');
    // Nobody is left to answer (nor is it a refusal to audit): the run is recorded as cancelled, if at all.
    if (err instanceof RunCancelled) return void (ctx.respond = false);
    throw withTrace(err, traceId);
  }
  const end = Date.now();
  ctx.body = answerOf(res, end - rec.started, await rec.answered(res, end));
}

/**
 * Server-sent events: `delta` events as the model's text comes, then `done` with the answer (usage, traceId). The
 * events start with the first piece of text: a model server that cannot be reached or refuses the request is still
 * answered with its status and the JSON error; one failing mid-answer, with an `error` event.
 */
async function streamRun(model: LocalModel, ctx: Context, plan: Run, rec: Recorder): Promise<void> {
  let partial = '';
  const sse = new EventStream(ctx);
  let res: ChatResult;
  try {
    res = await model.chat(
      request(plan),
      async (text) => {
        partial += text;
        await sse.send('delta', { text });
      },
      clientGone(ctx),
    );
  } catch (err) {
    const traceId = await rec.failed(err, partial);
    if (!sse.started) throw withTrace(err, traceId);
    return sse.fail(withTrace(err, traceId));
  }
  const end = Date.now();
  await sse.send('done', answerOf(res, end - rec.started, await rec.answered(res, end)));
  sse.end();
}

const request = (plan: Run) => ({
  model: plan.model,
  messages:
    plan.instructions !== undefined
      ? [{ role: 'system' as const, content: plan.instructions }, ...plan.turns]
      : plan.turns,
  ...plan.generation,
});

/** Records a run when the request asks for it (recordTrace), once its outcome is known. */
class Recorder {
  private readonly r: RouteContext;
  private readonly ctx: Context;
  private readonly plan: Run;
  private readonly api: LocalRun['api'];
  /** When the model was asked: latency counts from here. */
  readonly started = Date.now();
  constructor(r: RouteContext, ctx: Context, plan: Run, api: LocalRun['api']) {
    this.r = r;
    this.ctx = ctx;
    this.plan = plan;
    this.api = api;
  }

  /** The trace of a run answered at `endMs` (undefined: not asked to record, or not stored). */
  answered(res: ChatResult, endMs: number): Promise<string | undefined> {
    return this.record(res, 'completed', '', endMs);
  }

  /** A recorded run that failed is stored too: status error (cancelled: the client left), never trainable. */
  failed(err: unknown, partial: string): Promise<string | undefined> {
    const res = { output: partial, model: this.plan.model, promptTokens: 0, completionTokens: 0, finishReason: '' };
    const status = err instanceof RunCancelled ? 'cancelled' : 'error';
    return this.record(res, status, publicError(err).message, Date.now());
  }

  private async record(res: ChatResult, status: LocalRun['status'], statusMessage: string, end: number) {
    if (!this.plan.record) return undefined;
    const { plan, ctx } = this;
    const run: LocalRun = {
      traceId: newTraceId(),
      requestId: ctx.state.requestId as string,
      source: plan.source,
      actionName: plan.actionName,
      model: res.model,
      api: this.api,
      ...(plan.instructions !== undefined ? { instructions: plan.instructions } : {}),
      turns: plan.turns,
      output: res.output,
      promptTokens: res.promptTokens,
      completionTokens: res.completionTokens,
      finishReason: res.finishReason,
      latencyMs: end - this.started,
      endMs: end,
      status,
      statusMessage,
      parameters: plan.parameters,
      trainingPreferred: plan.trainingPreferred,
      generation: plan.generation,
    };
    return ingest(this.r, ctx, mapLocalRun(run, (ctx.state.caller as Caller).workspaceId));
  }
}

/**
 * Through the pipeline (audit, governance, verification), durable before the answer names it. A trace that cannot be
 * stored (the spool full) leaves the answer without traceId (spec: traceId when ingestion succeeds) and says so.
 */
async function ingest(r: RouteContext, ctx: Context, span: SpanRecord): Promise<string | undefined> {
  const caller = ctx.state.caller as Caller;
  try {
    await r.pipeline.ingest([span], { workspaceId: caller.workspaceId, keyId: caller.keyId, route: ROUTE });
  } catch (err) {
    ctx.state.log.warn({ err }, 'local run not recorded');
    ctx.state.notRecorded = true;
    if (!ctx.headerSent) ctx.set('X-Tracegate-Telemetry', 'not-stored');
    return undefined;
  }
  r.metrics.ingested.inc({ source: span.source });
  return span.traceId;
}

/** The error as answered, naming the trace that recorded the failed run. */
function withTrace(err: unknown, traceId: string | undefined): unknown {
  if (!traceId || !(err instanceof TracegateError)) return err;
  const details = err.details && typeof err.details === 'object' ? err.details : {};
  return new TracegateError(err.kind, err.code, err.message, {
    details: { ...details, traceId },
    retryAfterSeconds: err.retryAfterSeconds,
    cause: err,
  });
}

/**
 * Coach, curate: the draft (coach_local_draft of the same coach session, in the caller's workspace) accepted as it
 * is, or with the edited response, recorded as coach_curated, preferred for training. No model is called: usage and
 * model are the draft's.
 */
async function curate(r: RouteContext, ctx: Context, plan: Curate): Promise<void> {
  const caller = ctx.state.caller as Caller;
  const draft = await findDraft(r, caller.workspaceId, plan);
  const end = Date.now();
  const turns = turnsOf(draft);
  const instructions = draft.attributes.instructions;
  const run: LocalRun = {
    traceId: newTraceId(),
    requestId: ctx.state.requestId as string,
    source: 'coach',
    actionName: COACH_CURATED,
    model: draft.model,
    api: (draft.attributes['local_model.api'] === 'openai' ? 'openai' : 'ollama') as LocalRun['api'],
    ...(typeof instructions === 'string' ? { instructions } : {}),
    turns,
    output: plan.response ?? draft.response,
    promptTokens: draft.promptTokens,
    completionTokens: draft.completionTokens,
    finishReason: draft.finishReason,
    latencyMs: 0,
    endMs: end,
    status: 'completed',
    statusMessage: '',
    parameters: plan.parameters,
    trainingPreferred: true,
    generation: {},
    extra: { 'coach.draft_trace_id': draft.traceId, 'coach.edited': plan.response !== undefined },
  };
  const span = mapLocalRun(run, caller.workspaceId);
  const traceId = await ingest(r, ctx, span);
  ctx.body = answerOf(
    {
      output: span.response,
      model: span.model,
      promptTokens: span.promptTokens,
      completionTokens: span.completionTokens,
      finishReason: span.finishReason,
    },
    0,
    traceId,
  ) satisfies RunAnswer;
}

/** The draft's span; read again after a flush when not stored yet (a draft recorded a moment ago is in the spool). */
async function findDraft(r: RouteContext, workspaceId: string, plan: Curate): Promise<SpanRecord> {
  const read = async () => (await r.read(() => r.storage.getTrace(workspaceId, plan.draftTraceId))).find(isDraft);
  let draft = await read();
  if (!draft) {
    await r.pipeline.flush();
    draft = await read();
  }
  const field = 'parameters.curate.draftTraceId';
  if (!draft)
    throw new TracegateError(
      'not_found',
      'not_found',
      `${field}: no coach draft ${plan.draftTraceId} in this workspace`,
      {
        details: [{ field, message: 'no such coach draft' }],
      },
    );
  const params = draft.attributes.parameters as Record<string, AttrValue> | undefined;
  if (params?.coachSessionId !== plan.coachSessionId)
    throw new TracegateError(
      'conflict',
      'coach_session_mismatch',
      `${field}: the draft belongs to another coach session`,
    );
  if (draft.status !== 'completed')
    throw new TracegateError(
      'conflict',
      'draft_failed',
      `${field}: the draft's run did not complete (${draft.status})`,
    );
  return draft;
}

const isDraft = (s: SpanRecord) => s.source === 'coach' && s.actionName === COACH_DRAFT;

function turnsOf(span: SpanRecord): RunTurn[] {
  const messages = span.attributes.messages;
  if (!Array.isArray(messages)) return [{ role: 'user', content: span.prompt }];
  return messages.flatMap((m) => {
    const t = m as { role?: unknown; content?: unknown };
    const role = t.role === 'system' || t.role === 'assistant' ? t.role : 'user';
    return typeof t.content === 'string' ? [{ role, content: t.content } as RunTurn] : [];
  });
}

/** text/event-stream on the raw response, begun with the first event. */
class EventStream {
  private readonly ctx: Context;
  started = false;
  constructor(ctx: Context) {
    this.ctx = ctx;
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    const ctx = this.ctx;
    ctx.respond = false;
    const res = ctx.res;
    res.statusCode = 200;
    for (const [k, v] of Object.entries(ctx.response.headers)) if (v !== undefined) res.setHeader(k, v as string);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
  }

  async send(event: string, data: unknown): Promise<void> {
    this.start();
    const res = this.ctx.res;
    if (res.destroyed) return;
    if (!res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`))
      await new Promise<void>((resolve) => {
        res.once('drain', resolve);
        res.once('close', resolve);
      });
  }

  /** An error after the events began: an `error` event in the JSON envelope's shape, then the end. */
  async fail(err: unknown): Promise<void> {
    const e = publicError(err, this.ctx.state.log);
    if (!(e instanceof RunCancelled))
      await this.send('error', { error: { code: e.code, message: e.message, details: e.details } });
    this.end();
  }

  end(): void {
    if (this.ctx.state.notRecorded && !this.ctx.res.destroyed)
      this.ctx.res.write(': tracegate telemetry not stored\n\n');
    this.ctx.res.end();
  }
}
