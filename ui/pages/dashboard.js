// The dashboard: traces and tokens over time, latency percentiles of model calls, cost by model, error and tool-error
// rates, feedback, guardrail trips and security alerts, from the analytics routes (ClickHouse answers usage and
// findings from its rollups). The range is kept in the URL.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { cost, count } from '../lib/format.js';
import { html } from '../lib/html.js';
import { Link } from '../lib/router.js';
import { Chart } from '../parts/chart.js';

const RANGES = /** @type {const} */ ({
  '24h': { ms: 86_400_000, bucket: 'hour' },
  '7d': { ms: 7 * 86_400_000, bucket: 'hour' },
  '30d': { ms: 30 * 86_400_000, bucket: 'day' },
});
const HOUR = 3_600_000;

/** @param {{ loc: URL }} props */
export function Dashboard({ loc }) {
  const name = /** @type {keyof typeof RANGES} */ (loc.searchParams.get('range') ?? '24h');
  const range = RANGES[name] ?? RANGES['24h'];
  const [data, setData] = useState(/** @type {any} */ (null));
  const [error, setError] = useState('');
  const [model, setModel] = useState('');

  useEffect(() => {
    const step = range.bucket === 'hour' ? HOUR : 24 * HOUR;
    const to = Math.ceil((Date.now() + 1) / step) * step;
    const from = to - Math.ceil(range.ms / step) * step;
    const q = { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
    setData(null);
    Promise.all([
      api('/api/analytics/usage', { query: { ...q, groupBy: 'model', bucket: range.bucket } }),
      api('/api/analytics/activity', { query: { ...q, bucket: range.bucket } }),
      api('/api/analytics/findings', { query: q }),
    ])
      .then(([usage, activity, findings]) =>
        setData({ from, to, step, usage: usage.rows, activity: activity.rows, findings: findings.rows }),
      )
      .catch((e) => setError(e.message));
  }, [name]);

  return html`
    <section class="dashboard">
      <div class="pagehead">
        <h1>Dashboard</h1>
        <nav class="tabs" aria-label="Time range">
          ${Object.keys(RANGES).map(
            (r) =>
              html`<${Link} class="button quiet" href=${`/ui/dashboard?range=${r}`} aria-current=${r === name ? 'page' : undefined}>Last ${r}</${Link}>`,
          )}
        </nav>
      </div>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      ${!data && !error && html`<p class="muted" role="status">Loading…</p>`}
      ${data && html`<${Charts} data=${data} model=${model} setModel=${setModel} />`}
    </section>
  `;
}

/** @param {{ data: any, model: string, setModel: (m: string) => void }} props */
function Charts({ data, model, setModel }) {
  /** @type {number[]} */
  const x = [];
  for (let t = data.from; t < data.to; t += data.step) x.push(t / 1000);
  const index = new Map(x.map((t, i) => [t, i]));
  const at = (/** @type {string} */ iso) => index.get(Date.parse(iso) / 1000);
  const zeros = () => x.map(() => 0);
  /** @param {any[]} rows @param {(r: any) => number} pick */
  const sum = (rows, pick) => {
    const out = zeros();
    for (const r of rows) {
      const i = at(r.bucketStart);
      if (i !== undefined) out[i] += pick(r);
    }
    return out;
  };
  const ratio = (/** @type {number[]} */ a, /** @type {number[]} */ b) => a.map((v, i) => (b[i] ? v / b[i] : null));

  const models = [...new Set(data.usage.map((/** @type {any} */ r) => r.key))];
  const byModel = new Map(models.map((m) => [m, data.usage.filter((/** @type {any} */ r) => r.key === m)]));
  const busiest = models
    .map((m) => [m, byModel.get(m).reduce((/** @type {number} */ n, /** @type {any} */ r) => n + r.requests, 0)])
    .sort((a, b) => b[1] - a[1])[0]?.[0];
  const shown = models.includes(model) ? model : (busiest ?? '');
  const latency = (/** @type {'p50Ms' | 'p95Ms' | 'p99Ms'} */ k) => {
    const out = x.map(() => /** @type {number | null} */ (null));
    for (const r of byModel.get(shown) ?? []) {
      const i = at(r.bucketStart);
      if (i !== undefined) out[i] = r[k];
    }
    return out;
  };
  const costs = models
    .map((m) => ({
      m,
      total: byModel.get(m).reduce((/** @type {number} */ n, /** @type {any} */ r) => n + r.costUsd, 0),
    }))
    .sort((a, b) => b.total - a.total);
  const trips = zeros();
  for (const f of data.findings.filter((/** @type {any} */ f) => f.category === 'guardrail_tripwire')) {
    const day = Date.parse(`${f.day}T00:00:00Z`) / 1000;
    const i = x.findIndex((t) => t >= day);
    if (i >= 0) trips[i] += f.count;
  }
  const spans = sum(data.activity, (r) => r.spans);
  const tools = sum(data.activity, (r) => r.toolCalls);
  const requests = sum(data.usage, (r) => r.requests);
  const totals = {
    traces: data.activity.reduce((/** @type {number} */ n, /** @type {any} */ r) => n + r.traces, 0),
    tokens: data.usage.reduce((/** @type {number} */ n, /** @type {any} */ r) => n + r.totalTokens, 0),
    cost: costs.reduce((n, c) => n + c.total, 0),
    alerts: data.activity.reduce((/** @type {number} */ n, /** @type {any} */ r) => n + r.securityAlerts, 0),
  };

  return html`
    <dl class="facts totals">
      <div><dt>Traces</dt><dd>${count(totals.traces)}</dd></div>
      <div><dt>Tokens</dt><dd>${count(totals.tokens)}</dd></div>
      <div><dt>Cost</dt><dd>${cost(totals.cost)}</dd></div>
      <div><dt>Security alerts</dt><dd>${totals.alerts}</dd></div>
    </dl>
    <div class="charts">
      <${Chart}
        title="Traces and tokens"
        x=${x}
        unit2=""
        series=${[
          { label: 'traces', values: sum(data.activity, (r) => r.traces) },
          { label: 'tokens', values: sum(data.usage, (r) => r.totalTokens), scale: 'y2', color: '#10b981' },
        ]}
      />
      <${Chart}
        title=${`Latency of model calls${shown ? ` (${shown})` : ''}`}
        x=${x}
        unit="ms"
        series=${[
          { label: 'p50', values: latency('p50Ms') },
          { label: 'p95', values: latency('p95Ms') },
          { label: 'p99', values: latency('p99Ms') },
        ]}
      >
        ${
          models.length > 1 &&
          html`<label class="small muted pick">Model <select value=${shown} onChange=${(/** @type {any} */ e) => setModel(e.currentTarget.value)}>
          ${models.map((m) => html`<option value=${m}>${m || '(none)'}</option>`)}
        </select></label>`
        }
      </${Chart}>
      <${Chart}
        title="Cost by model"
        x=${x}
        unit="$"
        series=${costs.slice(0, 6).map(({ m }) => ({ label: m || '(none)', values: sum(byModel.get(m), (r) => r.costUsd) }))}
      />
      <${Chart}
        title="Error rates"
        x=${x}
        unit="%"
        series=${[
          // All spans first: the narrower rates stay visible over it where they coincide.
          {
            label: 'all spans',
            values: ratio(
              sum(data.activity, (r) => r.errorSpans),
              spans,
            ),
            color: '#8b5cf6',
          },
          {
            label: 'tool calls',
            values: ratio(
              sum(data.activity, (r) => r.toolErrors),
              tools,
            ),
            color: '#f59e0b',
          },
          {
            label: 'model calls',
            values: ratio(
              sum(data.usage, (r) => r.errors),
              requests,
            ),
            color: '#ef4444',
          },
        ]}
      />
      <${Chart}
        title="Feedback"
        x=${x}
        series=${[
          { label: 'thumbs up', values: sum(data.usage, (r) => r.feedbackUp), color: '#10b981', points: true },
          { label: 'thumbs down', values: sum(data.usage, (r) => r.feedbackDown), color: '#ef4444', points: true },
        ]}
      />
      <${Chart}
        title="Guardrails and security alerts"
        x=${x}
        series=${[
          { label: 'guardrail checks', values: sum(data.activity, (r) => r.guardrailChecks), color: '#06b6d4' },
          { label: 'guardrail trips', values: trips, color: '#f59e0b', points: true },
          {
            label: 'security alerts',
            values: sum(data.activity, (r) => r.securityAlerts),
            color: '#ef4444',
            points: true,
          },
        ]}
      />
    </div>
  `;
}
