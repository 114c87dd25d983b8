// The trace list: filters kept in the URL (a filtered list can be bookmarked or shared), cursor paging, and a box to
// jump to a trace or span by id.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { cost, count, duration, nsToMs, when } from '../lib/format.js';
import { html } from '../lib/html.js';
import { Link, navigate } from '../lib/router.js';
import { ThumbDown, ThumbUp } from '../parts/icons.js';

const FILTERS = ['from', 'to', 'model', 'actionName', 'environment', 'source', 'status', 'feedback'];
const SOURCES = ['', 'native', 'otlp', 'agents', 'guardrails', 'proxy', 'tool_calls', 'webhooks', 'local'];
const PAGE = 50;

/** datetime-local value (local time) ↔ ISO 8601 in the URL and the API. @param {string} iso */
const toLocalInput = (iso) => {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};

/** @param {{ loc: URL }} props */
export function TraceList({ loc }) {
  const params = loc.searchParams;
  const filters = Object.fromEntries(FILTERS.map((f) => [f, params.get(f) ?? '']));
  const cursor = params.get('cursor') ?? '';
  const limit = Number(params.get('limit')) || PAGE;
  const [state, setState] = useState(/** @type {{ items?: any[], next?: string | null, error?: string }} */ ({}));
  const [prev, setPrev] = useState(/** @type {string[]} */ ([]));

  useEffect(() => {
    let live = true;
    setState({});
    api('/api/traces', { query: { ...filters, cursor, limit, include: 'signals' } })
      .then((page) => live && setState({ items: page.items, next: page.nextCursor }))
      .catch((e) => live && setState({ error: e.message }));
    return () => {
      live = false;
    };
  }, [loc.search]);

  const go = (/** @type {Record<string, string>} */ next) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(next)) if (v) q.set(k, v);
    navigate(`/ui/traces${q.size ? `?${q}` : ''}`);
  };
  const apply = (/** @type {Event} */ e) => {
    e.preventDefault();
    const form = new FormData(/** @type {HTMLFormElement} */ (e.currentTarget));
    const next = Object.fromEntries(FILTERS.map((f) => [f, String(form.get(f) ?? '')]));
    for (const f of ['from', 'to']) if (next[f]) next[f] = new Date(next[f]).toISOString();
    setPrev([]);
    go(next);
  };
  const page = (/** @type {string} */ c, /** @type {string[]} */ stack) => {
    setPrev(stack);
    go({ ...filters, ...(limit !== PAGE ? { limit: String(limit) } : {}), cursor: c });
  };

  return html`
    <section class="traces">
      <div class="pagehead">
        <h1>Traces</h1>
        <${Jump} />
      </div>
      <form class="filters" onSubmit=${apply} aria-label="Filters">
        <label>From <input type="datetime-local" name="from" value=${toLocalInput(filters.from)} /></label>
        <label>To <input type="datetime-local" name="to" value=${toLocalInput(filters.to)} /></label>
        <label>Model <input name="model" value=${filters.model} size="14" /></label>
        <label>Action <input name="actionName" value=${filters.actionName} size="14" /></label>
        <label>Environment <input name="environment" value=${filters.environment} size="10" /></label>
        <label>Source <select name="source" value=${filters.source}>${SOURCES.map((s) => html`<option value=${s}>${s || 'any'}</option>`)}</select></label>
        <label>Status <select name="status" value=${filters.status}>${['', 'completed', 'error'].map((s) => html`<option value=${s}>${s || 'any'}</option>`)}</select></label>
        <label>Feedback <select name="feedback" value=${filters.feedback}>${['', 'up', 'down'].map((s) => html`<option value=${s}>${s || 'any'}</option>`)}</select></label>
        <button type="submit">Apply</button>
        ${FILTERS.some((f) => filters[f]) && html`<${Link} class="quiet" href="/ui/traces">Clear</${Link}>`}
      </form>
      ${state.error && html`<p class="error" role="alert">${state.error}</p>`}
      ${!state.items && !state.error && html`<p class="muted" role="status">Loading…</p>`}
      ${state.items && html`<${Table} items=${state.items} />`}
      <nav class="pager" aria-label="Pages of traces">
        ${cursor && html`<button type="button" class="quiet" onClick=${() => page(prev.at(-1) ?? '', prev.slice(0, -1))}>← Newer</button>`}
        ${state.next && html`<button type="button" class="quiet" onClick=${() => page(/** @type {string} */ (state.next), [...prev, cursor])}>Older →</button>`}
      </nav>
    </section>
  `;
}

/** @param {{ items: any[] }} props */
function Table({ items }) {
  if (items.length === 0) return html`<p class="empty">No traces match.</p>`;
  return html`
    <div class="table-wrap">
      <table class="list">
        <thead>
          <tr>
            <th>Time</th><th>Name</th><th>Model</th><th>Source</th><th>Status</th>
            <th class="num">Latency</th><th class="num">Tokens</th><th class="num">Cost</th><th>Feedback</th><th class="num">Findings</th>
          </tr>
        </thead>
        <tbody>
          ${items.map(
            (t) => html`
            <tr key=${t.traceId}>
              <td class="nowrap">${when(nsToMs(t.startTimeNs))}</td>
              <td class="name">
                <${Link} href=${`/ui/traces/${encodeURIComponent(t.traceId)}`}>${t.name || t.traceId}</${Link}>
                ${t.actionName && t.actionName !== t.name && html`<span class="tag">${t.actionName}</span>`}
                ${t.environment && html`<span class="tag env">${t.environment}</span>`}
              </td>
              <td>${t.model}</td>
              <td>${t.source}</td>
              <td><span class=${`status ${t.status}`}>${t.status}</span>${t.errorCount > 0 && t.status !== 'error' ? ` (${t.errorCount})` : ''}</td>
              <td class="num">${duration(t.durationMs)}</td>
              <td class="num" title=${`${t.promptTokens} in, ${t.completionTokens} out`}>${count(t.totalTokens)}</td>
              <td class="num">${cost(t.costUsd)}</td>
              <td class="votes">
                ${t.feedbackUp > 0 && html`<span class="up" title="thumbs up"><${ThumbUp} />${t.feedbackUp}</span>`}
                ${t.feedbackDown > 0 && html`<span class="down" title="thumbs down"><${ThumbDown} />${t.feedbackDown}</span>`}
              </td>
              <td class="num">${t.findings ? html`<span class="warn">${t.findings >= 100 ? '100+' : t.findings}</span>` : ''}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>
  `;
}

/** Open a trace by its id, or the trace holding a span id. */
function Jump() {
  const [error, setError] = useState('');
  const submit = async (/** @type {Event} */ e) => {
    e.preventDefault();
    const id = String(new FormData(/** @type {HTMLFormElement} */ (e.currentTarget)).get('id') ?? '').trim();
    if (!id) return;
    setError('');
    try {
      const found = await api(`/api/spans/${encodeURIComponent(id)}/trace`).catch((err) => {
        if (err.status === 404) return null;
        throw err;
      });
      if (found) navigate(`/ui/traces/${encodeURIComponent(found.traceId)}?span=${encodeURIComponent(id)}`);
      else navigate(`/ui/traces/${encodeURIComponent(id)}`);
    } catch (err) {
      setError(/** @type {Error} */ (err).message);
    }
  };
  return html`
    <form class="jump" onSubmit=${submit} role="search">
      <label for="jump-id" class="sr-only">Trace or span id</label>
      <input id="jump-id" name="id" placeholder="Jump to trace or span id" size="34" spellcheck="false" />
      <button type="submit" class="quiet">Open</button>
      ${error && html`<span class="error" role="alert">${error}</span>`}
    </form>
  `;
}
