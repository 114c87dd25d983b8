// What the tool-call and feedback mappers share: field names in snake_case or camelCase (one canonical name each),
// W3C traceparent, ids and times as the routes take them, and the answer for a field that is wrong.
import { z } from 'zod';
import { TracegateError } from '../core/errors.ts';
import { LATEST_STORABLE_NS } from '../core/record.ts';

/** A field the client got wrong: the path as the client spelled it, the rule it broke. */
export interface FieldIssue {
  field: string;
  code: string;
  message: string;
}

/** A request item that cannot be taken: a 400 naming the first field (`details`: every problem). */
export function invalidItem(issues: FieldIssue[]): TracegateError {
  const first = issues[0]!;
  return new TracegateError('invalid', 'validation_failed', `${first.field}: ${first.message}`, { details: issues });
}

/** snake_case → camelCase (`trace_id` → `traceId`). */
const camel = (s: string) => s.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/**
 * The item with every field under its canonical (snake_case) name: `fields` lists the canonical names, each also
 * taken in camelCase and under its `extra` aliases. Two spellings of one field with different values are an issue.
 * Returns the item and the spelling the client used for each canonical name (issues name fields as sent).
 */
export function canonicalFields(
  item: Record<string, unknown>,
  fields: readonly string[],
  extra: Readonly<Record<string, readonly string[]>> = {},
): { item: Record<string, unknown>; spelled: Map<string, string>; issues: FieldIssue[] } {
  const out: Record<string, unknown> = {};
  const spelled = new Map<string, string>();
  const issues: FieldIssue[] = [];
  const known = new Set<string>();
  for (const name of fields) {
    const names = [...new Set([name, camel(name), ...(extra[name] ?? [])])];
    for (const n of names) known.add(n);
    for (const n of names) {
      if (!Object.hasOwn(item, n) || item[n] === undefined) continue;
      const first = spelled.get(name);
      if (first === undefined) {
        out[name] = item[n];
        spelled.set(name, n);
      } else if (JSON.stringify(item[first]) !== JSON.stringify(item[n])) {
        issues.push({
          field: n,
          code: 'conflict',
          message: `${first} and ${n} are the same field with different values`,
        });
      }
    }
  }
  // Fields the route does not know stay, under their own names (the mappers keep them as attributes).
  for (const k of Object.keys(item)) if (!known.has(k)) out[k] = item[k];
  return { item: out, spelled, issues };
}

/** zod issues as field issues, each path's head in the client's spelling. */
export function zodIssues(error: z.ZodError, spelled: ReadonlyMap<string, string>, prefix = ''): FieldIssue[] {
  return error.issues.map((i) => {
    const [head, ...rest] = i.path.map(String);
    const path = [head === undefined ? undefined : (spelled.get(head) ?? head), ...rest].filter((p) => p !== undefined);
    return { field: `${prefix}${path.join('.')}` || '(body)', code: i.code, message: i.message };
  });
}

/** An id as the routes take it (trace, span, response, request, call ids): printable ASCII, no spaces. */
export const idString = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

/** `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>` (W3C Trace Context); all-zero ids are invalid. */
export const traceparentString = z
  .string()
  .max(512)
  .regex(/^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-.*)?$/, 'a W3C traceparent: 00-<32 hex>-<16 hex>-<2 hex>')
  .refine((v) => !/^[0-9a-f]{2}-0{32}-/.test(v) && !/^[0-9a-f]{2}-[0-9a-f]{32}-0{16}-/.test(v), {
    message: 'a traceparent with an all-zero id',
  })
  .refine((v) => !v.startsWith('ff'), { message: 'traceparent version ff is invalid' });

export function parseTraceparent(v: string): { traceId: string; parentSpanId: string } {
  const [, traceId, parentSpanId] = v.split('-');
  return { traceId: traceId!, parentSpanId: parentSpanId! };
}

const LATEST_MS = Number(LATEST_STORABLE_NS / 1_000_000n);

/** A time: milliseconds since the epoch, or an ISO 8601 string with a zone; within what storage holds. */
export const timeValue = z
  .union([
    z.number().min(0).max(LATEST_MS),
    z
      .string()
      .max(64)
      .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/, 'an ISO 8601 time with a zone')
      .refine((v) => Number.isFinite(Date.parse(v)) && Date.parse(v) >= 0 && Date.parse(v) <= LATEST_MS, {
        message: 'not a time storage can hold',
      }),
  ])
  .describe('Milliseconds since the epoch, or ISO 8601 with a zone');

/** Milliseconds of a timeValue (a string's digits below the millisecond dropped). */
export function timeMs(v: number | string): number {
  return typeof v === 'number' ? v : Date.parse(v);
}

/** Nanoseconds of a timeValue, a string's fraction kept to the nanosecond (as a float of ms cannot hold it). */
export function timeNs(v: number | string): bigint {
  if (typeof v === 'number') return BigInt(Math.round(v * 1e6));
  const frac = /\.(\d{4,9})/.exec(v)?.[1];
  const sub = frac ? BigInt(frac.slice(3).padEnd(6, '0')) : 0n;
  return BigInt(Date.parse(v)) * 1_000_000n + sub;
}

/** A free-form JSON object (metadata). */
export const jsonObject = z.record(z.string().max(256), z.unknown());
