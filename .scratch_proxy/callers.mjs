import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const re = new RegExp(process.argv[3]);
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const t = new Map(); p.samples.forEach((id, i) => t.set(id, (t.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
// inclusive time per node
const incl = new Map();
const total = [...t.values()].reduce((a, b) => a + b, 0);
for (const [id, v] of t) { let cur = id; while (cur !== undefined) { incl.set(cur, (incl.get(cur) ?? 0) + v); cur = parent.get(cur); } }
const agg = new Map();
for (const n of p.nodes) {
  const key = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber}`;
  if (!re.test(key)) continue;
  // stack
  const chain = []; let cur = parent.get(n.id);
  while (cur !== undefined && chain.length < 12) { const c = byId.get(cur).callFrame; chain.push(`${c.functionName || '(anon)'}@${c.url.split('/').slice(-1)[0]}:${c.lineNumber}`); cur = parent.get(cur); }
  const k = key + '  <=  ' + chain.join(' < ');
  agg.set(k, (agg.get(k) ?? 0) + (incl.get(n.id) ?? 0));
}
for (const [k, v] of [...agg].sort((a, b) => b[1] - a[1]).slice(0, Number(process.argv[4] ?? 8))) console.log((v / total * 100).toFixed(2), k);
