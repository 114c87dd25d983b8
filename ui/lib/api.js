// Calls to the server's JSON API with the session cookie (sent by the browser; the page never sees it). A 401 means
// the session ended: the app goes to the sign-in page.

export class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** @param {Record<string, string | number | undefined | null>} [query] */
export function queryString(query = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * @param {string} path
 * @param {{ method?: string, body?: unknown, query?: Record<string, any>, headers?: Record<string, string> }} [o]
 */
export async function api(path, o = {}) {
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json', ...o.headers };
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path + queryString(o.query), {
    method: o.method ?? (o.body === undefined ? 'GET' : 'POST'),
    headers,
    credentials: 'same-origin',
    body: o.body === undefined ? undefined : JSON.stringify(o.body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  if (!res.ok) {
    const err = json?.error ?? {};
    if (res.status === 401 && !path.startsWith('/api/auth/')) window.dispatchEvent(new CustomEvent('tg:signed-out'));
    throw new ApiError(res.status, err.code ?? 'http_error', err.message ?? `${res.status} ${res.statusText}`);
  }
  return json;
}

/**
 * POST that answers server-sent events: calls onEvent(event, data) for each, in order. A refusal before the stream
 * starts is a JSON error, thrown as ApiError.
 * @param {string} path @param {unknown} body @param {(event: string, data: any) => void} onEvent
 * @param {AbortSignal} [signal]
 */
export async function postStream(path, body, onEvent, signal) {
  const res = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    credentials: 'same-origin',
    body: JSON.stringify(body),
    signal,
  });
  if (!res.ok || !res.body) {
    const json = await res.json().catch(() => null);
    throw new ApiError(res.status, json?.error?.code ?? 'http_error', json?.error?.message ?? `${res.status}`);
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (data !== undefined) onEvent(event, JSON.parse(data));
      end = buffer.indexOf('\n\n');
    }
  }
}
