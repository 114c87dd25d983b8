// GET /api/export/training: the workspace's trainable model calls as training data, streamed as NDJSON
// (training/export.ts). Also served to the CLI by the admin route (admin.ts) for a workspace by name.
import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Context } from 'koa';
import { z } from 'zod';
import type { Config } from '../../config/index.ts';
import { StorageUnavailableError } from '../../core/errors.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import { SOURCES } from '../../core/record.ts';
import type { Policy } from '../../processors/governance/policy.ts';
import { type ExportOptions, exportTraining, type TrainingSource } from '../../training/export.ts';
import { FORMATS, lineRedactor } from '../../training/lines.ts';
import type { RouteContext } from '../host/context.ts';
import { HttpError } from '../http/errors.ts';
import { errorSchema } from '../http/openapi.ts';
import { parseParams, parseQuery, time } from '../http/query.ts';
import { checkRange, READ_LIMITS, unavailableDoc } from './read.ts';

const flag = z.enum(['true', 'false']).transform((v) => v === 'true');

/** Every parameter of an export; one not listed is refused (a misspelt filter must not export everything). */
export const exportQuery = z.strictObject({
  format: z.enum(FORMATS).default('openai_chat').describe('Line format'),
  from: time.optional().describe('Model calls started at or after: ms since the epoch, ISO 8601 or a date'),
  to: time.optional().describe('Model calls started before (exclusive)'),
  model: z.string().max(4096).optional(),
  actionName: z.string().max(4096).optional(),
  environment: z.string().max(4096).optional(),
  source: z.enum(SOURCES).optional(),
  curated: flag.optional().describe('true: trainingPreferred picks only (openai_dpo: as the preferred answer)'),
  feedback: z
    .enum(['up', 'down'])
    .optional()
    .describe('up: approved answers only (openai_chat, hf_kto); down: rejected answers only (hf_kto)'),
  evalFraction: z
    .string()
    .regex(/^0?\.\d{1,9}$/, 'must be a decimal fraction between 0 and 1, such as 0.1')
    .transform(Number)
    .pipe(z.number().gt(0).lt(1))
    .optional()
    .describe('Deal conversations to train or eval, this share to eval; each line then carries "split"'),
  splitSeed: z.string().max(256).optional().describe('Another seed deals conversations differently (default: none)'),
  split: z
    .enum(['train', 'eval'])
    .optional()
    .describe('With evalFraction: only the lines of that side, unmarked (a file ready to upload)'),
  provenance: flag.optional().describe('true: each line carries "metadata" naming its trace and span'),
});
export type ExportQuery = z.output<typeof exportQuery>;

// One line of each format, for the OpenAPI document.
const message = z.object({
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  content: z.string().optional(),
  tool_calls: z
    .array(
      z.object({
        id: z.string(),
        type: z.literal('function'),
        function: z.object({ name: z.string(), arguments: z.string().describe('JSON text') }),
      }),
    )
    .optional(),
  tool_call_id: z.string().optional(),
  weight: z.literal(0).optional().describe('An earlier assistant turn, not trained on'),
});
const tools = z.array(z.object({ type: z.literal('function'), function: z.record(z.string(), z.unknown()) }));
const extra = {
  split: z.enum(['train', 'eval']).optional().describe('With evalFraction'),
  metadata: z.record(z.string(), z.unknown()).optional().describe('With provenance=true'),
};
const lineSchema = z.union([
  z.object({ messages: z.array(message), tools: tools.optional(), ...extra }).describe('openai_chat'),
  z
    .object({
      input: z.object({ messages: z.array(message), tools: tools.optional() }),
      preferred_output: z.array(message),
      non_preferred_output: z.array(message),
      ...extra,
    })
    .describe('openai_dpo'),
  z.object({ prompt: z.array(message), completion: z.array(message), label: z.boolean(), ...extra }).describe('hf_kto'),
]);

/** Combinations the formats do not have: 400 naming the parameter. */
export function checkExport(q: ExportQuery): void {
  checkRange(q);
  const refuse = (field: string, message: string) => {
    throw new HttpError(400, 'invalid_query', `${field}: ${message}`, [{ field, message }]);
  };
  if (q.feedback === 'down' && q.format === 'openai_chat')
    refuse('feedback', 'openai_chat leaves thumbs-down answers out; feedback=down is for hf_kto');
  if (q.feedback !== undefined && q.format === 'openai_dpo')
    refuse('feedback', 'openai_dpo pairs approved with rejected answers; it takes no feedback filter');
  if (q.splitSeed !== undefined && q.evalFraction === undefined) refuse('splitSeed', 'needs evalFraction');
  if (q.split !== undefined && q.evalFraction === undefined) refuse('split', 'needs evalFraction');
}

/** Query parameters given as strings (the CLI's), checked as the route checks them. */
export function checkedExport(params: Record<string, string>): ExportQuery {
  const q = parseParams(exportQuery, params);
  checkExport(q);
  return q;
}

/** What an export of `q` does, under the server's limits and the workspace's current policy. */
export function exportOptions(q: ExportQuery, config: Config, policy: Policy): ExportOptions {
  return {
    format: q.format,
    filter: {
      ...(q.from !== undefined ? { fromNs: q.from } : {}),
      ...(q.to !== undefined ? { toNs: q.to } : {}),
      ...(q.model !== undefined ? { model: q.model } : {}),
      ...(q.actionName !== undefined ? { actionName: q.actionName } : {}),
      ...(q.environment !== undefined ? { environment: q.environment } : {}),
      ...(q.source !== undefined ? { source: q.source } : {}),
      ...(q.curated ? { curated: true } : {}),
    },
    ...(q.feedback !== undefined ? { feedback: q.feedback } : {}),
    ...(q.evalFraction !== undefined
      ? { split: { evalFraction: q.evalFraction, seed: q.splitSeed ?? '', ...(q.split ? { only: q.split } : {}) } }
      : {}),
    provenance: q.provenance === true,
    pageRows: config.EXPORT_PAGE_ROWS,
    pageBytes: config.EXPORT_PAGE_BYTES,
    maxPairsPerPrompt: config.EXPORT_MAX_PAIRS_PER_PROMPT,
    maxToolCalls: config.EXPORT_MAX_TOOL_CALLS,
    redactor: lineRedactor(policy),
  };
}

/** Exports running, per app (its metrics object). */
const runningOf = new WeakMap<object, { n: number }>();

/**
 * Answers an export of `workspaceId` as NDJSON. The first storage page is read before the answer starts, so a
 * storage outage then is a 503 in the JSON envelope; later pages are read as the client takes the lines (the
 * stream's back-pressure), each under the read deadline, and a client that goes away stops the scan. A failure past
 * the first page cuts the connection (see stream).
 */
export async function answerExport(r: RouteContext, ctx: Context, workspaceId: string, q: ExportQuery): Promise<void> {
  const running = runningOf.get(r.metrics) ?? runningOf.set(r.metrics, { n: 0 }).get(r.metrics)!;
  if (running.n >= r.config.EXPORT_MAX_CONCURRENT)
    throw new HttpError(
      503,
      'server_busy',
      `${running.n} training exports are running (TRACEGATE_EXPORT_MAX_CONCURRENT); retry later`,
      null,
      { 'Retry-After': '5' },
    );
  running.n++;
  r.metrics.trainingExports.inc();
  try {
    const opts = exportOptions(q, r.config, await r.read(() => r.settings.policyFor(workspaceId)));
    const socket = ctx.req.socket;
    opts.onPage = (_read, lines) => {
      r.metrics.trainingPages.inc();
      if (lines) r.metrics.trainingLines.inc({ format: q.format }, lines);
      // Working, not idle: pages that make no line send nothing (the idle limit is for clients that stop reading).
      socket.setTimeout(r.config.SOCKET_IDLE_TIMEOUT_MS);
    };
    let begun = false;
    // Waiting for storage is working too: each retry re-arms the idle limit, or it would cut the export first.
    const keepAlive = () => socket.setTimeout(r.config.SOCKET_IDLE_TIMEOUT_MS);
    const read = <T>(work: () => Promise<T>) => (begun ? patiently(r, () => r.read(work), keepAlive) : r.read(work));
    const store: TrainingSource = {
      trainingScope: (ws, f) => read(() => r.storage.trainingScope(ws, f)),
      trainingPage: (ws, scan) => read(() => r.storage.trainingPage(ws, scan)),
      coachDrafts: (ws, ids) => read(() => r.storage.coachDrafts(ws, ids)),
    };
    const lines = exportTraining(store, workspaceId, opts);
    const first = await lines.next();
    begun = true;
    ctx.state.ownIdleTimeout = true;
    await stream(r, ctx, first, lines);
  } finally {
    running.n--;
    r.metrics.trainingExports.dec();
  }
}

/**
 * A read once the answer has begun: storage unavailable (down, or slower than the read deadline) is tried again,
 * TRACEGATE_EXPORT_READ_RETRIES times, 1, 2, 4, … s apart (the scan resumes at its key), before the export is cut:
 * an export may have run for an hour when storage blinks. Before the answer, the client gets the 503 at once.
 */
async function patiently<T>(r: RouteContext, read: () => Promise<T>, keepAlive: () => void): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    keepAlive();
    try {
      return await read();
    } catch (err) {
      if (!(err instanceof StorageUnavailableError) || attempt >= r.config.EXPORT_READ_RETRIES) throw err;
      r.metrics.trainingRetries.inc();
      await sleep(1000 * 2 ** Math.min(attempt, 5));
    }
  }
}

/** Waits until `res` takes more (or is gone); both listeners removed then, so none pile up over a long export. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/**
 * Writes the lines as the client takes them. A failure once the answer has begun destroys the connection: the
 * chunked body then lacks its last chunk, which every HTTP client reports as an incomplete transfer, so a cut-short
 * export never looks complete (a final "error" line could be taken for data by a consumer that does not look for it).
 */
async function stream(
  r: RouteContext,
  ctx: Context,
  first: IteratorResult<string>,
  lines: AsyncGenerator<string>,
): Promise<void> {
  ctx.respond = false;
  const res = ctx.res;
  res.statusCode = 200;
  for (const [k, v] of Object.entries(ctx.response.headers)) if (v !== undefined) res.setHeader(k, v as string);
  res.setHeader('Content-Type', 'application/x-ndjson; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  try {
    let chunk = first;
    while (!chunk.done && !res.destroyed) {
      if (chunk.value && !res.write(chunk.value)) await drained(res);
      chunk = await lines.next();
    }
    if (!res.destroyed) res.end();
  } catch (err) {
    r.metrics.trainingFailures.inc();
    r.log.warn({ err, path: ctx.path }, 'training export failed after its answer began; connection cut');
    res.destroy();
  } finally {
    await lines.return(undefined); // a client gone: the scan stops here
  }
}

export function exportRoutes(r: RouteContext): void {
  r.docs.push({
    method: 'get',
    path: '/api/export/training',
    tag: 'read',
    auth: 'apiKey',
    query: exportQuery,
    summary:
      "Training data: the workspace's trainable model calls (completed, with prompt and response) as NDJSON, one example a line (openai_chat, openai_dpo, hf_kto), redacted by the current policy, identical prompt/response pairs once",
    responses: {
      200: {
        description: 'One line per example, streamed (application/x-ndjson)',
        schema: lineSchema,
        contentType: 'application/x-ndjson',
      },
      400: {
        description: 'An unknown format or parameter, a bad value or combination (names it)',
        schema: errorSchema,
      },
      503: {
        description: `${unavailableDoc.description}; or TRACEGATE_EXPORT_MAX_CONCURRENT exports running (code server_busy)`,
        schema: errorSchema,
      },
    },
  });
  r.on('get', '/api/export/training', { limiter: READ_LIMITS.export }, async (ctx) => {
    const q = parseQuery(exportQuery, ctx);
    checkExport(q);
    await answerExport(r, ctx, (ctx.state.caller as Caller).workspaceId, q);
  });
}
