// SQL literals for ClickHouse. HTTP query parameters ({name:Type}) only exist since 19.x and
// 18.16 rejects them ("Unknown setting param_x"), so values are inlined — always through
// these helpers, never by concatenating raw input.

/**
 * A single-quoted String literal. Backslash and quote are escaped; every control character
 * (and DEL) becomes \xHH so no byte can end the literal or confuse the parser.
 * Lone surrogates must already be gone (see wellFormed).
 */
export function str(value: string): string {
  let out = "'";
  for (const ch of value) {
    const c = ch.codePointAt(0) ?? 0;
    if (ch === '\\') out += '\\\\';
    else if (ch === "'") out += "\\'";
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out + "'";
}

/** A UInt64 literal from a decimal string (already validated digits, e.g. by checkNs). */
export function u64(decimal: string): string {
  if (!/^\d{1,20}$/.test(decimal)) throw new RangeError(`not a uint64: ${JSON.stringify(decimal)}`);
  return `toUInt64('${decimal}')`;
}

/** `IN (...)` list of string literals; callers must not pass an empty list. */
export function strList(values: readonly string[]): string {
  if (values.length === 0) throw new RangeError('empty IN list');
  return `(${values.map(str).join(', ')})`;
}

/**
 * An `IN` set of string literals written as one array literal, `(SELECT arrayJoin([...]))`: 18.16 parses a long list
 * faster that way (one literal rather than one syntax node each), and still reads only the index ranges the set
 * names. Callers must not pass an empty list.
 */
export function strSet(values: readonly string[]): string {
  if (values.length === 0) throw new RangeError('empty IN list');
  return `(SELECT arrayJoin([${values.map(str).join(', ')}]))`;
}

/** Database and table names are never user input, but check them anyway. */
export function ident(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new RangeError(`bad identifier: ${JSON.stringify(name)}`);
  return name;
}
