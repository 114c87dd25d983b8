// Lines of a streamed answer (NDJSON, server-sent events), strictly: UTF-8 only, and no line longer than a bound, so
// a server sending garbage (or one endless line) costs bounded memory and ends in a clear error.
import { TracegateError } from '../../core/errors.ts';

/** A local model server's answer is not what its protocol says (502). */
export function badResponse(message: string): TracegateError {
  return new TracegateError(
    'upstream_failed',
    'local_model_bad_response',
    `the local model server's answer is invalid: ${message}`,
  );
}

export class LineSplitter {
  private readonly decoder = new TextDecoder('utf-8', { fatal: true });
  private readonly maxChars: number;
  private rest = '';
  constructor(maxChars: number) {
    this.maxChars = maxChars;
  }

  /** The complete lines the chunk ends (CRLF or LF), without their line ends. */
  push(chunk: Uint8Array): string[] {
    let text: string;
    try {
      text = this.rest + this.decoder.decode(chunk, { stream: true });
    } catch {
      throw badResponse('not UTF-8');
    }
    const lines = text.split('\n');
    this.rest = lines.pop()!;
    if (this.rest.length > this.maxChars) throw badResponse(`a line longer than ${this.maxChars} characters`);
    return lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
  }

  /** What is left once the stream ended: a last line without its line end, or nothing. */
  end(): string[] {
    let text: string;
    try {
      text = this.rest + this.decoder.decode();
    } catch {
      throw badResponse('not UTF-8 (a character cut at the end)');
    }
    this.rest = '';
    return text === '' ? [] : [text.endsWith('\r') ? text.slice(0, -1) : text];
  }
}

/** A JSON object from a line of the answer, or a 502 saying what it was instead. */
export function jsonObject(line: string, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    throw badResponse(`${what} is not JSON: ${preview(line)}`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw badResponse(`${what} is not a JSON object: ${preview(line)}`);
  return v as Record<string, unknown>;
}

/** Text from the server shown in a message: short, one line, no control characters. */
export function preview(text: string, max = 200): string {
  const flat = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

/** A token count as sent, or 0 when absent; anything but a whole number ≥ 0 is a bad answer. */
export function tokenCount(v: unknown, field: string): number {
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw badResponse(`${field} is not a token count`);
  return v;
}
