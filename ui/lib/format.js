// How numbers, times and ids read on the pages.

/** @param {string | number} ns decimal nanoseconds since the epoch */
export const nsToMs = (ns) => Number(BigInt(ns) / 1000000n);

/** @param {number} ms */
export function when(ms) {
  const d = new Date(ms);
  const pad = (/** @type {number} */ n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** @param {number} ms */
export function duration(ms) {
  if (!Number.isFinite(ms)) return '–';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} m ${Math.round((ms % 60_000) / 1000)} s`;
}

/** @param {number} n */
export const count = (n) => (n >= 100_000 ? `${Math.round(n / 1000)}k` : n.toLocaleString('en-US'));

/** @param {number} usd */
export function cost(usd) {
  if (!usd) return '$0';
  if (usd < 0.01) return `$${usd.toPrecision(2)}`;
  return `$${usd.toFixed(2)}`;
}

/** @param {string} id */
export const shortId = (id) => (id.length > 12 ? `${id.slice(0, 8)}…` : id);
