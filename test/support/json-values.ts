// JSON bodies with a known number of values, as the prescan (platform/json-prescan.ts) counts them.

/** A JSON text's values as the prescan counts them: the root, every container, every element or member. */
export function countValues(v: unknown): number {
  if (Array.isArray(v)) return 1 + v.reduce((n: number, x) => n + countValues(x), 0);
  if (typeof v === 'object' && v !== null) return 1 + Object.values(v).reduce((n: number, x) => n + countValues(x), 0);
  return 1;
}

/** `{"prompt":"p","metadata":{"k0":0,…}}` with `total` values in all. */
export const withValues = (total: number) => {
  const keys = total - 3; // root, prompt, metadata
  return `{"prompt":"p","metadata":{${Array.from({ length: keys }, (_, i) => `"k${i}":${i}`).join(',')}}}`;
};
