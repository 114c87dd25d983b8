// The locally hosted model the workbench route calls: the server TRACEGATE_LOCAL_MODEL_URL names, in the protocol
// TRACEGATE_LOCAL_MODEL_API says; a request never names the server. Plain undici with a strict reading of the stream
// (lines.ts, ollama.ts, openai.ts), no retries. What can go wrong, as the route answers it:
// - the server cannot be reached (not running, refused, connect timeout): 503 local_model_unavailable, Retry-After;
// - it answers an HTTP error or reports one in the stream: 502 local_model_error, with its message;
// - it answers something its protocol does not allow (not JSON, cut short, too long): 502 local_model_bad_response;
// - it stays silent past TRACEGATE_LOCAL_MODEL_IDLE_TIMEOUT_MS, or the run passes _TIMEOUT_MS: 504 local_model_timeout.
import { Agent, type Dispatcher } from 'undici';
import type { Config } from '../../config/index.ts';
import { TracegateError } from '../../core/errors.ts';
import { badResponse, preview } from './lines.ts';
import { ollama } from './ollama.ts';
import { openai } from './openai.ts';
import {
  type AnswerSummary,
  type ChatRequest,
  errorText,
  type ModelInfo,
  modelError,
  type Protocol,
} from './protocol.ts';

export type { ChatMessage, ChatRequest, ModelInfo } from './protocol.ts';

export type LocalModelSettings = Pick<
  Config,
  | 'LOCAL_MODEL_URL'
  | 'LOCAL_MODEL_API'
  | 'LOCAL_MODEL_API_KEY'
  | 'LOCAL_MODEL_CONNECT_TIMEOUT_MS'
  | 'LOCAL_MODEL_IDLE_TIMEOUT_MS'
  | 'LOCAL_MODEL_TIMEOUT_MS'
  | 'MAX_STRING_BYTES'
>;

export interface ChatResult extends AnswerSummary {
  output: string;
}

/** The client went away: the run was given up (the route records it as cancelled). */
export class RunCancelled extends TracegateError {
  constructor() {
    super('timeout', 'client_closed', 'the client closed the connection before the answer finished');
  }
}

const PROTOCOLS: Readonly<Record<Config['LOCAL_MODEL_API'], Protocol>> = { ollama, openai };
/** An error answer's text read at most: enough for any message. */
const MAX_ERROR_BYTES = 64 * 1024;
const MAX_LIST_BYTES = 4 * 1024 * 1024;
export class LocalModel {
  readonly api: Config['LOCAL_MODEL_API'];
  private readonly protocol: Protocol;
  private readonly origin: string;
  private readonly basePath: string;
  private readonly agent: Agent;
  private readonly s: LocalModelSettings;

  constructor(settings: LocalModelSettings) {
    this.s = settings;
    this.api = settings.LOCAL_MODEL_API;
    this.protocol = PROTOCOLS[settings.LOCAL_MODEL_API];
    const url = new URL(settings.LOCAL_MODEL_URL);
    this.origin = url.origin;
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.agent = new Agent({
      connect: { timeout: settings.LOCAL_MODEL_CONNECT_TIMEOUT_MS },
      headersTimeout: settings.LOCAL_MODEL_IDLE_TIMEOUT_MS,
      bodyTimeout: settings.LOCAL_MODEL_IDLE_TIMEOUT_MS,
    });
  }

  /** A path of the protocol on the configured base URL (a base ending in /v1 is not given a second one). */
  private path(p: string): string {
    return this.basePath.endsWith('/v1') && p.startsWith('/v1/') ? this.basePath + p.slice(3) : this.basePath + p;
  }

  private headers(json: boolean): Record<string, string> {
    return {
      accept: json ? 'application/json' : 'application/x-ndjson, text/event-stream',
      ...(json ? {} : { 'content-type': 'application/json' }),
      ...(this.s.LOCAL_MODEL_API_KEY ? { authorization: `Bearer ${this.s.LOCAL_MODEL_API_KEY}` } : {}),
    };
  }

  /**
   * Runs a chat, streamed: `onDelta` gets each piece of text as it comes (awaited, so a slow client slows the read).
   * `signal`: the client went away (RunCancelled).
   */
  async chat(req: ChatRequest, onDelta?: (text: string) => unknown, signal?: AbortSignal): Promise<ChatResult> {
    const overall = new AbortController();
    const timer = setTimeout(() => overall.abort(), this.s.LOCAL_MODEL_TIMEOUT_MS);
    const abort = signal ? AbortSignal.any([signal, overall.signal]) : overall.signal;
    const why = (err: unknown, answering: boolean) => this.failure(err, answering, overall.signal, signal);
    try {
      let res: Dispatcher.ResponseData;
      try {
        res = await this.agent.request({
          origin: this.origin,
          path: this.path(this.protocol.chatPath),
          method: 'POST',
          headers: this.headers(false),
          body: JSON.stringify(this.protocol.chatBody(req)),
          signal: abort,
        });
      } catch (err) {
        throw why(err, false);
      }
      if (res.statusCode < 200 || res.statusCode >= 300) throw await this.httpError(res);
      try {
        return await this.read(res, req, onDelta);
      } catch (err) {
        res.body.destroy();
        throw why(err, true);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  private async read(
    res: Dispatcher.ResponseData,
    req: ChatRequest,
    onDelta?: (text: string) => unknown,
  ): Promise<ChatResult> {
    const max = this.s.MAX_STRING_BYTES;
    const parser = this.protocol.answer(max + 64 * 1024);
    let output = '';
    let bytes = 0;
    const take = async (deltas: string[]) => {
      for (const d of deltas) {
        bytes += Buffer.byteLength(d);
        if (bytes > max) throw badResponse(`the answer is longer than TRACEGATE_MAX_STRING_BYTES (${max} bytes)`);
        output += d;
        await onDelta?.(d);
      }
    };
    for await (const chunk of res.body) {
      await take(parser.push(chunk as Buffer));
      if (parser.finished) break;
    }
    if (!parser.finished) await take(parser.end());
    const summary = parser.summary();
    return { ...summary, model: summary.model || req.model, output };
  }

  /** The models the server offers. */
  async models(): Promise<ModelInfo[]> {
    const overall = new AbortController();
    const timer = setTimeout(() => overall.abort(), this.s.LOCAL_MODEL_TIMEOUT_MS);
    try {
      let res: Dispatcher.ResponseData;
      try {
        res = await this.agent.request({
          origin: this.origin,
          path: this.path(this.protocol.modelsPath),
          method: 'GET',
          headers: this.headers(true),
          signal: overall.signal,
        });
      } catch (err) {
        throw this.failure(err, false, overall.signal);
      }
      if (res.statusCode < 200 || res.statusCode >= 300) throw await this.httpError(res);
      let text: string;
      try {
        text = await capped(res, MAX_LIST_BYTES);
      } catch (err) {
        throw this.failure(err, true, overall.signal);
      }
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw badResponse(`the model list is not JSON: ${preview(text)}`);
      }
      return this.protocol.models(body);
    } finally {
      clearTimeout(timer);
    }
  }

  private async httpError(res: Dispatcher.ResponseData): Promise<TracegateError> {
    const text = await capped(res, MAX_ERROR_BYTES).catch(() => '');
    return modelError(errorText(text), res.statusCode);
  }

  /** A transport failure as the route answers it; `answering`: the server had begun its answer. */
  private failure(err: unknown, answering: boolean, overall: AbortSignal, client?: AbortSignal): TracegateError {
    if (client?.aborted) return new RunCancelled();
    if (overall.aborted)
      return new TracegateError(
        'upstream_timeout',
        'local_model_timeout',
        `the local model server did not finish within TRACEGATE_LOCAL_MODEL_TIMEOUT_MS (${this.s.LOCAL_MODEL_TIMEOUT_MS} ms)`,
      );
    if (err instanceof TracegateError) return err;
    const code = (err as { code?: string }).code ?? '';
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT')
      return new TracegateError(
        'upstream_timeout',
        'local_model_timeout',
        `the local model server sent nothing for TRACEGATE_LOCAL_MODEL_IDLE_TIMEOUT_MS (${this.s.LOCAL_MODEL_IDLE_TIMEOUT_MS} ms)`,
      );
    if (answering) return badResponse(`the connection ended before the answer did (${code || 'network error'})`);
    return new TracegateError(
      'unavailable',
      'local_model_unavailable',
      `the local model server (TRACEGATE_LOCAL_MODEL_URL, ${this.api} protocol) cannot be reached (${code || 'network error'}): is it running?`,
      { retryAfterSeconds: 5, dependencyCode: code || undefined, cause: err },
    );
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** The body's text, at most `max` bytes (more: a 502). */
async function capped(res: Dispatcher.ResponseData, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of res.body) {
    n += (c as Buffer).length;
    if (n > max) {
      res.body.destroy();
      throw badResponse(`an answer longer than ${max} bytes`);
    }
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
