// Price of one LLM call in USD, from the bundled @pydantic/genai-prices catalog.
//
//   priceUsd(model, provider, { input, output, cacheRead?, cacheWrite? })
//
// - `input` is the TOTAL input token count, cached tokens included (GenAI semconv
//   `gen_ai.usage.input_tokens` semantics; also what calcPrice expects). When
//   cacheRead + cacheWrite exceed `input`, the sender evidently reported uncached input
//   only (Anthropic API style), so the cache counts are added to it.
// - A dated snapshot the catalog does not know (`-2026-01-15`, `-20260115`, `@20260115`) is priced as the
//   model without the date.
// - Returns 0 when the model is empty or unknown to the catalog, when the provider is a
//   local runtime (ollama, lmstudio, local, vllm, llama.cpp, …), or on any pricing error.
//   Callers also skip pricing for LOCAL_SOURCES (the local workbench and coach routes).
// - Pure and fast: the catalog lookup (calcPrice scans providers and match rules, tens of µs)
//   runs once per (model, provider) and is memoized; for the common case of flat per-token
//   prices the memo holds the four rates and a call is a few multiplications. Models with
//   tiered or time-of-day prices are priced by calcPrice against a one-model provider.
//   The memo is bounded (cleared when it reaches MEMO_MAX entries) and cleared every hour
//   so dated price changes in the catalog take effect.
// - Provider names are matched case-insensitively; GenAI semconv names such as
//   `gcp.vertex_ai`, `aws.bedrock`, `azure.ai.openai` are understood by the catalog. An
//   unknown provider falls back to matching the model name alone.
import { calcPrice, type ModelInfo, type ModelPrice, type Provider } from '@pydantic/genai-prices';
import { MAX_COST_USD, MAX_TOKENS } from '../core/record.ts';

export interface TokenUsage {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
}

export const LOCAL_PROVIDERS: ReadonlySet<string> = new Set([
  'ollama',
  'lmstudio',
  'lm_studio',
  'lm-studio',
  'local',
  'llamacpp',
  'llama.cpp',
  'llama_cpp',
  'llama-cpp',
  'vllm',
  'localai',
  'gpt4all',
  'mlx',
  'jan',
  'koboldcpp',
  'text-generation-webui',
  'oobabooga',
]);

const SNAPSHOT_SUFFIX = /[-@](?:20\d\d-[01]\d-[0-3]\d|20\d\d[01]\d[0-3]\d)$/;

/** Tried in order when neither the given provider nor the model name finds the model. */
const FALLBACK_PROVIDERS = ['openai', 'anthropic', 'google', 'mistral', 'voyage', 'cohere'];

/** Sources of locally hosted models (spec: local traces carry a cost of 0). */
export const LOCAL_SOURCES: ReadonlySet<string> = new Set(['agent_lab', 'coach']);

type Entry =
  | { kind: 'none'; at: number }
  | { kind: 'flat'; at: number; input: number; output: number; cacheRead: number; cacheWrite: number }
  | { kind: 'calc'; at: number; provider: Provider; modelId: string };
// (`at` records when the entry was resolved; the memo is cleared wholesale every MEMO_TTL_MS.)

const MEMO_MAX = 4096;
const MEMO_TTL_MS = 60 * 60 * 1000;
const FLAT_KEYS = new Set(['input_mtok', 'output_mtok', 'cache_read_mtok', 'cache_write_mtok']);
// Price keys that only apply when a usage field we never pass is present.
const USAGE_ONLY_KEYS =
  /^(?:cache_write_1h_mtok|.*_(?:audio|image|video)_.*|.*_(?:kcount|kpages|hours|mchars|gpixels))$/;

function num(v: number | undefined): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0;
}

function resolve(model: string, provider: string, now: number): Entry {
  if (!model || LOCAL_PROVIDERS.has(provider)) return { kind: 'none', at: now };
  const probe = { input_tokens: 1000, output_tokens: 1000 };
  let r = null;
  try {
    r = provider ? calcPrice(probe, model, { providerId: provider }) : null;
    if (!r) r = calcPrice(probe, model);
    // The catalog finds a provider from the model name only for chat families; embedding models
    // (text-embedding-3-small, mistral-embed, voyage-3) are found in their provider's own list. Only when no
    // provider was named: a model served by a named unknown host (tgi, a self-hosted gateway) is not guessed.
    for (let i = 0; !r && !provider && i < FALLBACK_PROVIDERS.length; i++)
      r = calcPrice(probe, model, { providerId: FALLBACK_PROVIDERS[i]! });
  } catch {
    r = null;
  }
  if (!r) {
    // A dated snapshot newer than the catalog (gpt-4o-mini-2025-…, claude-…-20260101, gemini-…@20260101) is priced
    // as its undated model: the family's current price is a better estimate than none.
    const base = SNAPSHOT_SUFFIX.exec(model) ? model.replace(SNAPSHOT_SUFFIX, '') : '';
    return base ? resolve(base, provider, now) : { kind: 'none', at: now };
  }
  const info: ModelInfo = r.model;
  const mp: ModelPrice = r.model_price;
  let flat = !Array.isArray(info.prices);
  for (const [k, v] of Object.entries(mp)) {
    if (v === undefined) continue;
    if (FLAT_KEYS.has(k)) {
      if (typeof v !== 'number') flat = false;
    } else if (k === 'requests_kcount' || !USAGE_ONLY_KEYS.test(k)) {
      flat = false; // a charge that might apply without usage we pass: let calcPrice decide
    }
  }
  if (flat) {
    const input = num(mp.input_mtok as number | undefined) / 1e6;
    return {
      kind: 'flat',
      at: now,
      input,
      output: num(mp.output_mtok as number | undefined) / 1e6,
      cacheRead: mp.cache_read_mtok === undefined ? input : num(mp.cache_read_mtok as number) / 1e6,
      cacheWrite: mp.cache_write_mtok === undefined ? input : num(mp.cache_write_mtok as number) / 1e6,
    };
  }
  return { kind: 'calc', at: now, provider: { ...r.provider, models: [info] }, modelId: model };
}

const memoByProvider = new Map<string, Map<string, Entry>>();
let memoSize = 0;
let memoCheckedAt = Date.now();
let calls = 0;

export function priceUsd(model: string, provider: string, usage: TokenUsage): number {
  // Expire the whole memo hourly; the clock is read only every 1024 calls.
  if ((++calls & 1023) === 0) {
    const now = Date.now();
    if (now - memoCheckedAt > MEMO_TTL_MS) {
      memoByProvider.clear();
      memoSize = 0;
      memoCheckedAt = now;
    }
  }
  let byModel = memoByProvider.get(provider);
  if (byModel === undefined) {
    byModel = new Map();
    memoByProvider.set(provider, byModel);
  }
  let e = byModel.get(model);
  if (e === undefined) {
    if (memoSize >= MEMO_MAX) {
      memoByProvider.clear();
      memoSize = 0;
      memoByProvider.set(provider, (byModel = new Map()));
    }
    e = resolve(model, provider.toLowerCase(), Date.now());
    byModel.set(model, e);
    memoSize++;
  }
  if (e.kind === 'none') return 0;
  // Counts as stored (at most MAX_TOKENS each), and a cost a span can hold: what is stored must be what was priced.
  const cacheRead = tokenCount(usage.cacheRead);
  const cacheWrite = tokenCount(usage.cacheWrite);
  let input = tokenCount(usage.input);
  const output = tokenCount(usage.output);
  if (cacheRead + cacheWrite > input) input += cacheRead + cacheWrite;
  if (e.kind === 'flat') {
    const cost =
      (input - cacheRead - cacheWrite) * e.input +
      cacheRead * e.cacheRead +
      cacheWrite * e.cacheWrite +
      output * e.output;
    return cost > 0 ? tidy(Math.min(cost, MAX_COST_USD)) : 0;
  }
  try {
    const u: Record<string, number> = { input_tokens: input, output_tokens: output };
    if (cacheRead) u.cache_read_tokens = cacheRead;
    if (cacheWrite) u.cache_write_tokens = cacheWrite;
    const r = calcPrice(u, e.modelId, { provider: e.provider });
    return r && r.total_price > 0 ? tidy(Math.min(r.total_price, MAX_COST_USD)) : 0;
  } catch {
    return 0;
  }
}

const tokenCount = (v: number | undefined): number => Math.min(Math.round(num(v)), MAX_TOKENS);

/**
 * A price to 15 significant digits: summing per-token prices leaves binary noise in the last digits
 * (12 × 2.5e-6 + 7 × 1e-5 is 0.00010000000000000002), which every reader of the span would see.
 */
const tidy = (usd: number): number => Number(usd.toPrecision(15));

/** For tests: forget memoized lookups. */
export function clearPriceMemo(): void {
  memoByProvider.clear();
  memoSize = 0;
}
