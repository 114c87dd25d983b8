import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const t = new Map(); p.samples.forEach((id, i) => t.set(id, (t.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
const total = [...t.values()].reduce((a, b) => a + b, 0);
const agg = new Map();
for (const [id, v] of t) {
  const seen = new Set(); let cur = id;
  while (cur !== undefined) { const c = byId.get(cur).callFrame; const key = `${c.functionName || '(anon)'} ${c.url.split('/').slice(-2).join('/')}:${c.lineNumber}`; if (!seen.has(key)) { seen.add(key); agg.set(key, (agg.get(key) ?? 0) + v); } cur = parent.get(cur); }
}
const re = new RegExp(process.argv[3] ?? '.');
for (const [k, v] of [...agg].filter(([k]) => re.test(k)).sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log((v / total * 100).toFixed(2).padStart(6), k);
