// A cheap look at a JSON text before JSON.parse: bracket depth, object and value counts, so a 20 MB "[[[[…",
// "[{},{},…" or "{"k1":1,"k2":2,…" is refused without building it, and nothing too deep reaches structuredClone or a worker.

/** The index of the quote closing the string that opens at `i` (skipping escaped quotes), or -1. */
function stringEnd(b: Buffer, i: number): number {
  let j = i + 1;
  for (;;) {
    j = b.indexOf(0x22, j);
    if (j < 0) return -1;
    let k = j - 1;
    let bs = 0;
    while (b[k] === 0x5c) {
      bs++;
      k--;
    }
    if ((bs & 1) === 0) return j;
    j++;
  }
}

/**
 * Bracket depth, object count and value count of a JSON text, scanning bytes and skipping string
 * contents with indexOf (no parse, no allocation). Returns 'deep' as soon as the depth
 * exceeds `maxNesting`, 'wide' as soon as more than `maxObjects` objects were opened, 'many' as soon as
 * more than `maxValues` values were seen.
 *
 * Values are counted as 1 + opening brackets + commas outside strings: every value is the root, the first
 * element of a container or follows a comma, and every container counts once more for itself. So an object
 * member (key and value) counts once, a scalar once, an object or array once plus its elements, and an empty
 * container twice. JSON.parse and what follows it cost per value; this bounds them whatever the byte size.
 */
export function jsonPrescan(
  b: Buffer,
  maxNesting: number,
  maxObjects = Infinity,
  maxValues = Infinity,
): 'ok' | 'deep' | 'wide' | 'many' {
  let depth = 0;
  let objects = 0;
  let values = 1;
  const n = b.length;
  for (let i = 0; i < n; i++) {
    const c = b[i]!;
    if (c === 0x22) {
      const j = stringEnd(b, i);
      if (j < 0) return 'ok'; // unterminated string: JSON.parse reports it
      i = j;
    } else if (c === 0x2c) {
      if (++values > maxValues) return 'many';
    } else if (c === 0x7b) {
      if (++depth > maxNesting) return 'deep';
      if (++objects > maxObjects) return 'wide';
      if (++values > maxValues) return 'many';
    } else if (c === 0x5b) {
      if (++depth > maxNesting) return 'deep';
      if (++values > maxValues) return 'many';
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return 'ok';
}

/** A key as a case-insensitive parser matches it: full case folding ('ſ' is 's', the Kelvin sign 'k'). */
export const foldKey = (k: string): string => k.toUpperCase().toLowerCase();

/** A JSON object (not an array, not null). */
export const isJsonObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * An object's fields by folded key, as an upstream matching keys without regard to case reads them (Go's
 * encoding/json does). One value per key when the object passed duplicateKey with foldCase.
 */
export const foldedFields = (o: Record<string, unknown>): Map<string, unknown> =>
  new Map(Object.entries(o).map(([k, v]) => [foldKey(k), v]));

/**
 * The first object key that occurs twice in the same object of a (valid) JSON text, or null. JSON.parse keeps
 * the last copy; another parser may keep the first, so where the text is forwarded as is (the proxy) a policy
 * checked on one copy could be bypassed with the other. With `foldCase`, keys differing only in case count as the
 * same (some parsers match field names case-insensitively, Go's encoding/json among them), except inside the maps
 * named by `exactUnder` (folded names): their keys are data, not fields a parser matches.
 */
export function duplicateKey(b: Buffer, foldCase = false, exactUnder: ReadonlySet<string> = new Set()): string | null {
  const objects: Array<{ keys: Set<string> | null; exact: boolean }> = []; // keys null: an array
  let lastKey: string | null = null; // the last key read: the name of the value that opens next
  let expectKey = false;
  const n = b.length;
  for (let i = 0; i < n; i++) {
    const c = b[i]!;
    if (c === 0x22) {
      const j = stringEnd(b, i);
      if (j < 0) return null;
      const top = objects[objects.length - 1];
      if (top?.keys && expectKey) {
        // Compared unescaped: "input" and "\u0069nput" are the same key.
        const key = b.subarray(i + 1, j).includes(0x5c)
          ? (JSON.parse(b.toString('utf8', i, j + 1)) as string)
          : b.toString('utf8', i + 1, j);
        const seen = foldCase && !top.exact ? foldKey(key) : key;
        if (top.keys.has(seen)) return key;
        top.keys.add(seen);
        lastKey = key;
        expectKey = false;
      }
      i = j;
    } else if (c === 0x7b || c === 0x5b) {
      const parent = objects[objects.length - 1];
      const exact =
        (parent?.exact ?? false) || (parent?.keys != null && lastKey !== null && exactUnder.has(foldKey(lastKey)));
      objects.push({ keys: c === 0x7b ? new Set() : null, exact });
      expectKey = c === 0x7b;
    } else if (c === 0x5d || c === 0x7d) {
      objects.pop();
    } else if (c === 0x2c) {
      expectKey = objects[objects.length - 1]?.keys != null;
    }
  }
  return null;
}

/**
 * Where JSON.parse failed, without V8's quote of the text around it: that quote is request text (a prompt, a key
 * pasted unquoted), and error bodies end up in client logs.
 */
export function jsonSyntaxError(err: unknown): string {
  const m = err instanceof Error ? err.message : '';
  const at = /at position (\d+)(?: \(line (\d+) column (\d+)\))?/.exec(m);
  if (at) return `syntax error at position ${at[1]}${at[2] ? ` (line ${at[2]} column ${at[3]})` : ''}`;
  if (m.startsWith('Unexpected end of JSON input')) return 'unexpected end of input';
  return 'syntax error';
}
