// A uPlot time-series chart in a Preact component: drawn on mount and whenever its data changes, coloured from the
// page's CSS variables (so it follows dark mode), sized to its box.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { html } from '../lib/html.js';

const PALETTE = ['#3b82f6', '#8b5cf6', '#10b981', '#f59e0b', '#ef4444', '#06b6d4', '#ec4899', '#84cc16'];

/** @param {string} name */
const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

/**
 * @param {{ title: string, x: number[], series: Array<{ label: string, values: Array<number | null>, color?: string,
 *   scale?: string, points?: boolean }>, unit?: string, unit2?: string, children?: any }} props
 */
export function Chart({ title, x, series, unit = '', unit2 = '', children = null }) {
  const box = useRef(/** @type {HTMLDivElement | null} */ (null));
  const points = series.reduce((n, s) => n + s.values.filter((v) => v !== null && v !== 0).length, 0);
  useEffect(() => {
    const el = box.current;
    if (!el || points === 0) return;
    const fg = cssVar('--muted');
    const grid = cssVar('--line');
    const axis = (/** @type {string} */ scale, /** @type {string} */ u, side = 3) => ({
      scale,
      side,
      stroke: fg,
      grid: { stroke: grid, width: 1, show: side === 3 },
      ticks: { stroke: grid, width: 1 },
      values: (/** @type {any} */ _u, /** @type {number[]} */ vals) => vals.map((v) => fmt(v, u)),
      size: 70,
    });
    const hasRight = series.some((s) => s.scale === 'y2');
    const plot = new uPlot(
      {
        width: el.clientWidth,
        height: 220,
        cursor: { drag: { x: false, y: false } },
        scales: {
          x: { time: true },
          y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
          y2: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
        },
        axes: [
          { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } },
          axis('y', unit),
          ...(hasRight ? [axis('y2', unit2, 1)] : []),
        ],
        series: [
          {},
          ...series.map((s, i) => ({
            label: s.label,
            scale: s.scale ?? 'y',
            stroke: s.color ?? PALETTE[i % PALETTE.length],
            width: 2,
            spanGaps: true,
            points: { show: s.points ?? false, size: 6 },
            value: (/** @type {any} */ _u, /** @type {number | null} */ v) =>
              v === null ? '–' : fmt(v, s.scale === 'y2' ? unit2 : unit),
          })),
        ],
      },
      [x, ...series.map((s) => s.values)],
      el,
    );
    return () => plot.destroy();
  }, [JSON.stringify([x, series])]);
  return html`<figure class="chart" aria-label=${title} data-points=${points}>
    <h2>${title}</h2>
    ${points === 0 ? html`<p class="nodata">No data in this range.</p>` : html`<div class="plot" ref=${box}></div>`}
    ${children}
  </figure>`;
}

/** @param {number} v @param {string} unit */
function fmt(v, unit) {
  if (v === null || v === undefined) return '';
  if (unit === '%') return `${(v * 100).toFixed(v < 0.1 ? 1 : 0)}%`;
  if (unit === '$') return v < 0.01 && v > 0 ? `$${v.toPrecision(2)}` : `$${v.toFixed(2)}`;
  if (unit === 'ms') return v >= 1000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)} ms`;
  if (Math.abs(v) >= 1_000_000) return `${(v / 1_000_000).toFixed(1)}M`;
  if (Math.abs(v) >= 1000) return `${(v / 1000).toFixed(1)}k`;
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}
