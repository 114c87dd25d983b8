/**
 * A stored model call → the conversation it answered, in OpenAI's chat format: system prompt, the turns before the
 * answer (tool calls as assistant `tool_calls`, their results as `tool` messages) and the answer itself. Pure.
 *
 * | part          | from (first found)                                                                            |
 * |---------------|-----------------------------------------------------------------------------------------------|
 * | turns         | `gen_ai.input.messages` (GenAI parts, OpenAI chat messages or Responses items; structured or   |
 * |               | JSON text; the proxy and agent generation spans store it) → OpenInference `llm.input_messages` |
 * |               | (flattened or a list) → OpenLLMetry `gen_ai.prompt.N.*` → Vercel `ai.prompt.messages` → the    |
 * |               | legacy `gen_ai.{system,user,assistant,tool}.message` events → the stored prompt as one user    |
 * |               | message                                                                                       |
 * | system        | `gen_ai.system_instructions`, unless the turns hold a system message                          |
 * | answer        | `gen_ai.output.messages` → OpenInference `llm.output_messages` → OpenLLMetry `gen_ai.completion` |
 * |               | → `gen_ai.choice` events: the text and tool calls of its assistant turns; the stored response    |
 * |               | when they give no text                                                                        |
 * | tool calls    | in the turns; when they hold none, the trace's tool spans (`gen_ai.tool.name`, `…call.id`,     |
 * |               | `…call.arguments`, `…call.result`) started before the call ended (all of them for the           |
 * |               | single-span sources: native, sdk, coach, agent_lab), as one assistant turn and its results      |
 * | tools         | `gen_ai.tool.definitions` → OpenInference `llm.tools.N.tool.json_schema` → OpenLLMetry          |
 * |               | `llm.request.functions.N.*` → Vercel `ai.prompt.tools`: function tools                         |
 *
 * The result is valid by construction: roles are system, user, assistant and tool (developer → system, model → assistant);
 * every message has text, or tool calls; each tool message answers a call of an earlier assistant message (calls left
 * unanswered and results of no call are dropped); the conversation ends with the answer.
 */
import type { AttrValue, Attributes, SpanEvent, SpanRecord } from '../core/record.ts';

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}
export interface SystemMessage {
  role: 'system';
  content: string;
}
export interface UserMessage {
  role: 'user';
  content: string;
}
export interface AssistantMessage {
  role: 'assistant';
  content?: string;
  tool_calls?: ToolCall[];
  /** 0: not trained on (an earlier turn of the conversation, not the rated answer). */
  weight?: 0;
}
export interface ToolMessage {
  role: 'tool';
  tool_call_id: string;
  content: string;
}
export type ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage;
export interface ToolDefinition {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

export interface Conversation {
  /** Everything before the answer. */
  messages: ChatMessage[];
  answer: AssistantMessage;
  tools: ToolDefinition[];
}

type Role = 'system' | 'user' | 'assistant' | 'tool';
interface Call {
  id: string;
  name: string;
  arguments: string;
}
/** A message in any convention, read: its role, text, the calls it makes (assistant) or the call it answers (tool). */
interface Turn {
  role: Role;
  text: string;
  calls: Call[];
  callId: string;
}
type Obj = Record<string, unknown>;

const ROLES: Readonly<Record<string, Role>> = {
  system: 'system',
  developer: 'system',
  user: 'user',
  human: 'user',
  assistant: 'assistant',
  model: 'assistant',
  ai: 'assistant',
  bot: 'assistant',
  tool: 'tool',
  function: 'tool',
  ipython: 'tool',
};
const TEXT_PARTS = new Set(['text', 'input_text', 'output_text']);
const EVENT_ROLES: Readonly<Record<string, Role>> = {
  'gen_ai.system.message': 'system',
  'gen_ai.user.message': 'user',
  'gen_ai.assistant.message': 'assistant',
  'gen_ai.tool.message': 'tool',
};
/** Sources whose trace is one model call: every tool span of the trace belongs to it. */
const SINGLE_CALL_SOURCES = new Set(['native', 'sdk', 'coach', 'agent_lab']);

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const own = (o: Obj, k: string): unknown => (Object.hasOwn(o, k) ? o[k] : undefined);

/** A JSON value given as text (as attributes often carry it), parsed; anything else as is. */
function parsed(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  const c = v.trimStart().charAt(0);
  if (c !== '[' && c !== '{') return v;
  try {
    return JSON.parse(v) as unknown;
  } catch {
    return v;
  }
}

/** A tool call's arguments as OpenAI carries them: JSON text. */
function argumentsText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v === undefined || v === null) return '{}';
  return JSON.stringify(v);
}

/** Text of a content value: a string, a list of parts (their text), or JSON for anything else. */
function contentText(v: unknown): string {
  const value = parsed(v);
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  if (Array.isArray(value)) {
    const texts = value.flatMap((p) => {
      if (typeof p === 'string') return [p];
      if (!isObj(p)) return [];
      const type = str(p.type);
      if (type === '' || TEXT_PARTS.has(type)) return [str(p.text) || str(p.content)];
      return [];
    });
    if (texts.length || value.every((p) => isObj(p) && typeof p.type === 'string')) return texts.join('\n');
  }
  return JSON.stringify(value);
}

const turn = (role: Role, text = '', calls: Call[] = [], callId = ''): Turn => ({ role, text, calls, callId });

/** The turns of one message or item, in any of the conventions in the table at the top. */
function turnsOf(raw: unknown, defaultRole: Role): Turn[] {
  const item = parsed(raw);
  if (typeof item === 'string') return item ? [turn(defaultRole, item)] : [];
  if (!isObj(item)) return [];
  if (isObj(item.message) && item.role === undefined) return turnsOf(item.message, defaultRole); // a choice
  const type = str(item.type);
  // Responses API items
  if (type === 'function_call' || type === 'custom_tool_call')
    return [
      turn('assistant', '', [
        {
          id: str(item.call_id) || str(item.id),
          name: str(item.name),
          arguments: argumentsText(item.arguments ?? item.input),
        },
      ]),
    ];
  if (type === 'function_call_output' || type === 'custom_tool_call_output')
    return [turn('tool', contentText(item.output), [], str(item.call_id))];
  if (type !== '' && type !== 'message' && item.role === undefined) return []; // reasoning, built-in tool calls, …
  const role = item.role === undefined ? defaultRole : ROLES[str(item.role).toLowerCase()];
  if (role === undefined) return [];
  const main = turn(role, '', [], str(item.tool_call_id) || str(item.toolCallId));
  const results: Turn[] = [];
  const parts = Array.isArray(item.parts)
    ? item.parts
    : Array.isArray(parsed(item.content))
      ? (parsed(item.content) as unknown[])
      : null;
  if (parts) readParts(parts, main, results);
  else main.text = contentText(item.content);
  for (const c of Array.isArray(item.tool_calls) ? item.tool_calls : []) {
    if (!isObj(c)) continue;
    const fn = isObj(c.function) ? c.function : c;
    main.calls.push({ id: str(c.id), name: str(fn.name), arguments: argumentsText(fn.arguments) });
  }
  if (isObj(item.function_call))
    main.calls.push({
      id: '',
      name: str(item.function_call.name),
      arguments: argumentsText(item.function_call.arguments),
    });
  return main.text || main.calls.length || role === 'tool' ? [main, ...results] : results;
}

/** Content parts into a turn: text, tool calls (GenAI, Anthropic, Vercel), and tool results as turns of their own. */
function readParts(parts: readonly unknown[], into: Turn, results: Turn[]): void {
  const texts: string[] = [];
  for (const p of parts) {
    if (typeof p === 'string') {
      texts.push(p);
      continue;
    }
    if (!isObj(p)) continue;
    const type = str(p.type);
    if (type === '' || TEXT_PARTS.has(type)) texts.push(str(p.text) || str(p.content));
    else if (type === 'tool_call' || type === 'tool_use' || type === 'tool-call')
      into.calls.push({
        id: str(p.id) || str(p.toolCallId),
        name: str(p.name) || str(p.toolName),
        arguments: argumentsText(p.arguments ?? p.input ?? p.args),
      });
    else if (type === 'tool_call_response' || type === 'tool_result' || type === 'tool-result')
      results.push(
        turn(
          'tool',
          contentText(p.response ?? p.result ?? p.content ?? p.output),
          [],
          str(p.id) || str(p.tool_use_id) || str(p.toolCallId),
        ),
      );
  }
  into.text = texts.filter((t) => t !== '').join('\n');
}

function turnsOfList(v: unknown, defaultRole: Role): Turn[] | null {
  const list = parsed(v);
  if (!Array.isArray(list) || list.length === 0) return null;
  const turns = list.flatMap((m) => turnsOf(m, defaultRole));
  return turns.length ? turns : null;
}

/**
 * Flattened attributes under `prefix` (`llm.input_messages.0.message.role`, `gen_ai.prompt.1.tool_calls.0.name`) as
 * the list they flatten, numbered segments becoming list positions.
 */
export function unflatten(attrs: Attributes, prefix: string): unknown[] | null {
  const root: Obj = {};
  let found = false;
  for (const key of Object.keys(attrs)) {
    if (!key.startsWith(prefix)) continue;
    const path = key.slice(prefix.length).split('.');
    if (!/^\d{1,6}$/.test(path[0]!)) continue;
    let node = root;
    for (let i = 0; i < path.length - 1; i++) {
      const seg = path[i]!;
      const next = own(node, seg);
      if (isObj(next)) node = next;
      else {
        const fresh: Obj = {};
        Object.defineProperty(node, seg, { value: fresh, enumerable: true, writable: true, configurable: true });
        node = fresh;
      }
    }
    Object.defineProperty(node, path.at(-1)!, {
      value: attrs[key],
      enumerable: true,
      writable: true,
      configurable: true,
    });
    found = true;
  }
  if (!found) return null;
  return listOf(root) as unknown[];
}

/** Objects whose keys are all numbers as lists, in number order, all the way down. */
function listOf(v: unknown): unknown {
  if (!isObj(v)) return v;
  const keys = Object.keys(v);
  if (keys.length && keys.every((k) => /^\d{1,6}$/.test(k)))
    return keys.sort((a, b) => Number(a) - Number(b)).map((k) => listOf(v[k]));
  const out: Obj = {};
  for (const k of keys)
    Object.defineProperty(out, k, { value: listOf(v[k]), enumerable: true, writable: true, configurable: true });
  return out;
}

/** OpenInference's flattened messages hold each under `message`. */
const openInference = (list: unknown[] | null) =>
  list?.map((m) => (isObj(m) && isObj(m.message) ? m.message : m)) ?? null;

function eventTurns(events: readonly SpanEvent[]): Turn[] | null {
  const turns: Turn[] = [];
  for (const e of events) {
    const role = Object.hasOwn(EVENT_ROLES, e.name) ? EVENT_ROLES[e.name] : undefined;
    if (role === undefined) continue;
    const body = parsed(e.attributes['gen_ai.event.content'] ?? e.attributes.body) ?? e.attributes;
    turns.push(...turnsOf(isObj(body) ? { role, ...body } : body, role));
  }
  return turns.length ? turns : null;
}

function inputTurns(span: SpanRecord): Turn[] | null {
  const A = span.attributes;
  return (
    turnsOfList(A['gen_ai.input.messages'], 'user') ??
    turnsOfList(openInference(unflatten(A, 'llm.input_messages.')), 'user') ??
    turnsOfList(openInference(A['llm.input_messages'] as unknown[] | null), 'user') ??
    turnsOfList(unflatten(A, 'gen_ai.prompt.'), 'user') ??
    turnsOfList(A['ai.prompt.messages'], 'user') ??
    eventTurns(span.events)
  );
}

function outputTurns(span: SpanRecord): Turn[] | null {
  const A = span.attributes;
  const choices = span.events.filter((e) => e.name === 'gen_ai.choice');
  return (
    turnsOfList(A['gen_ai.output.messages'], 'assistant') ??
    turnsOfList(openInference(unflatten(A, 'llm.output_messages.')), 'assistant') ??
    turnsOfList(openInference(A['llm.output_messages'] as unknown[] | null), 'assistant') ??
    turnsOfList(unflatten(A, 'gen_ai.completion.'), 'assistant') ??
    turnsOfList(
      choices.map((e) => parsed(e.attributes['gen_ai.event.content'] ?? e.attributes.message ?? e.attributes.body)),
      'assistant',
    )
  );
}

/** System instructions: a string, parts, or either as JSON text. */
function systemText(v: AttrValue | undefined): string {
  const value = parsed(v);
  if (value === undefined || value === null) return '';
  return contentText(value);
}

function toolDefinitions(A: Attributes): ToolDefinition[] {
  const lists: unknown[][] = [];
  const semconv = parsed(A['gen_ai.tool.definitions']);
  if (Array.isArray(semconv)) lists.push(semconv);
  const oi = unflatten(A, 'llm.tools.');
  if (oi) lists.push(oi.map((t) => (isObj(t) && isObj(t.tool) ? parsed(t.tool.json_schema) : t)));
  const ol = unflatten(A, 'llm.request.functions.');
  if (ol) lists.push(ol);
  const vercel = parsed(A['ai.prompt.tools']);
  if (Array.isArray(vercel)) lists.push(vercel.map(parsed));
  for (const list of lists) {
    const defs = list.flatMap((t) => {
      const d = toolDefinition(t);
      return d ? [d] : [];
    });
    if (defs.length) return defs;
  }
  return [];
}

function toolDefinition(raw: unknown): ToolDefinition | null {
  const t = parsed(raw);
  if (!isObj(t)) return null;
  if (t.type !== undefined && t.type !== 'function') return null; // built-in tools have no schema to train on
  const fn = isObj(t.function) ? t.function : t;
  const name = str(fn.name);
  if (!name) return null;
  const parameters = parsed(fn.parameters ?? fn.inputSchema ?? fn.input_schema);
  const description = str(fn.description);
  return {
    type: 'function',
    function: {
      name,
      ...(description ? { description } : {}),
      ...(isObj(parameters) ? { parameters } : {}),
    },
  };
}

/** The trace's tool spans as one assistant turn calling them and a result turn each. */
function toolSpanTurns(span: SpanRecord, tools: readonly SpanRecord[]): Turn[] {
  const end = BigInt(span.endTimeNs);
  const mine = SINGLE_CALL_SOURCES.has(span.source) ? tools : tools.filter((t) => BigInt(t.startTimeNs) <= end);
  if (mine.length === 0) return [];
  const calls = mine.map((t) => ({
    id: str(t.attributes['gen_ai.tool.call.id']) || `call_${t.spanId}`,
    name: str(t.attributes['gen_ai.tool.name']) || t.actionName || t.name.replace(/^execute_tool /, ''),
    arguments: argumentsText(parsed(t.attributes['gen_ai.tool.call.arguments']) ?? (t.prompt || undefined)),
  }));
  const results = mine.map((t, i) => {
    const result = t.attributes['gen_ai.tool.call.result'] ?? (t.response || undefined);
    const text =
      result !== undefined ? contentText(result) : t.status === 'error' ? `error: ${t.statusMessage || 'failed'}` : '';
    return turn('tool', text, [], calls[i]!.id);
  });
  return [turn('assistant', '', calls), ...results];
}

/** Call ids given where missing (`call_<n>`), a result without one taking the oldest call still unanswered. */
function withCallIds(turns: Turn[]): Turn[] {
  let n = 0;
  const open: Call[] = [];
  for (const t of turns) {
    for (const c of t.calls) {
      if (!c.id) c.id = `call_${++n}`;
      open.push(c);
    }
    if (t.role === 'tool') {
      const i = t.callId ? open.findIndex((c) => c.id === t.callId) : 0;
      if (i >= 0 && open[i]) {
        t.callId = open[i]!.id;
        open.splice(i, 1);
      }
    }
  }
  return turns;
}

/**
 * Consecutive assistant turns as one (a Responses message item and its function_call items); calls without a result
 * before the next turn that is not a tool result dropped, and results of no call; empty turns dropped.
 */
function tidy(turns: readonly Turn[]): Turn[] {
  const merged: Turn[] = [];
  for (const t of turns) {
    const prev = merged.at(-1);
    if (t.role === 'assistant' && prev?.role === 'assistant' && (prev.calls.length === 0 || t.text === '')) {
      prev.text = [prev.text, t.text].filter(Boolean).join('\n');
      prev.calls.push(...t.calls);
    } else merged.push({ ...t, calls: [...t.calls] });
  }
  const out: Turn[] = [];
  for (let i = 0; i < merged.length; i++) {
    const t = merged[i]!;
    if (t.role === 'tool') continue; // kept with the call it answers
    const results: Turn[] = [];
    for (let j = i + 1; j < merged.length && merged[j]!.role === 'tool'; j++) results.push(merged[j]!);
    const answered = new Map(results.filter((r) => r.text !== '').map((r) => [r.callId, r]));
    const calls = t.calls.filter((c) => c.name !== '' && answered.has(c.id));
    if (t.text === '' && calls.length === 0) continue;
    out.push({ ...t, calls });
    for (const c of calls) out.push(answered.get(c.id)!);
  }
  return out;
}

function toMessage(t: Turn, history: boolean): ChatMessage {
  if (t.role === 'tool') return { role: 'tool', tool_call_id: t.callId, content: t.text };
  if (t.role !== 'assistant') return { role: t.role, content: t.text };
  return {
    role: 'assistant',
    ...(t.text ? { content: t.text } : {}),
    ...(t.calls.length
      ? {
          tool_calls: t.calls.map((c) => ({
            id: c.id,
            type: 'function' as const,
            function: { name: c.name, arguments: c.arguments },
          })),
        }
      : {}),
    ...(history ? { weight: 0 as const } : {}),
  };
}

/** The conversation a trainable model call answered (see the table at the top); `tools`: its trace's tool spans. */
export function conversationOf(span: SpanRecord, tools: readonly SpanRecord[] = []): Conversation {
  let turns = inputTurns(span) ?? (span.prompt ? [turn('user', span.prompt)] : []);
  const system = systemText(span.attributes['gen_ai.system_instructions']);
  if (system && !turns.some((t) => t.role === 'system')) turns = [turn('system', system), ...turns];
  const out = (outputTurns(span) ?? []).filter((t) => t.role === 'assistant');
  const answer = turn(
    'assistant',
    out
      .map((t) => t.text)
      .filter(Boolean)
      .join('\n') || span.response,
    out.flatMap((t) => t.calls),
  );
  // An input that repeats the answer as its last turn (some instrumentations log the whole exchange as input).
  const last = turns.at(-1);
  if (last?.role === 'assistant' && last.text === answer.text && last.calls.length === 0) turns = turns.slice(0, -1);
  if (!turns.some((t) => t.calls.length > 0 || t.role === 'tool')) turns = [...turns, ...toolSpanTurns(span, tools)];
  withCallIds([...turns, answer]);
  const messages = tidy(turns).map((t) => toMessage(t, true));
  return {
    messages: messages.length ? messages : [{ role: 'user', content: span.prompt }],
    // The answer has text (the call is trainable); its own calls need no results.
    answer: toMessage({ ...answer, calls: answer.calls.filter((c) => c.name !== '') }, false) as AssistantMessage,
    tools: toolDefinitions(span.attributes),
  };
}
