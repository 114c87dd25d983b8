import { calcPrice, findProvider } from '@pydantic/genai-prices';
const ids = ['openai','anthropic','google','aws','azure','mistral','groq','deepseek','x-ai','cohere','bedrock','vertex','gcp.vertex_ai','aws.bedrock','azure.ai.openai','gcp.gen_ai','gcp.gemini','openrouter','together','fireworks'];
for (const id of ids) { const p = findProvider({providerId: id}); console.log(id, '->', p ? p.id + ' models=' + p.models.length : null); }
const keys = new Map(); let cond = 0, tiered = 0, total = 0;
for (const id of ['openai','anthropic','google','aws','azure','mistral','groq','deepseek','x-ai','cohere']) {
  const p = findProvider({providerId: id}); if (!p) continue;
  for (const m of p.models) { total++;
    if (Array.isArray(m.prices)) { cond++; continue; }
    for (const [k, v] of Object.entries(m.prices)) { keys.set(k, (keys.get(k)||0)+1); if (v && typeof v === 'object') tiered++; }
  }
}
console.log({total, cond, tiered}, [...keys]);
// cache semantics check
const r = calcPrice({input_tokens: 1000, cache_read_tokens: 400, output_tokens: 10}, 'gpt-4o', {providerId:'openai'});
console.log(r.model_price, r.input_price, r.output_price);
const r2 = calcPrice({input_tokens: 1000, cache_write_tokens: 400, output_tokens: 10}, 'gpt-4o', {providerId:'openai'});
console.log(r2.input_price);
try { console.log(calcPrice({input_tokens: 10, cache_read_tokens: 400, output_tokens: 10}, 'gpt-4o', {providerId:'openai'})); } catch (e) { console.log('throws', e.message); }
const r3 = calcPrice({input_tokens: 1000, output_tokens: 10}, 'text-embedding-3-small', {providerId:'openai'}); console.log('emb', r3 && r3.total_price);
const r4 = calcPrice({input_tokens: 1000, output_tokens: 10}, 'gpt-4o', {providerId:'nonexistent'}); console.log('unknown provider', r4 && r4.total_price);
