// Prompts, responses and tool payloads: chat messages when the text is a message list, markdown (sanitized) or raw
// text, and only a preview of a large payload until the reader asks for all of it.
import DOMPurify from 'dompurify';
import { marked } from 'marked';
import { useState } from 'preact/hooks';
import { html } from '../lib/html.js';

/** Characters shown before "Show all". */
export const PREVIEW_CHARS = 4000;

/** @param {string} text */
export function markdown(text) {
  const rendered = /** @type {string} */ (marked.parse(text, { async: false, gfm: true, breaks: true }));
  // No images, styles or forms from a payload: they could load from elsewhere or dress up as the UI.
  return DOMPurify.sanitize(rendered, {
    FORBID_TAGS: ['img', 'style', 'form', 'input', 'button', 'iframe', 'video', 'audio', 'svg'],
    FORBID_ATTR: ['style', 'class', 'id'],
  });
}

/** @param {string} text @returns {unknown} */
export function parseJson(text) {
  const t = text.trim();
  if (!(t.startsWith('[') || t.startsWith('{'))) return undefined;
  try {
    return JSON.parse(t);
  } catch {
    return undefined;
  }
}

/**
 * Chat messages in a payload: an array of { role, content }, { messages: [...] } or { input: [...] } (the Responses
 * API), content a string or a list of parts.
 * @param {unknown} value @returns {Array<{ role: string, text: string, toolCalls: any[] }> | null}
 */
export function messagesOf(value) {
  const obj = /** @type {any} */ (value);
  const list = Array.isArray(obj) ? obj : obj && typeof obj === 'object' ? (obj.messages ?? obj.input) : null;
  if (!Array.isArray(list) || list.length === 0) return null;
  if (!list.every((m) => m && typeof m === 'object' && ('role' in m || 'type' in m))) return null;
  return list.map((m) => {
    // OpenTelemetry GenAI messages carry `parts`: text, tool calls, tool results.
    const parts = Array.isArray(m.parts) ? m.parts : null;
    const calls = parts ? parts.filter((/** @type {any} */ p) => p?.type === 'tool_call') : [];
    return {
      role: String(m.role ?? m.type ?? ''),
      text: textOf(
        parts
          ? parts.filter((/** @type {any} */ p) => p?.type !== 'tool_call')
          : (m.content ?? m.output ?? m.arguments ?? ''),
      ),
      toolCalls: Array.isArray(m.tool_calls) ? m.tool_calls : calls,
    };
  });
}

const ROLE_LINE = /^(system|developer|user|assistant|tool): ?/;

/**
 * A prompt as the collector renders message lists: one `role: text` line per message (a message's further lines
 * follow it). Null when the text does not start that way.
 * @param {string} text @returns {Array<{ role: string, text: string, toolCalls: any[] }> | null}
 */
export function roleLines(text) {
  if (!ROLE_LINE.test(text)) return null;
  /** @type {Array<{ role: string, text: string, toolCalls: any[] }>} */
  const out = [];
  for (const line of text.split('\n')) {
    const m = ROLE_LINE.exec(line);
    if (m) out.push({ role: m[1], text: line.slice(m[0].length), toolCalls: [] });
    else out[out.length - 1].text += `\n${line}`;
  }
  return out;
}

/** @param {unknown} content @returns {string} */
function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content.map((p) => (typeof p === 'string' ? p : (p?.text ?? p?.content ?? JSON.stringify(p)))).join('\n');
  return content === null || content === undefined ? '' : JSON.stringify(content, null, 2);
}

/** @param {{ text: string, mode: 'md' | 'raw' }} props */
function Body({ text, mode }) {
  const [all, setAll] = useState(false);
  const long = text.length > PREVIEW_CHARS;
  const shown = long && !all ? text.slice(0, PREVIEW_CHARS) : text;
  return html`
    ${
      mode === 'md'
        ? html`<div class="md" dangerouslySetInnerHTML=${{ __html: markdown(shown) }}></div>`
        : html`<pre class="raw">${shown}</pre>`
    }
    ${
      long &&
      html`<button type="button" class="quiet small" onClick=${() => setAll(!all)}>
      ${all ? 'Show less' : `Show all (${text.length.toLocaleString()} characters)`}
    </button>`
    }
  `;
}

/** A payload with a Chat/Markdown ↔ Raw switch. @param {{ label: string, text: string }} props */
export function Payload({ label, text }) {
  const [mode, setMode] = useState(/** @type {'md' | 'raw'} */ ('md'));
  if (!text) return null;
  const json = parseJson(text);
  const messages = json === undefined ? roleLines(text) : messagesOf(json);
  const pretty = json !== undefined && !messages ? JSON.stringify(json, null, 2) : null;
  return html`
    <section class="payload" aria-label=${label}>
      <div class="payload-head">
        <h3>${label}</h3>
        <div class="switch" role="group" aria-label=${`${label} view`}>
          <button type="button" aria-pressed=${mode === 'md'} onClick=${() => setMode('md')}>${messages ? 'Chat' : pretty ? 'JSON' : 'Markdown'}</button>
          <button type="button" aria-pressed=${mode === 'raw'} onClick=${() => setMode('raw')}>Raw</button>
        </div>
      </div>
      ${
        mode === 'raw'
          ? html`<${Body} text=${text} mode="raw" />`
          : messages
            ? html`<ol class="chat">${messages.map(
                (m, i) => html`<li key=${i} class=${`msg role-${m.role}`}>
                <span class="role">${m.role}</span>
                ${m.text && html`<${Body} text=${m.text} mode="md" />`}
                ${m.toolCalls.map((c) => html`<${ToolCall} call=${c} />`)}
              </li>`,
              )}</ol>`
            : pretty
              ? html`<${Body} text=${pretty} mode="raw" />`
              : html`<${Body} text=${text} mode="md" />`
      }
    </section>
  `;
}

/** A tool call inside a message: its name and arguments. @param {{ call: any }} props */
function ToolCall({ call }) {
  const fn = call?.function ?? call;
  const args = typeof fn?.arguments === 'string' ? (parseJson(fn.arguments) ?? fn.arguments) : fn?.arguments;
  return html`<div class="toolcall">
    <span class="tag">tool call</span> <b>${fn?.name ?? '?'}</b>
    <pre class="raw">${typeof args === 'string' ? args : JSON.stringify(args, null, 2)}</pre>
  </div>`;
}
