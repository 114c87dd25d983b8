// The local workbench (POST /api/local/run with the session cookie): a streamed chat with a local model, and the coach:
// a draft answer, edited, then curated into a training pick (coach_curated). "Re-run in the workbench" on a model call
// opens this page with that call's instructions and messages.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, postStream } from '../lib/api.js';
import { duration } from '../lib/format.js';
import { html } from '../lib/html.js';
import { Link, navigate } from '../lib/router.js';
import { markdown, messagesOf, parseJson, roleLines } from '../parts/content.js';

/** @typedef {{ role: 'system' | 'user' | 'assistant', content: string }} Turn */

/** A recorded model call's turns: its structured input messages when it has them, else its prompt's role lines. */
function turnsOfSpan(/** @type {any} */ span) {
  const raw = span.attributes['gen_ai.input.messages'];
  const parsed = typeof raw === 'string' ? parseJson(raw) : raw;
  const list = (parsed !== undefined && messagesOf(parsed)) ||
    roleLines(span.prompt) || [{ role: 'user', text: span.prompt }];
  return list
    .map((m) => ({ role: m.role === 'developer' ? 'system' : m.role, content: m.text }))
    .filter((m) => ['system', 'user', 'assistant'].includes(m.role));
}

const newCoachSession = () => `coach-${crypto.randomUUID().slice(0, 8)}`;

/** @param {{ loc: URL }} props */
export function Workbench({ loc }) {
  const [models, setModels] = useState(
    /** @type {{ defaultModel: string | null, models: Array<{ id: string }> } | null} */ (null),
  );
  const [error, setError] = useState('');
  const [mode, setMode] = useState(/** @type {'chat' | 'coach'} */ ('chat'));
  const [model, setModel] = useState('');
  const [instructions, setInstructions] = useState('');
  const [thread, setThread] = useState(/** @type {Turn[]} */ ([]));
  const [draftText, setDraftText] = useState('');
  const [source, setSource] = useState(/** @type {{ traceId: string, spanId: string } | null} */ (null));

  useEffect(() => {
    api('/api/local/models')
      .then((m) => {
        setModels(m);
        setModel((cur) => cur || m.defaultModel || m.models[0]?.id || '');
      })
      .catch((e) => setError(`The local model server cannot be reached: ${e.message}`));
  }, []);

  // Re-run a recorded model call: its turns, the last user turn left in the composer.
  const from = loc.searchParams.get('trace');
  const fromSpan = loc.searchParams.get('span');
  useEffect(() => {
    if (!from || !fromSpan) return;
    api(`/api/traces/${encodeURIComponent(from)}`)
      .then(({ trace }) => {
        const span = trace.spans.find((/** @type {any} */ s) => s.spanId === fromSpan);
        if (!span) return setError(`span ${fromSpan} is not in trace ${from}`);
        const turns = turnsOfSpan(span);
        setInstructions(
          turns
            .filter((t) => t.role === 'system')
            .map((t) => t.content)
            .join('\n'),
        );
        const rest = turns.filter((t) => t.role !== 'system');
        const last = rest.at(-1)?.role === 'user' ? rest.pop() : undefined;
        setThread(/** @type {Turn[]} */ (rest));
        setDraftText(last?.content ?? '');
        setSource({ traceId: from, spanId: fromSpan });
      })
      .catch((e) => setError(e.message));
  }, [from, fromSpan]);

  return html`
    <section class="workbench-page">
      <div class="pagehead">
        <h1>Workbench</h1>
        <div class="tabs" role="tablist" aria-label="Mode">
          <button type="button" role="tab" aria-selected=${mode === 'chat'} onClick=${() => setMode('chat')}>Chat</button>
          <button type="button" role="tab" aria-selected=${mode === 'coach'} onClick=${() => setMode('coach')}>Coach</button>
        </div>
      </div>
      ${
        source &&
        html`<p class="muted">Re-running a model call of trace <${Link} href=${`/ui/traces/${encodeURIComponent(source.traceId)}?span=${encodeURIComponent(source.spanId)}`}>${source.traceId}</${Link}>.
        <button type="button" class="quiet small" onClick=${() => {
          setSource(null);
          navigate('/ui/workbench', { replace: true });
        }}>Start over</button></p>`
      }
      ${error && html`<p class="error" role="alert">${error}</p>`}
      <div class="workbench">
        <div>
          ${
            mode === 'chat'
              ? html`<${Chat} model=${model} instructions=${instructions} thread=${thread} setThread=${setThread} text=${draftText} setText=${setDraftText} />`
              : html`<${Coach} model=${model} instructions=${instructions} text=${draftText} setText=${setDraftText} />`
          }
        </div>
        <aside class="controls" aria-label="Settings">
          <label>Model
            <select value=${model} onChange=${(/** @type {any} */ e) => setModel(e.currentTarget.value)} disabled=${!models}>
              ${(models?.models ?? []).map((m) => html`<option value=${m.id}>${m.id}</option>`)}
            </select>
          </label>
          <label>Instructions (system prompt)
            <textarea rows="5" value=${instructions} onInput=${(/** @type {any} */ e) => setInstructions(e.currentTarget.value)}></textarea>
          </label>
          <p class="small muted">Runs are recorded as traces (source agent_lab; coach drafts as coach_local_draft).</p>
        </aside>
      </div>
    </section>
  `;
}

/**
 * @param {{ model: string, instructions: string, thread: Turn[], setThread: (t: Turn[]) => void, text: string,
 *   setText: (s: string) => void }} props
 */
function Chat({ model, instructions, thread, setThread, text, setText }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [last, setLast] = useState(/** @type {any} */ (null));
  const stop = useRef(/** @type {AbortController | null} */ (null));
  useEffect(() => () => stop.current?.abort(), []);

  const send = async (/** @type {Event} */ e) => {
    e.preventDefault();
    const content = text.trim();
    if (!content || busy || !model) return;
    const turns = [...thread, { role: /** @type {const} */ ('user'), content }];
    setThread([...turns, { role: 'assistant', content: '' }]);
    setText('');
    setBusy(true);
    setError('');
    setLast(null);
    stop.current = new AbortController();
    let answer = '';
    let parts = 0;
    try {
      await postStream(
        '/api/local/run',
        {
          messages: turns,
          model,
          ...(instructions.trim() ? { instructions } : {}),
          stream: true,
          recordTrace: true,
          actionName: 'workbench_chat',
        },
        (event, data) => {
          if (event === 'delta') {
            answer += data.text;
            parts++;
            setThread([...turns, { role: 'assistant', content: answer }]);
          } else if (event === 'done') setLast({ ...data, parts });
          else if (event === 'error') setError(data.error?.message ?? 'the model failed mid-answer');
        },
        stop.current.signal,
      );
    } catch (err) {
      if (/** @type {Error} */ (err).name !== 'AbortError') setError(/** @type {Error} */ (err).message);
    } finally {
      setBusy(false);
    }
  };

  return html`
    <ol class="chat thread" aria-label="Conversation" aria-live="polite">
      ${thread.length === 0 && html`<li class="muted">Ask the local model something.</li>`}
      ${thread.map(
        (t, i) => html`<li key=${i} class=${`msg role-${t.role}`}>
          <span class="role">${t.role}</span>
          ${
            t.role === 'assistant'
              ? html`<div class="md" dangerouslySetInnerHTML=${{ __html: markdown(t.content || '…') }}></div>`
              : html`<pre class="plain-text">${t.content}</pre>`
          }
        </li>`,
      )}
    </ol>
    ${
      last &&
      html`<p class="meta" role="status">
      ${last.model} · ${last.usage.promptTokens} in · ${last.usage.completionTokens} out · ${duration(last.latencyMs)} · ${last.finishReason} · streamed in ${last.parts} parts
      ${last.traceId && html` · <${Link} href=${`/ui/traces/${encodeURIComponent(last.traceId)}`}>open the recorded trace</${Link}>`}
    </p>`
    }
    ${error && html`<p class="error" role="alert">${error}</p>`}
    <form class="send" onSubmit=${send}>
      <label for="chat-input" class="sr-only">Message</label>
      <textarea id="chat-input" rows="3" placeholder="Message (Ctrl+Enter sends)" value=${text}
        onInput=${(/** @type {any} */ e) => setText(e.currentTarget.value)}
        onKeyDown=${(/** @type {KeyboardEvent} */ e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send(e);
        }}></textarea>
      <div>
        <button type="submit" disabled=${busy || !model}>${busy ? 'Answering…' : 'Send'}</button>
        ${busy && html` <button type="button" class="quiet" onClick=${() => stop.current?.abort()}>Stop</button>`}
        ${!busy && thread.length > 0 && html` <button type="button" class="quiet" onClick=${() => setThread([])}>Clear</button>`}
      </div>
    </form>
  `;
}

/** @param {{ model: string, instructions: string, text: string, setText: (s: string) => void }} props */
function Coach({ model, instructions, text, setText }) {
  const [session] = useState(newCoachSession);
  const [draft, setDraft] = useState(/** @type {{ traceId?: string, output: string } | null} */ (null));
  const [edited, setEdited] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [curated, setCurated] = useState(/** @type {string | null} */ (null));

  const ask = async (/** @type {Event} */ e) => {
    e.preventDefault();
    if (!text.trim() || !model) return;
    setBusy(true);
    setError('');
    setCurated(null);
    let output = '';
    setDraft({ output: '' });
    try {
      await postStream(
        '/api/local/run',
        {
          prompt: text,
          model,
          ...(instructions.trim() ? { instructions } : {}),
          stream: true,
          recordTrace: true,
          parameters: { source: 'coach', coachSessionId: session },
        },
        (event, data) => {
          if (event === 'delta') {
            output += data.text;
            setDraft({ output });
          } else if (event === 'done') {
            setDraft({ output: data.output, traceId: data.traceId });
            setEdited(data.output);
          } else if (event === 'error') setError(data.error?.message ?? 'the model failed mid-answer');
        },
      );
    } catch (err) {
      setError(/** @type {Error} */ (err).message);
    } finally {
      setBusy(false);
    }
  };

  const curate = async () => {
    if (!draft?.traceId) return;
    setBusy(true);
    setError('');
    try {
      const answer = await api('/api/local/run', {
        body: {
          parameters: {
            source: 'coach',
            coachSessionId: session,
            curate: { draftTraceId: draft.traceId, ...(edited !== draft.output ? { response: edited } : {}) },
          },
        },
      });
      setCurated(answer.traceId);
    } catch (err) {
      setError(/** @type {Error} */ (err).message);
    } finally {
      setBusy(false);
    }
  };

  return html`
    <p class="muted small">Coach session <code>${session}</code>: ask for a draft, correct it, then curate it into a training pick.</p>
    <form class="send" onSubmit=${ask}>
      <label for="coach-prompt">Prompt</label>
      <textarea id="coach-prompt" rows="3" value=${text} onInput=${(/** @type {any} */ e) => setText(e.currentTarget.value)}></textarea>
      <div><button type="submit" disabled=${busy || !model}>Draft an answer</button></div>
    </form>
    ${
      draft &&
      html`<section class="payload" aria-label="Draft">
      <h3>Draft ${draft.traceId && html`<${Link} class="small" href=${`/ui/traces/${encodeURIComponent(draft.traceId)}`}>trace</${Link}>`}</h3>
      <label for="coach-edit" class="sr-only">Corrected answer</label>
      <textarea id="coach-edit" rows="8" value=${draft.traceId ? edited : draft.output} disabled=${!draft.traceId}
        onInput=${(/** @type {any} */ e) => setEdited(e.currentTarget.value)}></textarea>
      <div><button type="button" onClick=${curate} disabled=${busy || !draft.traceId}>Curate into a training pick</button></div>
    </section>`
    }
    ${curated && html`<p role="status" class="verify ok">Curated: <${Link} href=${`/ui/traces/${encodeURIComponent(curated)}`}>${curated}</${Link}> (coach_curated, training preferred)</p>`}
    ${error && html`<p class="error" role="alert">${error}</p>`}
  `;
}
