// The checks OpenAI makes on a chat fine-tuning example before it trains: the format checks of its cookbook's
// "Data preparation and analysis for chat model fine-tuning" (data_type, missing_messages_list,
// message_missing_key, message_unrecognized_key, unrecognized_role, missing_content,
// example_missing_assistant_message) with the keys and roles the fine-tuning API takes today (tool, tool_calls,
// tool_call_id, weight), and what its upload validation refuses besides: a last message that is not the
// assistant's, empty content, a weight other than 0 or 1, malformed tool calls (id, type "function", a name,
// arguments as JSON text), a tool message answering no earlier call, tools without a function name.

const ROLES = new Set(['system', 'user', 'assistant', 'tool', 'function', 'developer']);
const KEYS = new Set(['role', 'content', 'name', 'function_call', 'weight', 'tool_calls', 'tool_call_id']);

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Problems with one message list (empty when it passes); `needLastAssistant`: SFT's rule. */
export function messageProblems(messages: unknown, needLastAssistant = true): string[] {
  if (!Array.isArray(messages) || messages.length === 0) return ['missing_messages_list'];
  const problems: string[] = [];
  const calls = new Set<string>();
  for (const [i, m] of messages.entries()) {
    const at = (p: string) => problems.push(`messages[${i}]: ${p}`);
    if (!isObj(m)) {
      at('data_type: not an object');
      continue;
    }
    for (const k of Object.keys(m)) if (!KEYS.has(k)) at(`message_unrecognized_key: ${k}`);
    if (typeof m.role !== 'string') {
      at('message_missing_key: role');
      continue;
    }
    if (!ROLES.has(m.role)) at(`unrecognized_role: ${m.role}`);
    const toolCalls = m.tool_calls;
    const hasCalls = Array.isArray(toolCalls) && toolCalls.length > 0;
    if (m.content === undefined || m.content === null) {
      if (!(m.role === 'assistant' && hasCalls)) at('missing_content');
    } else if (typeof m.content !== 'string') at('missing_content: content is not text');
    else if (m.content.trim() === '' && !(m.role === 'assistant' && hasCalls)) at('empty content');
    if (m.weight !== undefined && m.weight !== 0 && m.weight !== 1) at(`weight ${String(m.weight)} is not 0 or 1`);
    if (m.weight !== undefined && m.role !== 'assistant') at('weight on a message that is not the assistant’s');
    if (toolCalls !== undefined) {
      if (m.role !== 'assistant') at('tool_calls on a message that is not the assistant’s');
      if (!Array.isArray(toolCalls) || toolCalls.length === 0) at('tool_calls is not a non-empty list');
      else
        for (const [j, c] of toolCalls.entries()) for (const p of callProblems(c, calls)) at(`tool_calls[${j}]: ${p}`);
    }
    if (m.role === 'tool') {
      if (typeof m.tool_call_id !== 'string' || !calls.has(m.tool_call_id)) at('tool message answers no earlier call');
    } else if (m.tool_call_id !== undefined) at('tool_call_id on a message that is not a tool result');
  }
  if (!messages.some((m) => isObj(m) && m.role === 'assistant') && needLastAssistant)
    problems.push('example_missing_assistant_message');
  const last = messages.at(-1);
  if (needLastAssistant && !(isObj(last) && last.role === 'assistant'))
    problems.push('last message is not the assistant’s');
  return problems;
}

/** Problems with one tool call; its id added to `calls`. */
function callProblems(c: unknown, calls: Set<string>): string[] {
  if (!isObj(c)) return ['not an object'];
  const problems: string[] = [];
  if (typeof c.id !== 'string' || c.id === '') problems.push('no id');
  else calls.add(c.id);
  if (c.type !== 'function') problems.push(`type ${String(c.type)} is not function`);
  const fn = c.function;
  if (!isObj(fn) || typeof fn.name !== 'string' || fn.name === '') return [...problems, 'no function name'];
  if (typeof fn.arguments !== 'string') return [...problems, 'arguments are not JSON text'];
  try {
    JSON.parse(fn.arguments);
  } catch {
    problems.push('arguments are not valid JSON');
  }
  return problems;
}

function toolsProblems(tools: unknown): string[] {
  if (tools === undefined) return [];
  if (!Array.isArray(tools)) return ['tools is not a list'];
  return tools.flatMap((t, i) =>
    isObj(t) && t.type === 'function' && isObj(t.function) && typeof t.function.name === 'string' && t.function.name
      ? []
      : [`tools[${i}]: not a function tool with a name`],
  );
}

/** Problems with one openai_chat line (its `split` and `metadata`, tracegate's own marks, allowed). */
export function chatLineProblems(line: unknown): string[] {
  if (!isObj(line)) return ['data_type: not an object'];
  const extra = Object.keys(line).filter(
    (k) => !['messages', 'tools', 'parallel_tool_calls', 'split', 'metadata'].includes(k),
  );
  return [
    ...extra.map((k) => `unrecognized key ${k}`),
    ...messageProblems(line.messages),
    ...toolsProblems(line.tools),
  ];
}

/** Problems with one openai_dpo line: the input as a conversation to answer, one assistant message on each side. */
export function dpoLineProblems(line: unknown): string[] {
  if (!isObj(line) || !isObj(line.input)) return ['input missing'];
  const problems = [...messageProblems(line.input.messages, false), ...toolsProblems(line.input.tools)];
  if (line.input.messages && Array.isArray(line.input.messages) && line.input.messages.at(-1)?.role === 'assistant')
    problems.push('input ends with an assistant message');
  for (const side of ['preferred_output', 'non_preferred_output']) {
    const out = line[side];
    if (!Array.isArray(out) || out.length !== 1) problems.push(`${side}: not one message`);
    else
      problems.push(
        ...messageProblems(out)
          .map((p) => `${side}: ${p}`)
          .filter((p) => !p.includes('tool message')),
      );
  }
  return problems;
}

/** Throws naming every problem of the first line that fails (a test helper). */
export function expectValidChatLines(lines: readonly unknown[]): void {
  lines.forEach((l, i) => {
    const p = chatLineProblems(l);
    if (p.length)
      throw new Error(`line ${i + 1} fails OpenAI's fine-tuning checks: ${p.join('; ')}\n${JSON.stringify(l)}`);
  });
}

export function expectValidDpoLines(lines: readonly unknown[]): void {
  lines.forEach((l, i) => {
    const p = dpoLineProblems(l);
    if (p.length) throw new Error(`line ${i + 1} fails OpenAI's DPO checks: ${p.join('; ')}\n${JSON.stringify(l)}`);
  });
}
