// Ollama's protocol: POST /api/chat, streamed as NDJSON (one JSON object a line; the last says done: true with the
// counts); GET /api/tags lists the models. https://github.com/ollama/ollama/blob/main/docs/api.md
import { badResponse, jsonObject, tokenCount } from './lines.ts';
import { type ChatRequest, isObject, LineAnswer, type ModelInfo, modelError, type Protocol } from './protocol.ts';

class OllamaAnswer extends LineAnswer {
  protected ended(): void {
    if (!this.finished) throw badResponse('the answer ended before its last line (done: true)');
  }

  protected line(line: string, out: string[]): void {
    if (this.finished || line.trim() === '') return;
    const o = jsonObject(line, 'a line of the answer');
    if (o.error !== undefined) throw modelError(typeof o.error === 'string' ? o.error : JSON.stringify(o.error));
    if (typeof o.done !== 'boolean') throw badResponse('a line of the answer has no done (true or false)');
    if (typeof o.model === 'string' && o.model) this.result.model = o.model;
    const message = o.message;
    if (message !== undefined) {
      if (!isObject(message) || (message.content !== undefined && typeof message.content !== 'string'))
        throw badResponse('a line of the answer has a message without text content');
      if (message.content) out.push(message.content as string);
    } else if (!o.done) {
      throw badResponse('a line of the answer has no message');
    }
    if (o.done) {
      this.finished = true;
      this.result.promptTokens = tokenCount(o.prompt_eval_count, 'prompt_eval_count');
      this.result.completionTokens = tokenCount(o.eval_count, 'eval_count');
      this.result.finishReason = typeof o.done_reason === 'string' && o.done_reason ? o.done_reason : 'stop';
    }
  }
}

export const ollama: Protocol = {
  api: 'ollama',
  chatPath: '/api/chat',
  modelsPath: '/api/tags',
  chatBody(req: ChatRequest) {
    const options: Record<string, number> = {};
    if (req.maxTokens !== undefined) options.num_predict = req.maxTokens;
    if (req.temperature !== undefined) options.temperature = req.temperature;
    return {
      model: req.model,
      messages: req.messages,
      stream: true,
      ...(Object.keys(options).length ? { options } : {}),
    };
  },
  answer: (maxLineChars) => new OllamaAnswer(maxLineChars),
  models(body: unknown): ModelInfo[] {
    if (!isObject(body) || !Array.isArray(body.models)) throw badResponse('the model list has no models array');
    return body.models.map((m) => {
      if (!isObject(m) || typeof m.name !== 'string') throw badResponse('a model in the list has no name');
      return {
        id: m.name,
        ...(typeof m.size === 'number' ? { sizeBytes: m.size } : {}),
        ...(typeof m.modified_at === 'string' ? { modifiedAt: m.modified_at } : {}),
      };
    });
  },
};
