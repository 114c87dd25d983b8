// What differs between Node, Bun, Deno and edge runtimes, in one place. Only `fetch`, `AbortController`,
// `crypto.getRandomValues` and timers are assumed; everything Node-only is looked up and guarded.

interface ProcessLike {
  env?: Record<string, string | undefined>;
  on?(event: string, listener: () => void): unknown;
  off?(event: string, listener: () => void): unknown;
}
interface DenoLike {
  env?: { get(name: string): string | undefined };
  unrefTimer?(id: number): void;
}

const g = globalThis as { process?: ProcessLike; Deno?: DenoLike };

/** An environment variable, or undefined where there is none (edge runtimes) or reading it is not allowed (Deno). */
export function envVar(name: string): string | undefined {
  try {
    const v = g.process?.env?.[name] ?? g.Deno?.env?.get(name);
    return v === '' ? undefined : v;
  } catch {
    return undefined;
  }
}

/** Lets the process exit while this timer is pending (Node, Bun, Deno); a no-op elsewhere. */
export function unref(timer: unknown): void {
  try {
    if (typeof timer === 'object' && timer !== null && typeof (timer as { unref?: unknown }).unref === 'function') {
      (timer as { unref(): void }).unref();
    } else if (typeof timer === 'number') {
      g.Deno?.unrefTimer?.(timer);
    }
  } catch {
    /* best effort */
  }
}

/** Runs `listener` when the Node (or Bun, Deno 2) event loop empties before exit; returns the remover. */
export function onBeforeExit(listener: () => void): () => void {
  const p = g.process;
  if (!p || typeof p.on !== 'function' || typeof p.off !== 'function') return () => {};
  try {
    p.on('beforeExit', listener);
  } catch {
    return () => {};
  }
  return () => {
    try {
      p.off?.('beforeExit', listener);
    } catch {
      /* best effort */
    }
  };
}

function randomHex(bytes: number): string {
  const b = crypto.getRandomValues(new Uint8Array(bytes));
  let s = '';
  for (const x of b) s += x.toString(16).padStart(2, '0');
  return s;
}

/**
 * A new trace id: 32 lowercase hex, the W3C trace-id shape. It is the native `requestId` too (the server keys the
 * trace by it, so a retried batch replaces rather than duplicates), and routes that expect an OpenTelemetry trace
 * id (tool calls, feedback) take it as is.
 */
export const newTraceId = (): string => randomHex(16);
/** A new span id: 16 lowercase hex. */
export const newSpanId = (): string => randomHex(8);

/** UTF-8 length of a string, without encoding it. */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}
