// Deterministic "typical" LLM trace text for throughput measurement: prose, chat turns, JSON tool output,
// code and log lines, with an occasional e-mail, phone number, IP or key, the way real prompts carry them.

let seed = 42;
function rand(): number {
  seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;

const WORDS = (
  'the a to of and in is for that on with as it be this are was by at from or an which you your we can will not ' +
  'have has more about system model user data request response service customer order report time team please summary ' +
  'analysis function value error result should would could update account question answer information document table ' +
  'query search context tool call output input following based example using need help thanks review issue support ' +
  'deployment database cluster latency throughput metric budget quarter revenue forecast meeting schedule policy'
).split(' ');

function sentence(): string {
  const n = 8 + Math.floor(rand() * 14);
  const w = Array.from({ length: n }, () => pick(WORDS));
  w[0] = w[0]!.charAt(0).toUpperCase() + w[0]!.slice(1);
  return `${w.join(' ')}${pick(['.', '.', '.', '?', '!'])}`;
}

const SNIPPETS = [
  () => `User: ${sentence()} ${sentence()}\nAssistant: ${sentence()} ${sentence()} ${sentence()}`,
  () =>
    JSON.stringify({
      id: `call_${Math.floor(rand() * 1e9)}`,
      name: 'search_orders',
      arguments: { query: sentence(), limit: 20 },
      result: {
        total: Math.floor(rand() * 5000),
        items: [{ sku: `SKU-${Math.floor(rand() * 1e6)}`, price: 19.99, updated: '2024-05-14T10:22:31Z' }],
      },
    }),
  () =>
    `function handle(req) {\n  const id = req.params.id; // ${sentence()}\n  return db.query('SELECT * FROM orders WHERE id = $1', [id]);\n}`,
  () =>
    `2024-05-14 10:22:${String(Math.floor(rand() * 60)).padStart(2, '0')}.415 INFO request_id=${Math.floor(rand() * 1e12).toString(16)} latency_ms=${Math.floor(rand() * 900)} status=200 ${sentence()}`,
  () => `${sentence()} ${sentence()} ${sentence()} ${sentence()}`,
  () =>
    `Please contact ${pick(['ann', 'raj', 'li'])}.${pick(['ops', 'sales'])}@example.com or (415) 555-01${Math.floor(rand() * 90 + 10)}. ${sentence()}`,
  () =>
    `Server 203.0.113.${Math.floor(rand() * 250)} returned 502. ${sentence()} Version 1.4.${Math.floor(rand() * 20)} deployed.`,
  () => `## Summary\n- ${sentence()}\n- ${sentence()}\n- Revenue up 12.5% to $1,204,330.00 in Q2 2024.`,
];

/** About `bytes` characters of mixed text, as `count`-sized records (each ~2 KB by default). */
export function typicalRecords(totalChars: number, recordChars = 2048): string[] {
  const out: string[] = [];
  let total = 0;
  while (total < totalChars) {
    let rec = '';
    while (rec.length < recordChars) rec += `${pick(SNIPPETS)()}\n\n`;
    out.push(rec);
    total += rec.length;
  }
  return out;
}
