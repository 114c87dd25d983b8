// The export's line formats, the train/eval split, and the current policy's redaction of what a line says. Pure.
import { createHash } from 'node:crypto';
import type { Policy } from '../processors/governance/policy.ts';
import { actionFor } from '../processors/governance/policy.ts';
import { redact } from '../processors/governance/redact.ts';
import { scanFull } from '../processors/governance/scan.ts';
import type { AssistantMessage, ChatMessage, Conversation } from './messages.ts';

export const FORMATS = ['openai_chat', 'openai_dpo', 'hf_kto'] as const;
export type Format = (typeof FORMATS)[number];

/** OpenAI supervised fine-tuning (chat): the conversation and its answer, the tools it could call. */
export function chatLine(c: Conversation): Record<string, unknown> {
  return { messages: [...c.messages, c.answer], ...(c.tools.length ? { tools: c.tools } : {}) };
}

/** A history message without the SFT weight (the preference formats have none). */
function plain(m: ChatMessage): ChatMessage {
  if (m.role !== 'assistant' || m.weight === undefined) return m;
  const { weight: _w, ...rest } = m;
  return rest;
}

const output = (a: AssistantMessage): AssistantMessage => plain(a) as AssistantMessage;

/** OpenAI direct preference optimization: one input, the preferred and the other answer to it. */
export function dpoLine(
  input: Conversation,
  preferred: AssistantMessage,
  rejected: AssistantMessage,
): Record<string, unknown> {
  return {
    input: { messages: input.messages.map(plain), ...(input.tools.length ? { tools: input.tools } : {}) },
    preferred_output: [output(preferred)],
    non_preferred_output: [output(rejected)],
  };
}

/** Hugging Face TRL's unpaired preference (KTO), conversational: the prompt, the answer, whether it was approved. */
export function ktoLine(c: Conversation, label: boolean): Record<string, unknown> {
  return { prompt: c.messages.map(plain), completion: [output(c.answer)], label };
}

/**
 * Which side of the split a conversation is dealt to: the first 53 bits of SHA-256(seed, key) as a fraction of one,
 * `eval` below `evalFraction`. The same key lands on the same side in every export with the same seed.
 */
export function splitOf(key: string, evalFraction: number, seed: string): 'train' | 'eval' {
  const h = createHash('sha256').update(seed).update('\u0000').update(key).digest().readBigUInt64BE(0);
  return Number(h >> 11n) / 2 ** 53 < evalFraction ? 'eval' : 'train';
}

/** Keys whose strings are the format's own words or ids, not text anybody wrote. */
const STRUCTURAL = new Set(['role', 'type', 'id', 'tool_call_id', 'split', 'traceId', 'spanId']);

/**
 * The current policy's redaction, for lines: every string a policy could mask (message text, tool arguments and
 * results, tool schemas) is scanned by the governance detectors and each finding whose action is `redact` or
 * `block` is masked as ingestion masks it (`[REDACTED:email]`). A policy that only flags masks nothing: null.
 */
export function lineRedactor(policy: Policy): ((line: Record<string, unknown>) => Record<string, unknown>) | null {
  const masks = policy.defaultAction !== 'flag' || Object.values(policy.actions).some((a) => a !== 'flag');
  if (!masks) return null;
  const text = (s: string): string => {
    const hits = scanFull(s).filter((f) => {
      const a = actionFor(policy, f);
      return a === 'redact' || a === 'block';
    });
    return hits.length ? redact(s, hits) : s;
  };
  const walk = (v: unknown, key: string): unknown => {
    if (typeof v === 'string') return STRUCTURAL.has(key) ? v : text(v);
    if (Array.isArray(v)) return v.map((x) => walk(x, key));
    if (typeof v !== 'object' || v === null) return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v))
      Object.defineProperty(out, k, { value: walk(x, k), enumerable: true, writable: true, configurable: true });
    return out;
  };
  return (line) => walk(line, '') as Record<string, unknown>;
}
