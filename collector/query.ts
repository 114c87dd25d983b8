// Query-string parsing shared by the read routes: one time format, one error shape.
import { z } from 'zod';
import type { Context } from 'koa';
import { HttpError } from './errors.ts';

/** The latest instant a JS Date holds (+275760-09-13): a later bound could not even be named in an error. */
const MAX_DATE_MS = 8_640_000_000_000_000;

/** Milliseconds since the epoch (decimal digits), an ISO 8601 date-time with an offset, or a date (midnight UTC). */
export const time = z.union([
  z.string().regex(/^\d{1,16}$/).transform(Number).pipe(z.number().max(MAX_DATE_MS)),
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
