// The body shape the tool-call and feedback routes share: one item, `{ "<list>": [ … ] }` (snake_case or camelCase),
// or a bare JSON array; and the per-item answer of a batch (each item validated on its own, 207 when some failed).
import { z } from 'zod';
import type { TracegateError } from '../../core/errors.ts';
import type { FieldIssue } from '../../mappers/signal-fields.ts';
import { HttpError } from '../http/errors.ts';

export interface Items {
  items: unknown[];
  /** False for a single item (answered as such). */
  batch: boolean;
  /** How the list was named ('' for an array body): item issues are prefixed with it. */
  prefix: string;
}

/** `list`: the snake_case name of the batch field (`tool_calls`), also taken in camelCase (`toolCalls`). */
export function itemsOf(body: unknown, list: string, camel: string, maxItems: number): Items {
  let items: unknown[] | null = null;
  let prefix = '';
  if (Array.isArray(body)) items = body;
  else if (typeof body === 'object' && body !== null) {
    const o = body as Record<string, unknown>;
    const name = Object.hasOwn(o, list) ? list : Object.hasOwn(o, camel) ? camel : null;
    if (name !== null) {
      if (!Array.isArray(o[name]))
        throw new HttpError(400, 'validation_failed', `${name}: expected an array`, [
          { field: name, code: 'invalid_type', message: 'expected an array' },
        ]);
      items = o[name] as unknown[];
      prefix = `${name}.`;
    }
  }
  if (items === null) return { items: [body], batch: false, prefix: '' };
  if (items.length > maxItems)
    throw new HttpError(413, 'too_many_items', `batch has ${items.length} items; the limit is ${maxItems}`, {
      limit: maxItems,
    });
  return { items, batch: true, prefix };
}

export type ItemError = { index: number; error: { code: string; message: string; details: FieldIssue[] } };

/** A batch item's error entry. */
export function itemError(index: number, issues: FieldIssue[]): ItemError {
  return {
    index,
    error: { code: 'validation_failed', message: `${issues[0]!.field}: ${issues[0]!.message}`, details: issues },
  };
}

/** Every item of a batch refused: the request is refused (400), nothing ingested. */
export function refuseAll(results: unknown[], count: number): TracegateError {
  const refuse = new HttpError(400, 'validation_failed', 'every item in the batch was rejected', results);
  return Object.assign(refuse, { rejectedItems: count });
}

export const itemErrorSchema = z.object({
  index: z.number(),
  error: z.object({ code: z.string(), message: z.string(), details: z.unknown() }),
});
