// Prompts and answers as the native trace stores them: text. Rendered the way tracegate's proxy renders a
// Responses request, so traces from the SDK and from the proxy read alike: one user message is its text; anything
// else is `role: text` blocks separated by a blank line.

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export interface TextPart {
  role: string;
  text: string;
}

export function renderParts(parts: readonly TextPart[]): string {
  if (parts.length === 1 && parts[0]!.role === 'user') return parts[0]!.text;
  return parts.map((p) => `${p.role}: ${p.text}`).join('\n\n');
}

/** The text of a message's `content`: a string, or the text of its text parts. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((c) => (isObject(c) && typeof c.text === 'string' ? c.text : isObject(c) ? str(c.refusal) : ''))
    .filter(Boolean)
    .join('\n');
}

/** Text parts of a list of messages (chat `messages`, or Responses input items). */
export function messageParts(messages: readonly unknown[]): TextPart[] {
  const parts: TextPart[] = [];
  for (const m of messages) {
    if (typeof m === 'string') {
      if (m) parts.push({ role: 'user', text: m });
      continue;
    }
    if (!isObject(m)) continue;
    if (m.type === 'function_call_output') {
      const text = typeof m.output === 'string' ? m.output : contentText(m.output);
      if (text) parts.push({ role: 'tool', text });
      continue;
    }
    const text = contentText(m.content);
    if (text) parts.push({ role: str(m.role) || 'user', text });
  }
  return parts;
}

/** `trace()`'s input: text as is; a list of messages rendered; anything else as JSON. */
export function promptText(input: unknown): string | undefined {
  if (input === undefined || input === null) return undefined;
  if (typeof input === 'string') return input;
  if (Array.isArray(input)) return renderParts(messageParts(input));
  try {
    return JSON.stringify(input);
  } catch {
    return String(input);
  }
}

/** What a Responses request asks: its instructions, then its input. */
export function responsesPrompt(body: Json): string {
  const parts: TextPart[] = [];
  if (typeof body.instructions === 'string' && body.instructions)
    parts.push({ role: 'system', text: body.instructions });
  if (typeof body.input === 'string') {
    if (body.input) parts.push({ role: 'user', text: body.input });
  } else if (Array.isArray(body.input)) parts.push(...messageParts(body.input));
  return renderParts(parts);
}

/** What a Chat Completions request asks: its messages. */
export function chatPrompt(body: Json): string {
  return Array.isArray(body.messages) ? renderParts(messageParts(body.messages)) : '';
}

/** The text of a Responses answer: the `output_text` parts of its message items. */
export function responsesOutputText(resp: Json): string {
  if (!Array.isArray(resp.output)) return '';
  let text = '';
  for (const item of resp.output) {
    if (!isObject(item) || item.type !== 'message' || !Array.isArray(item.content)) continue;
    for (const c of item.content) if (isObject(c) && c.type === 'output_text') text += str(c.text);
  }
  return text;
}
