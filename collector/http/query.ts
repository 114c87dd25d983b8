// Query-string parsing shared by the read routes: one time format, one error shape.
import { z } from 'zod';
import type { Context } from 'koa';
import { HttpError } from './errors.ts';

/** The latest instant a JS Date holds (+275760-09-13): a later bound could not even be named in an error. */
const MAX_DATE_MS = 8_640_000_000_000_000;

const NS_PER_MS = 1_000_000n;

/**
 * An ISO 8601 date-time (as z.iso.datetime takes it: seconds, any fraction, Z or ±hh:mm) in nanoseconds, to the
 * digit: spans are stored in ns, and a bound cut to the millisecond would move the range silently.
 */
function isoNs(s: string): bigint {
  const m = /^(.+:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(s)!;
  return BigInt(Date.parse(`${m[1]}${m[3]}`)) * NS_PER_MS + BigInt((m[2] ?? '').slice(0, 9).padEnd(9, '0'));
}

/**
 * A time bound, as nanoseconds since the epoch: milliseconds (decimal digits), an ISO 8601 date-time with an
 * offset (fraction digits kept to the nanosecond), or a date (midnight UTC).
 */
export const time = z.union([
  z
    .string()
    .regex(/^\d{1,16}$/)
    .transform(Number)
    .pipe(z.number().max(MAX_DATE_MS))
    .transform((ms) => BigInt(ms) * NS_PER_MS),
  z.iso.datetime({ offset: true }).transform(isoNs),
  z.iso.date().transform((s) => BigInt(Date.parse(`${s}T00:00:00Z`)) * NS_PER_MS),
]);

/**
 * A bound in ns as a bound on whole-millisecond times (audit, alerts, findings, usage): for an integer t,
 * t >= ns/1e6 exactly when t >= ceil(ns/1e6), and the same for t < ns/1e6, so ceiling both keeps the range exact.
 */
export function msCeil(ns: bigint | undefined): number | undefined {
  if (ns === undefined) return undefined;
  const q = ns / NS_PER_MS; // truncates toward zero
  return Number(ns > q * NS_PER_MS ? q + 1n : q);
}

/** A count in a query (limit, spanLimit): decimal digits only, as the time bounds ("0x3", "3e0", " 3" are not). */
export const whole = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,16}$/, 'must be a whole number in decimal digits')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/** Validates ctx.query; 400 naming the first bad parameter, every problem in details. */
export function parseQuery<T extends z.ZodType>(schema: T, ctx: Context): z.output<T> {
  return parseParams(schema, ctx.query);
}

/** Validates query parameters given another way (the CLI's options), as parseQuery does. */
export function parseParams<T extends z.ZodType>(schema: T, params: unknown): z.output<T> {
  const r = schema.safeParse(params);
  if (!r.success) {
    // A parameter the route does not take (a strict schema) is named as the field.
    const field = (i: z.core.$ZodIssue) => (i.code === 'unrecognized_keys' ? i.keys.join(', ') : i.path.join('.'));
    const i = r.error.issues[0]!;
    throw new HttpError(
      400,
      'invalid_query',
      `${field(i)}: ${i.message}`,
      r.error.issues.map((x) => ({ field: field(x), message: x.message })),
    );
  }
  return r.data;
}
