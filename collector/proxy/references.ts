// Objects stored at the provider that a Responses request can name: a conversation, an item by reference, a file, a
// vector store, a code-interpreter container. With the server's provider key (TRACEGATE_PROVIDER_API_KEY, shared by
// every workspace without a key of its own) the provider would serve whichever object of that account is named, and
// tracegate creates none of them for a workspace (it proxies the Responses API only), so none can be attributed to the
// caller: such a request is refused. Responses the proxy gave the workspace are checked by ownership.ts instead.
import { foldKey } from '../json-prescan.ts';

/**
 * Subtrees whose keys are the caller's own names (metadata, a JSON schema's properties, a function's parameters),
 * and citations in replayed output (annotations name files the provider itself cited): no reference is read there.
 * Prompt `variables` are walked: a variable's value may be an input_file or input_image naming a file_id.
 */
const NOT_REFERENCES = new Set(['metadata', 'schema', 'properties', 'parameters', 'annotations']);

/** Keys whose value names stored files or vector stores (folded case: an upstream may match keys regardless of it). */
const ID_KEYS = new Set(['file_id', 'file_ids', 'vector_store_ids']);

const named = (v: unknown): boolean =>
  (typeof v === 'string' && v !== '') || (Array.isArray(v) && v.length > 0) || (typeof v === 'object' && v !== null && !Array.isArray(v));

/**
 * Where the request body names an object stored at the provider (a path such as `input[1].content[0].file_id`),
 * or null. Only the first one found: the caller fixes it and learns of the next.
 */
export function storedObjectReference(body: Record<string, unknown>): string | null {
  for (const [k, v] of Object.entries(body)) {
    if (foldKey(k) === 'conversation' && named(v)) return k;
  }
  return find(body, '', 0);
}

function find(v: unknown, path: string, depth: number): string | null {
  // Parsing bounded the depth already (TRACEGATE_MAX_JSON_DEPTH); this is a backstop for a caller outside the route.
  if (depth > 256 || typeof v !== 'object' || v === null) return null;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const hit = find(v[i], `${path}[${i}]`, depth + 1);
      if (hit) return hit;
    }
    return null;
  }
  for (const [k, x] of Object.entries(v)) {
    const key = foldKey(k);
    const at = path ? `${path}.${k}` : k;
    if (key === 'type' && typeof x === 'string' && foldKey(x) === 'item_reference') return path || k;
    if (ID_KEYS.has(key) && named(x)) return at;
    if (key === 'container' && typeof x === 'string' && x !== '') return at; // an existing container; {type:"auto"} makes a new one
    if (NOT_REFERENCES.has(key)) continue;
    const hit = find(x, at, depth + 1);
    if (hit) return hit;
  }
  return null;
}
