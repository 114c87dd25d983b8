// Query-string parsing shared by the read routes: one time format, one error shape.
import { z } from 'zod';
import type { Context } from 'koa';
import { HttpError } from './errors.ts';

/** A point in time: ms since the epoch, or ISO 8601 with an offset. */
/** Milliseconds since the epoch, an ISO 8601 date-time with an offset, or a date (midnight UTC). */
export const time = z.union([
  z.coerce.number().int().min(0),
  z.iso.datetime({ offset: true }).transform((s) => Date.parse(s)),
  z.iso.date().transform((s) => Date.parse(`${s}T00:00:00Z`)),
]);

/** Validates ctx.query; 400 naming the first bad parameter, every problem in details. */
export function parseQuery<T extends z.ZodType>(schema: T, ctx: Context): z.output<T> {
  const r = schema.safeParse(ctx.query);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new HttpError(400, 'invalid_query', `${i.path.join('.')}: ${i.message}`, r.error.issues.map((x) => ({ field: x.path.join('.'), message: x.message })));
  }
  return r.data;
}
