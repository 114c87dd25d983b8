// OpenAI's protocol as local servers speak it (llama.cpp's llama-server, LM Studio, vLLM): POST /v1/chat/completions
// streamed as server-sent events (chat.completion.chunk objects, the usage in a last chunk when asked for with
// stream_options.include_usage, then `data: [DONE]`); GET /v1/models lists the models.
import { badResponse, jsonObject, tokenCount } from './lines.ts';
import {
  type ChatRequest,
  errorText,
  isObject,
  LineAnswer,
  type ModelInfo,
  modelError,
  type Protocol,
} from './protocol.ts';

class OpenAiAnswer extends LineAnswer {
  private sawFinish = false;
  private data: string[] = [];

  /** A server that ends the stream after the finishing chunk but without [DONE] has still answered whole. */
  protected ended(out: string[]): void {
    this.dispatch(out);
    if (!this.finished && !this.sawFinish) throw badResponse('the answer ended before it finished (no finish_reason)');
  }

  /** SSE: `data:` lines gather into an event, a blank line ends it; comments and other fields are skipped. */
  protected line(line: string, out: string[]): void {
    if (this.finished) return;
    if (line === '') return this.dispatch(out);
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    if (field !== 'data') return;
    const value = colon < 0 ? '' : line.slice(colon + 1);
    this.data.push(value.startsWith(' ') ? value.slice(1) : value);
  }

  private dispatch(out: string[]): void {
    if (this.data.length === 0) return;
    const payload = this.data.join('\n');
    this.data = [];
    if (payload === '[DONE]') {
      this.finished = true;
      return;
    }
    const o = jsonObject(payload, 'an event of the answer');
    if (o.error !== undefined) throw modelError(errorText(JSON.stringify({ error: o.error })));
    if (typeof o.model === 'string' && o.model) this.result.model = o.model;
    if (o.usage !== undefined && o.usage !== null) {
      if (!isObject(o.usage)) throw badResponse('usage is not an object');
      this.result.promptTokens = tokenCount(o.usage.prompt_tokens, 'usage.prompt_tokens');
      this.result.completionTokens = tokenCount(o.usage.completion_tokens, 'usage.completion_tokens');
    }
    if (!Array.isArray(o.choices)) throw badResponse('an event of the answer has no choices');
    for (const c of o.choices) this.choice(c, out);
  }

  private choice(c: unknown, out: string[]): void {
    if (!isObject(c)) throw badResponse('a choice is not an object');
    if (c.index !== undefined && c.index !== 0) return; // one answer is asked for
    const delta = c.delta;
    if (delta !== undefined && delta !== null) {
      if (!isObject(delta)) throw badResponse('a delta is not an object');
      if (delta.content !== undefined && delta.content !== null) {
        if (typeof delta.content !== 'string') throw badResponse('a delta has content that is not text');
        if (delta.content) out.push(delta.content);
      }
    }
    if (typeof c.finish_reason === 'string' && c.finish_reason) {
      this.sawFinish = true;
      this.result.finishReason = c.finish_reason;
    } else if (c.finish_reason !== undefined && c.finish_reason !== null && c.finish_reason !== '') {
      throw badResponse('finish_reason is not text');
    }
  }
}

export const openai: Protocol = {
  api: 'openai',
  chatPath: '/v1/chat/completions',
  modelsPath: '/v1/models',
  chatBody(req: ChatRequest) {
    return {
      model: req.model,
      messages: req.messages,
      stream: true,
      stream_options: { include_usage: true },
      ...(req.maxTokens !== undefined ? { max_tokens: req.maxTokens } : {}),
      ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
    };
  },
  answer: (maxLineChars) => new OpenAiAnswer(maxLineChars),
  models(body: unknown): ModelInfo[] {
    if (!isObject(body) || !Array.isArray(body.data)) throw badResponse('the model list has no data array');
    return body.data.map((m) => {
      if (!isObject(m) || typeof m.id !== 'string') throw badResponse('a model in the list has no id');
      return { id: m.id };
    });
  },
};
