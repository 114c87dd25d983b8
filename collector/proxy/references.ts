// Objects stored at the provider that a Responses request can name: a conversation, an item, container or skill by
// reference, a file, a vector store, a container, an MCP tunnel. With the server's provider key
// (TRACEGATE_PROVIDER_API_KEY, shared by every workspace without a key of its own) the provider would serve whichever
// object of that account is named, and tracegate creates none of them for a workspace (it proxies the Responses API
// only), so none can be attributed to the caller: such a request is refused. Response ids (previous_response_id,
// prompt_cache_options.comparison_response_id) are checked by ownership.ts instead.
import { foldedFields, foldKey, isJsonObject } from '../../platform/json-prescan.ts';

/** Keys whose value names stored files, vector stores, skills or an MCP tunnel (folded case: an upstream may match keys regardless of it). */
const ID_KEYS = new Set(['file_id', 'file_ids', 'vector_store_ids', 'skill_id', 'tunnel_id']);

const named = (v: unknown): boolean =>
  (typeof v === 'string' && v !== '') || (Array.isArray(v) && v.length > 0) || isJsonObject(v);

/**
 * Where the request body names an object stored at the provider (a path such as `input[1].content[0].file_id`),
 * or null. Only the first one found: the caller fixes it and learns of the next. Not read: the caller's own names
 * (top-level `metadata`, the JSON schemas of `text` and of a tool's `parameters`, an MCP tool's `headers`) and what
 * replayed output cites (`annotations`, a file search's `results`).
 */
export function storedObjectReference(body: Record<string, unknown>): string | null {
  for (const [k, v] of Object.entries(body)) {
    const key = foldKey(k);
    if (key === 'metadata' || key === 'text') continue;
    if (key === 'conversation') {
      if (named(v)) return k;
      continue;
    }
    if (key === 'input' && Array.isArray(v)) {
      // An item given by id alone is an item reference, its `type` being optional.
      for (let i = 0; i < v.length; i++) {
        const item = isJsonObject(v[i]) ? foldedFields(v[i]) : null;
        if (
          item &&
          typeof item.get('id') === 'string' &&
          item.get('role') === undefined &&
          (item.get('type') ?? null) === null
        )
          return `${k}[${i}]`;
      }
    }
    const hit = find(v, k, 1, key === 'tools');
    if (hit) return hit;
  }
  return null;
}

/** `tools`: `v` is the request's list of tools; `tool`: one of them, whose `parameters` (a JSON schema) and `headers` are the caller's names. */
function find(v: unknown, path: string, depth: number, tools = false, tool = false): string | null {
  // Parsing bounded the depth already (TRACEGATE_MAX_JSON_DEPTH); this is a backstop for a caller outside the route.
  if (depth > 256 || typeof v !== 'object' || v === null) return null;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const hit = find(v[i], `${path}[${i}]`, depth + 1, false, tools);
      if (hit) return hit;
    }
    return null;
  }
  const o = v as Record<string, unknown>;
  const type = foldedFields(o).get('type');
  const kind = typeof type === 'string' ? foldKey(type) : '';
  // item_reference, container_reference, skill_reference: an object stored at the provider, named by id.
  if (kind.endsWith('_reference')) return path;
  for (const [k, x] of Object.entries(o)) {
    const key = foldKey(k);
    const at = `${path}.${k}`;
    if (ID_KEYS.has(key) && named(x)) return at;
    if (key === 'container' && typeof x === 'string' && x !== '') return at; // an existing container; {type:"auto"} makes a new one
    if (key === 'annotations' || (kind === 'file_search_call' && key === 'results')) continue;
    if (tool && (key === 'parameters' || key === 'headers')) continue;
    const hit = find(x, at, depth + 1);
    if (hit) return hit;
  }
  return null;
}
