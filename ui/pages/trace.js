// One trace at /ui/traces/<traceId>?span=<spanId>: the span tree with each span's place on the timeline (virtualized),
// the selected span in full (chat, tool call, guardrail verdict, policy, findings), the trace's feedback, security
// alerts and verification. j / k move between spans; the selected span is kept in the URL.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { cost, count, duration, nsToMs, when } from '../lib/format.js';
import { html } from '../lib/html.js';
import { Link, navigate } from '../lib/router.js';
import { Payload, parseJson } from '../parts/content.js';
import { Caret, ThumbDown, ThumbUp } from '../parts/icons.js';
import { useVirtualRows } from '../parts/virtual.js';

const ROW = 28;

/** Every part of the trace (a large one comes in parts), merged. @param {string} traceId */
async function loadTrace(traceId) {
  const base = `/api/traces/${encodeURIComponent(traceId)}`;
  const first = (await api(base)).trace;
  let cursor = first.nextSpanCursor;
  while (cursor) {
    const part = (await api(base, { query: { spanCursor: cursor } })).trace;
    first.spans.push(...part.spans);
    first.policy.push(...part.policy);
    first.guardrails.push(...part.guardrails);
    cursor = part.nextSpanCursor;
  }
  return first;
}

/**
 * Rows of the tree in display order (depth first, children by start time), skipping collapsed subtrees. Iterative:
 * a deep trace must not overflow the stack.
 * @param {any[]} spans @param {Set<string>} collapsed
 */
function flatten(spans, collapsed) {
  const ids = new Set(spans.map((s) => s.spanId));
  /** @type {Map<string, any[]>} */
  const children = new Map();
  const roots = [];
  for (const s of spans) {
    if (s.parentSpanId && ids.has(s.parentSpanId) && s.parentSpanId !== s.spanId) {
      const list = children.get(s.parentSpanId);
      if (list) list.push(s);
      else children.set(s.parentSpanId, [s]);
    } else roots.push(s);
  }
  /** @type {Array<{ span: any, depth: number, kids: number }>} */
  const rows = [];
  const seen = new Set();
  const stack = roots.reverse().map((span) => ({ span, depth: 0 }));
  while (stack.length) {
    const { span, depth } = /** @type {{ span: any, depth: number }} */ (stack.pop());
    if (seen.has(span.spanId)) continue; // a cycle of parent ids
    seen.add(span.spanId);
    const kids = children.get(span.spanId) ?? [];
    rows.push({ span, depth, kids: kids.length });
    if (collapsed.has(span.spanId)) continue;
    for (let i = kids.length - 1; i >= 0; i--) stack.push({ span: kids[i], depth: depth + 1 });
  }
  return rows;
}

/** @param {{ traceId: string, loc: URL }} props */
export function TraceDetail({ traceId, loc }) {
  const [trace, setTrace] = useState(/** @type {any} */ (null));
  const [error, setError] = useState(/** @type {{ status?: number, message: string } | null} */ (null));
  const [findings, setFindings] = useState(/** @type {any[]} */ ([]));
  const [collapsed, setCollapsed] = useState(() => new Set());
  const selectedId = loc.searchParams.get('span');

  useEffect(() => {
    const started = performance.now();
    loadTrace(traceId)
      .then((t) => {
        setTrace(t);
        requestAnimationFrame(() => {
          document.documentElement.dataset.traceRenderedMs = String(Math.round(performance.now() - started));
        });
      })
      .catch((e) => setError(e));
    api('/api/findings', { query: { traceId, limit: 500 } })
      .then((p) => setFindings(p.items))
      .catch(() => setFindings([]));
  }, [traceId]);

  const rows = useMemo(() => (trace ? flatten(trace.spans, collapsed) : []), [trace, collapsed]);
  const selectedIndex = Math.max(
    0,
    rows.findIndex((r) => r.span.spanId === selectedId),
  );
  const selected = rows[selectedIndex]?.span ?? null;

  const select = (/** @type {number} */ i) => {
    const row = rows[Math.min(Math.max(i, 0), rows.length - 1)];
    if (!row) return;
    const url = new URL(location.href);
    url.searchParams.set('span', row.span.spanId);
    navigate(url.pathname + url.search, { replace: true });
  };

  /** @param {string} id @param {boolean} [open] */
  const toggle = (id, open) =>
    setCollapsed((was) => {
      const next = new Set(was);
      if (open ?? next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });

  // Keys can come faster than renders: the index moves at once, the URL (and the render) follows.
  const current = useRef(selectedIndex);
  current.current = selectedIndex;
  useEffect(() => {
    const onKey = (/** @type {KeyboardEvent} */ e) => {
      const t = /** @type {HTMLElement} */ (e.target);
      if (e.metaKey || e.ctrlKey || e.altKey || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName) || t.isContentEditable)
        return;
      // In the tree, the arrow keys too: up/down between spans, left/right fold and unfold.
      const inTree = t.closest?.('.tree') !== null;
      if (inTree && (e.key === 'ArrowLeft' || e.key === 'ArrowRight')) {
        const row = rows[current.current];
        if (row?.kids) toggle(row.span.spanId, e.key === 'ArrowRight');
        e.preventDefault();
        return;
      }
      const down = e.key === 'j' || (inTree && e.key === 'ArrowDown');
      const up = e.key === 'k' || (inTree && e.key === 'ArrowUp');
      const step = down ? 1 : up ? -1 : 0;
      if (!step) return;
      e.preventDefault();
      current.current = Math.min(Math.max(current.current + step, 0), rows.length - 1);
      select(current.current);
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [rows]);

  if (error)
    return html`<section class="trace">
      <p class="error" role="alert">${error.status === 404 ? `Trace ${traceId} was not found in this workspace.` : error.message}</p>
      <${Link} href="/ui/traces">← All traces</${Link}>
    </section>`;
  if (!trace) return html`<p class="muted" role="status">Loading trace…</p>`;

  return html`
    <section class="trace">
      <${TraceHead} trace=${trace} onVoted=${setTrace} />
      <div class="split">
        <${SpanTree} trace=${trace} rows=${rows} selectedIndex=${selectedIndex} onSelect=${select} onToggle=${toggle} collapsed=${collapsed} />
        ${selected && html`<${SpanDetail} key=${selected.spanId} trace=${trace} span=${selected} findings=${findings.filter((f) => f.spanId === selected.spanId)} />`}
      </div>
    </section>
  `;
}

/** @param {{ trace: any, onVoted: (t: any) => void }} props */
function TraceHead({ trace, onVoted }) {
  const s = trace.summary;
  const tripped = trace.guardrails.filter((/** @type {any} */ g) => g.tripped).length;
  return html`
    <header class="trace-head">
      <div class="crumbs"><${Link} href="/ui/traces">Traces</${Link}> / <span class="mono">${trace.traceId}</span></div>
      <h1>${s?.name || trace.traceId} ${s && html`<span class=${`status ${s.status}`}>${s.status}</span>`}</h1>
      ${
        s &&
        html`<dl class="facts">
        <div><dt>Started</dt><dd>${when(nsToMs(s.startTimeNs))}</dd></div>
        <div><dt>Duration</dt><dd>${duration(s.durationMs)}</dd></div>
        <div><dt>Spans</dt><dd>${count(s.spanCount)}${s.errorCount ? html` <span class="status error">${s.errorCount} errors</span>` : ''}</dd></div>
        ${s.model && html`<div><dt>Model</dt><dd>${s.model}</dd></div>`}
        <div><dt>Tokens</dt><dd>${count(s.totalTokens)}</dd></div>
        <div><dt>Cost</dt><dd>${cost(s.costUsd)}</dd></div>
        <div><dt>Source</dt><dd>${s.source}</dd></div>
        ${s.environment && html`<div><dt>Environment</dt><dd>${s.environment}</dd></div>`}
        ${s.actionName && html`<div><dt>Action</dt><dd>${s.actionName}</dd></div>`}
        ${trace.guardrails.length > 0 && html`<div><dt>Guardrails</dt><dd>${trace.guardrails.length} ${trace.guardrails.length === 1 ? 'check' : 'checks'}${tripped ? html`, <span class="status error">${tripped} tripped</span>` : ''}</dd></div>`}
      </dl>`
      }
      <div class="head-actions">
        <${Vote} trace=${trace} onVoted=${onVoted} />
        <${Verification} traceId=${trace.traceId} />
      </div>
      ${trace.securityAlerts.length > 0 && html`<${Alerts} alerts=${trace.securityAlerts} />`}
    </header>
  `;
}

/** The UI's own vote on the trace (one per workspace and trace): a second click on the same thumb retracts it. */
function Vote(/** @type {{ trace: any, onVoted: (t: any) => void }} */ { trace, onVoted }) {
  const id = `ui-${trace.traceId}`;
  const mine = trace.feedbackVotes.find((/** @type {any} */ v) => v.id === id)?.value ?? null;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const totals = Object.values(trace.feedback).reduce(
    (/** @type {{up: number, down: number}} */ a, /** @type {any} */ b) => ({ up: a.up + b.up, down: a.down + b.down }),
    { up: 0, down: 0 },
  );
  const vote = async (/** @type {'up' | 'down'} */ value) => {
    const next = mine === value ? null : value;
    setBusy(true);
    setError('');
    try {
      await api('/api/ingest/feedback', { body: { id, trace_id: trace.traceId, value: next, source: 'ui' } });
      const others = trace.feedbackVotes.filter((/** @type {any} */ v) => v.id !== id);
      const votes = next
        ? [{ id, name: 'user_feedback', value: next, target: { type: 'trace', id: trace.traceId } }, ...others]
        : others;
      const feedback = { ...trace.feedback };
      const named = { ...(feedback.user_feedback ?? { up: 0, down: 0 }) };
      if (mine) named[mine]--;
      if (next) named[next]++;
      feedback.user_feedback = named;
      onVoted({ ...trace, feedbackVotes: votes, feedback });
    } catch (e) {
      setError(/** @type {Error} */ (e).message);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <div class="vote" role="group" aria-label="Feedback">
      <button type="button" class="thumb up" aria-pressed=${mine === 'up'} aria-label="Thumbs up" disabled=${busy} onClick=${() => vote('up')}>
        <${ThumbUp} /> <span>${totals.up}</span>
      </button>
      <button type="button" class="thumb down" aria-pressed=${mine === 'down'} aria-label="Thumbs down" disabled=${busy} onClick=${() => vote('down')}>
        <${ThumbDown} /> <span>${totals.down}</span>
      </button>
      ${error && html`<span class="error" role="alert">${error}</span>`}
    </div>
  `;
}

/** Verification on demand: it re-reads and re-hashes the whole trace. @param {{ traceId: string }} props */
function Verification({ traceId }) {
  const [state, setState] = useState(/** @type {any} */ (null));
  const run = async () => {
    setState({ busy: true });
    try {
      setState(await api(`/api/traces/${encodeURIComponent(traceId)}/verification`));
    } catch (e) {
      setState({ error: /** @type {Error} */ (e).message });
    }
  };
  if (!state) return html`<button type="button" class="quiet" onClick=${run}>Verify integrity</button>`;
  if (state.busy) return html`<span class="muted" role="status">Verifying…</span>`;
  if (state.error) return html`<span class="muted">Verification: ${state.error}</span>`;
  return html`<span class=${`verify ${state.ok ? 'ok' : 'bad'}`} role="status" title=${state.problems.map((/** @type {any} */ p) => p.kind).join(', ')}>
    ${state.ok ? `Verified: ${state.recordsChecked} records, signatures and chain intact` : `Verification failed: ${state.problems.length} problems`}
  </span>`;
}

/** @param {{ alerts: any[] }} props */
function Alerts({ alerts }) {
  return html`<section class="alerts" aria-label="Security alerts">
    <h2>Security alerts</h2>
    <ul>
      ${alerts.map(
        (a) => html`<li key=${a.id}>
          <span class=${`sev ${a.severity}`}>${a.severity}</span> <b>${a.title || a.category}</b>
          <span class="muted"> ${a.source} · ${when(a.detectedAtMs)}${a.spanId ? ` · span ${a.spanId}` : ''}</span>
        </li>`,
      )}
    </ul>
  </section>`;
}

/**
 * @param {{ trace: any, rows: Array<{ span: any, depth: number, kids: number }>, selectedIndex: number,
 *   onSelect: (i: number) => void, onToggle: (id: string) => void, collapsed: Set<string> }} props
 */
function SpanTree({ trace, rows, selectedIndex, onSelect, onToggle, collapsed }) {
  const scroller = useRef(/** @type {HTMLDivElement | null} */ (null));
  const v = useVirtualRows(rows.length, scroller, ROW);
  const start = Number(BigInt(trace.summary?.startTimeNs ?? rows[0]?.span.startTimeNs ?? 0) / 1000n);
  const total = Math.max(1, (trace.summary?.durationMs ?? 1) * 1000);
  useEffect(() => {
    v.scrollToIndex(selectedIndex, { align: 'auto' });
  }, [selectedIndex]);
  return html`
    <div class="tree" ref=${scroller} role="tree" aria-label=${`Spans (${rows.length})`} tabindex="0" aria-activedescendant=${`row-${selectedIndex}`}>
      <div style=${{ height: `${v.getTotalSize()}px`, position: 'relative' }}>
        ${v.getVirtualItems().map((item) => {
          const { span, depth, kids } = rows[item.index];
          const at = Number(BigInt(span.startTimeNs) / 1000n) - start;
          const left = Math.min(100, Math.max(0, (at / total) * 100));
          const width = Math.max(0.3, Math.min(100 - left, ((span.durationMs * 1000) / total) * 100));
          return html`<div
            key=${span.spanId}
            id=${`row-${item.index}`}
            role="treeitem"
            aria-selected=${item.index === selectedIndex}
            aria-level=${depth + 1}
            aria-expanded=${kids ? !collapsed.has(span.spanId) : undefined}
            class=${`row kind-${span.kind}${item.index === selectedIndex ? ' selected' : ''}${span.status === 'error' ? ' err' : ''}`}
            style=${{ transform: `translateY(${item.start}px)`, height: `${ROW}px` }}
            onClick=${() => onSelect(item.index)}
          >
            <span class="label" style=${{ paddingLeft: `${Math.min(depth, 40) * 14 + 4}px` }}>
              ${
                kids
                  ? html`<button type="button" class="twisty" aria-label=${collapsed.has(span.spanId) ? 'Expand' : 'Collapse'} onClick=${(
                      /** @type {Event} */ e,
                    ) => {
                      e.stopPropagation();
                      onToggle(span.spanId);
                    }}><${Caret} open=${!collapsed.has(span.spanId)} /></button>`
                  : html`<span class="twisty"></span>`
              }
              <span class="kind">${span.kind}</span> ${span.name}
            </span>
            <span class="bar-cell"><span class="bar" style=${{ left: `${left}%`, width: `${width}%` }}></span></span>
            <span class="dur">${duration(span.durationMs)}</span>
          </div>`;
        })}
      </div>
    </div>
  `;
}

/** @param {{ trace: any, span: any, findings: any[] }} props */
function SpanDetail({ trace, span, findings }) {
  const policy = trace.policy.filter((/** @type {any} */ p) => p.spanId === span.spanId);
  const guard = trace.guardrails.find((/** @type {any} */ g) => g.spanId === span.spanId);
  const a = span.attributes;
  const tool = a['gen_ai.tool.name'];
  const rerun = `/ui/workbench?trace=${encodeURIComponent(trace.traceId)}&span=${encodeURIComponent(span.spanId)}`;
  return html`
    <article class="span-detail" aria-label="Selected span">
      <div class="span-head">
        <h2><span class="kind">${span.kind}</span> ${span.name} <span class=${`status ${span.status}`}>${span.status}</span></h2>
        ${span.kind === 'llm' && (span.prompt || span.response) && html`<${Link} class="button" href=${rerun}>Re-run in the workbench</${Link}>`}
      </div>
      <dl class="facts">
        <div><dt>Duration</dt><dd>${duration(span.durationMs)}</dd></div>
        ${span.model && html`<div><dt>Model</dt><dd>${span.model}${span.provider ? ` (${span.provider})` : ''}</dd></div>`}
        ${span.totalTokens > 0 && html`<div><dt>Tokens</dt><dd>${span.promptTokens} in · ${span.completionTokens} out</dd></div>`}
        ${span.costUsd > 0 && html`<div><dt>Cost</dt><dd>${cost(span.costUsd)}</dd></div>`}
        ${span.finishReason && html`<div><dt>Finish</dt><dd>${span.finishReason}</dd></div>`}
        <div><dt>Span id</dt><dd class="mono">${span.spanId}</dd></div>
      </dl>
      ${span.statusMessage && html`<p class="error">${span.statusMessage}</p>`}
      ${
        guard &&
        html`<p class=${`verdict ${guard.tripped ? 'tripped' : guard.executionFailed ? 'failed' : 'passed'}`}>
        Guardrail <b>${guard.name}</b>${guard.stage ? ` (${guard.stage})` : ''}:
        ${guard.tripped ? 'tripped' : guard.executionFailed ? 'failed to run' : 'passed'}
      </p>`
      }
      ${
        policy.length > 0 &&
        html`<section aria-label="Policy decisions"><h3>Policy</h3><ul class="plain">${policy.map(
          (
            /** @type {any} */ p,
          ) => html`<li><span class=${`decision ${p.decision}`}>${p.decision}</span> policy v${p.policyVersion}
          ${Array.isArray(p.reasons) && p.reasons.map((/** @type {any} */ r) => html`<span class="muted"> · ${r.message ?? r.code}</span>`)}</li>`,
        )}</ul></section>`
      }
      ${
        findings.length > 0 &&
        html`<section aria-label="Findings"><h3>Findings</h3><ul class="plain">${findings.map(
          (f) =>
            html`<li><span class=${`sev ${f.severity}`}>${f.severity}</span> <b>${f.rule}</b> in ${f.field}: <code>${f.preview}</code> <span class="muted">${f.action}</span></li>`,
        )}</ul></section>`
      }
      ${tool && html`<${ToolSpan} attributes=${a} />`}
      <${Payload} label=${span.kind === 'tool' ? 'Input' : 'Prompt'} text=${tool && same(span.prompt, a['gen_ai.tool.call.arguments']) ? '' : span.prompt} />
      <${Payload} label=${span.kind === 'tool' ? 'Output' : 'Response'} text=${tool && same(span.response, a['gen_ai.tool.call.result']) ? '' : span.response} />
      <details class="attrs">
        <summary>Attributes (${Object.keys(a).length})</summary>
        <table><tbody>${Object.entries(a).map(([k, v]) => html`<tr key=${k}><th>${k}</th><td>${typeof v === 'string' ? v : JSON.stringify(v)}</td></tr>`)}</tbody></table>
      </details>
      ${
        span.events.length > 0 &&
        html`<details class="attrs"><summary>Events (${span.events.length})</summary><ul class="plain">${span.events.map(
          (/** @type {any} */ e) =>
            html`<li><b>${e.name}</b> <span class="muted">${JSON.stringify(e.attributes)}</span></li>`,
        )}</ul></details>`
      }
    </article>
  `;
}

/** The tool section already shows this payload (the mapper copies arguments and result into prompt and response). */
const same = (/** @type {string} */ text, /** @type {unknown} */ attr) =>
  attr !== undefined && text === (typeof attr === 'string' ? attr : JSON.stringify(attr));

/** A tool span: the tool, its arguments and its result. @param {{ attributes: Record<string, any> }} props */
function ToolSpan({ attributes: a }) {
  const show = (/** @type {any} */ v) => {
    if (v === undefined) return '';
    const parsed = typeof v === 'string' ? parseJson(v) : v;
    return parsed === undefined ? String(v) : JSON.stringify(parsed, null, 2);
  };
  return html`<section class="tool" aria-label="Tool call">
    <h3>Tool call <b>${a['gen_ai.tool.name']}</b>${a['gen_ai.tool.call.id'] ? html` <span class="muted mono">${a['gen_ai.tool.call.id']}</span>` : ''}</h3>
    ${a['gen_ai.tool.call.arguments'] !== undefined && html`<h4>Arguments</h4><pre class="raw">${show(a['gen_ai.tool.call.arguments'])}</pre>`}
    ${a['gen_ai.tool.call.result'] !== undefined && html`<h4>Result</h4><pre class="raw">${show(a['gen_ai.tool.call.result'])}</pre>`}
  </section>`;
}
