// POST /api/local/run's pure parts: the request's checks (400 naming the field, 413) and the span a run maps to.
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../../config/index.ts';
import { TracegateError } from '../../../core/errors.ts';
import { parseRunRequest } from '../../../collector/routes/local-run-request.ts';
import { type LocalRun, mapLocalRun, promptText } from '../../../mappers/local-run.ts';
import { TINY_REPLY, tinyGguf, writeTinyGguf } from '../../support/local-model/tiny-gguf.ts';

const config = loadConfig({
  TRACEGATE_LOCAL_MODEL: 'llama3.2',
  TRACEGATE_LOCAL_RUN_MAX_MESSAGES: '3',
  TRACEGATE_MAX_STRING_BYTES: '64',
});
const noDefault = loadConfig({});

function refusal(body: unknown, c = config): { status: string; code: string; field: string; message: string } {
  try {
    parseRunRequest(body, c);
  } catch (err) {
    const e = err as TracegateError;
    expect(e).to.be.instanceOf(TracegateError);
    const first = Array.isArray(e.details) ? (e.details[0] as { field: string }) : { field: '' };
    return { status: e.kind, code: e.code, field: first.field, message: e.message };
  }
  throw new Error('expected a refusal');
}

describe('local run request', () => {
  it('a prompt is one user turn; messages are the chat; the model defaults to TRACEGATE_LOCAL_MODEL', () => {
    const run = parseRunRequest(
      { prompt: 'Hi', instructions: 'Be terse', actionName: 'qa', recordTrace: true },
      config,
    );
    expect(run).to.deep.include({
      kind: 'run',
      model: 'llama3.2',
      source: 'agent_lab',
      actionName: 'qa',
      instructions: 'Be terse',
      turns: [{ role: 'user', content: 'Hi' }],
      record: true,
      stream: false,
      trainingPreferred: false,
    });
    const chat = parseRunRequest(
      {
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
        ],
        model: 'other',
        stream: true,
        maxTokens: 3,
        temperature: 0,
        parameters: { trainingPreferred: true, note: { any: ['json'] } },
      },
      config,
    );
    expect(chat).to.deep.include({ model: 'other', stream: true, record: false, trainingPreferred: true });
    expect(chat).to.have.deep.property('generation', { maxTokens: 3, temperature: 0 });
    expect(chat).to.have.deep.property('parameters', { trainingPreferred: true, note: { any: ['json'] } });
  });

  it('neither prompt nor messages, both, or a malformed message: 400 naming the field', () => {
    expect(refusal({ model: 'm' })).to.deep.include({ status: 'invalid', field: 'prompt' });
    expect(refusal({ prompt: 'a', messages: [{ role: 'user', content: 'b' }] })).to.deep.include({ field: 'messages' });
    expect(
      refusal({
        messages: [
          { role: 'user', content: 'a' },
          { role: 'robot', content: 'b' },
        ],
      }),
    ).to.deep.include({
      field: 'messages.1.role',
    });
    expect(refusal({ messages: [{ role: 'user' }] })).to.deep.include({ field: 'messages.0.content' });
    expect(refusal({ messages: [] })).to.deep.include({ field: 'messages' });
    expect(refusal({ messages: 'hi' })).to.deep.include({ field: 'messages' });
    expect(refusal({ prompt: 'a', maxTokens: 0 })).to.deep.include({ field: 'maxTokens' });
    expect(refusal({ prompt: 'a', temperature: 3 })).to.deep.include({ field: 'temperature' });
    expect(refusal({ prompt: 'a', recordTrace: 'yes' })).to.deep.include({ field: 'recordTrace' });
    expect(refusal({ prompt: 'a', max_tokens: 3 })).to.deep.include({ status: 'invalid', field: '(body)' });
    expect(refusal([1])).to.deep.include({ status: 'invalid' });
    expect(refusal({ prompt: 'a' }, noDefault)).to.deep.include({ field: 'model' });
  });

  it('too many turns or too much text: 413', () => {
    const turns = Array.from({ length: 4 }, () => ({ role: 'user', content: 'x' }));
    expect(refusal({ messages: turns })).to.deep.include({ status: 'too_large', code: 'too_many_messages' });
    expect(refusal({ prompt: 'é'.repeat(33) })).to.deep.include({ status: 'too_large', code: 'prompt_too_large' });
    expect(refusal({ prompt: 'x', instructions: 'y'.repeat(64) })).to.deep.include({ code: 'prompt_too_large' });
  });

  it('coach: a draft of a coach session, recorded as coach_local_draft', () => {
    const p = { source: 'coach', coachSessionId: 'cs-1' };
    expect(parseRunRequest({ prompt: 'q', parameters: p }, config)).to.deep.include({
      source: 'coach',
      actionName: 'coach_local_draft',
    });
    expect(refusal({ prompt: 'q', parameters: { source: 'coach' } })).to.deep.include({
      field: 'parameters.coachSessionId',
    });
    expect(refusal({ prompt: 'q', actionName: 'other', parameters: p })).to.deep.include({ field: 'actionName' });
    expect(refusal({ prompt: 'q', parameters: { source: 'lab' } })).to.deep.include({ field: 'parameters.source' });
  });

  it('coach curate: the draft to curate, and the edited answer if any; no prompt, stream or recordTrace false', () => {
    const curate = { source: 'coach', coachSessionId: 'cs-1', curate: { draftTraceId: 't1' } };
    expect(parseRunRequest({ parameters: curate }, config)).to.deep.include({
      kind: 'curate',
      draftTraceId: 't1',
      coachSessionId: 'cs-1',
    });
    const edited = { ...curate, curate: { draftTraceId: 't1', response: 'better' } };
    expect(parseRunRequest({ parameters: edited, recordTrace: true }, config)).to.deep.include({ response: 'better' });
    expect(refusal({ parameters: { ...curate, source: 'agent_lab' } })).to.deep.include({ field: 'parameters.source' });
    expect(refusal({ parameters: { ...curate, coachSessionId: undefined } })).to.deep.include({
      field: 'parameters.coachSessionId',
    });
    expect(refusal({ prompt: 'q', parameters: curate })).to.deep.include({ field: 'parameters.curate' });
    expect(refusal({ parameters: curate, stream: true })).to.deep.include({ field: 'stream' });
    expect(refusal({ parameters: curate, recordTrace: false })).to.deep.include({ field: 'recordTrace' });
    expect(refusal({ parameters: { ...curate, curate: { draftTraceId: '' } } })).to.deep.include({
      field: 'parameters.curate.draftTraceId',
    });
    expect(refusal({ parameters: { ...curate, curate: { draftTraceId: 't', extra: 1 } } })).to.deep.include({
      field: 'parameters.curate',
    });
  });
});

describe('local run mapper', () => {
  const run: LocalRun = {
    traceId: '0af7651916cd43dd8448eb211c80319c',
    requestId: 'req-1',
    source: 'agent_lab',
    actionName: 'qa',
    model: 'llama3.2:latest',
    api: 'ollama',
    instructions: 'Be terse',
    turns: [
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello' },
      { role: 'user', content: 'Again' },
    ],
    output: 'Hello again',
    promptTokens: 12,
    completionTokens: 3,
    finishReason: 'stop',
    latencyMs: 250,
    endMs: 1_763_787_000_250,
    status: 'completed',
    statusMessage: '',
    parameters: { coachSessionId: 'x', note: 'n' },
    trainingPreferred: false,
    generation: { maxTokens: 64 },
  };

  it('one llm span: model, prompt with the turns kept as messages, response, tokens, latency, cost 0', () => {
    const s = mapLocalRun(run, 'ws_1');
    expect(s).to.deep.include({
      workspaceId: 'ws_1',
      traceId: run.traceId,
      requestId: 'req-1',
      name: 'qa',
      kind: 'llm',
      source: 'agent_lab',
      status: 'completed',
      model: 'llama3.2:latest',
      provider: 'ollama',
      prompt: 'system: Be terse\nuser: Hi\nassistant: Hello\nuser: Again',
      response: 'Hello again',
      promptTokens: 12,
      completionTokens: 3,
      totalTokens: 15,
      costUsd: 0,
      finishReason: 'stop',
      actionName: 'qa',
      durationMs: 250,
      startTimeNs: '1763787000000000000',
      endTimeNs: '1763787000250000000',
      trainable: true,
      trainingPreferred: false,
    });
    expect(s.spanId).to.match(/^[0-9a-f]{16}$/);
    expect(s.attributes).to.deep.equal({
      parameters: { coachSessionId: 'x', note: 'n', source: 'agent_lab' },
      messages: run.turns,
      instructions: 'Be terse',
      'local_model.generation': { maxTokens: 64 },
      'local_model.api': 'ollama',
      'tracegate.cost_source': 'local',
    });
  });

  it('a failed run: status error with its message, never trainable; openai servers are provider local', () => {
    const s = mapLocalRun({ ...run, api: 'openai', status: 'error', statusMessage: 'down', output: 'Hel' }, 'ws_1');
    expect([s.status, s.statusMessage, s.trainable, s.provider]).to.deep.equal(['error', 'down', false, 'local']);
    expect(promptText(undefined, [{ role: 'user', content: 'only' }])).to.equal('user: only');
  });
});

describe('the tiny test model', () => {
  it('is written byte for byte the same every time, a 3.8 MB GGUF', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tiny-gguf-'));
    try {
      const a = writeTinyGguf(join(dir, 'a.gguf'));
      const b = tinyGguf();
      expect(a.bytes).to.equal(3_786_432);
      expect(createHash('sha256').update(b).digest('hex')).to.equal(a.sha256);
      expect(readFileSync(join(dir, 'a.gguf')).subarray(0, 4).toString()).to.equal('GGUF');
      expect(TINY_REPLY).to.equal('Hello from the tracegate test model.');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
