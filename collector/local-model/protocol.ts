// What a local model protocol is to the client (client.ts): where to send a chat and ask for the models, the body
// to send, and how to read the streamed answer. Two of them: Ollama's (ollama.ts) and OpenAI's (openai.ts).
import { TracegateError } from '../../core/errors.ts';
import { LineSplitter, preview } from './lines.ts';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  /** Most tokens to generate (the server's own limit when absent). */
  maxTokens?: number;
  temperature?: number;
}

/** What the model server said of an answer, besides its text. */
export interface AnswerSummary {
  /** The model as the server names it ('' when it does not: the request's then). */
  model: string;
  promptTokens: number;
  completionTokens: number;
  /** stop, length, … as the server says it. */
  finishReason: string;
}

export interface ModelInfo {
  id: string;
  sizeBytes?: number;
  modifiedAt?: string;
}

/** Reads a streamed answer as its bytes arrive. */
export interface AnswerParser {
  /** The text deltas this chunk completes. Throws a 502 (TracegateError) on anything the protocol does not allow. */
  push(chunk: Uint8Array): string[];
  /** The final line or event arrived: nothing more to read. */
  readonly finished: boolean;
  /** The stream ended: throws when the answer had not finished. */
  end(): string[];
  summary(): AnswerSummary;
}

/** An answer read a line at a time: each protocol says what a line means and when the answer is whole. */
export abstract class LineAnswer implements AnswerParser {
  private readonly lines: LineSplitter;
  finished = false;
  protected result: AnswerSummary = { model: '', promptTokens: 0, completionTokens: 0, finishReason: '' };
  constructor(maxLineChars: number) {
    this.lines = new LineSplitter(maxLineChars);
  }

  push(chunk: Uint8Array): string[] {
    const out: string[] = [];
    for (const line of this.lines.push(chunk)) this.line(line, out);
    return out;
  }

  end(): string[] {
    const out: string[] = [];
    for (const line of this.lines.end()) this.line(line, out);
    this.ended(out);
    return out;
  }

  summary(): AnswerSummary {
    return this.result;
  }

  /** One line of the stream: its text deltas go to `out`. */
  protected abstract line(line: string, out: string[]): void;
  /** The stream ended: what is still held goes to `out`; throws when the answer had not finished. */
  protected abstract ended(out: string[]): void;
}

export interface Protocol {
  readonly api: 'ollama' | 'openai';
  /** Paths on the server's base URL (TRACEGATE_LOCAL_MODEL_URL). */
  readonly chatPath: string;
  readonly modelsPath: string;
  /** The chat request's body: always streamed, so a silent server is noticed between tokens, not after the answer. */
  chatBody(req: ChatRequest): object;
  answer(maxLineChars: number): AnswerParser;
  /** The models listed, from the models answer's JSON. */
  models(body: unknown): ModelInfo[];
}

/** The model server refused the request or failed it (an HTTP error, or an error in the stream): 502, its words. */
export function modelError(message: string, status?: number): TracegateError {
  const where = status === undefined ? 'reported an error' : `answered ${status}`;
  return new TracegateError(
    'upstream_failed',
    'local_model_error',
    `the local model server ${where}: ${preview(message, 500)}`,
    {
      details: status === undefined ? null : { upstreamStatus: status },
    },
  );
}

/** The message of an error answer: `{"error": "…"}` (Ollama), `{"error": {"message": "…"}}` (OpenAI), or its text. */
export function errorText(body: string): string {
  try {
    const v = JSON.parse(body) as { error?: unknown; message?: unknown };
    const e = v?.error ?? v?.message;
    if (typeof e === 'string') return e;
    if (e && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string')
      return (e as { message: string }).message;
  } catch {
    /* not JSON: its text */
  }
  return body || '(no message)';
}

export const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);
