// Browser-like requests with the session cookie: sign in with a key or a link, then call routes the way the web UI
// does (the cookie, and the server's own Origin on requests that change state).

export interface Answer {
  status: number;
  headers: Headers;
  json: any;
  text: string;
}

export interface CookieCall {
  method?: string;
  /** `tg_session=…`, as signIn returns it. */
  cookie?: string;
  /** Sent as Origin; null: none. Default: the server's own origin (`base`). */
  origin?: string | null;
  referer?: string;
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
}

export async function call(base: string, path: string, o: CookieCall = {}): Promise<Answer> {
  const method = o.method ?? (o.body === undefined ? 'GET' : 'POST');
  const headers: Record<string, string> = { ...o.headers };
  if (o.cookie) headers.cookie = o.cookie;
  const origin = o.origin === undefined ? base : o.origin;
  if (origin !== null && method !== 'GET') headers.origin = origin;
  if (o.referer) headers.referer = o.referer;
  if (o.body !== undefined) headers['content-type'] = o.contentType ?? 'application/json';
  const body = o.body === undefined ? undefined : typeof o.body === 'string' ? o.body : JSON.stringify(o.body);
  const res = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** The session cookie's `name=value` from a Set-Cookie answer. */
export function cookieOf(a: Answer): string {
  const set = a.headers.getSetCookie().find((c) => c.startsWith('tg_session='));
  if (!set) throw new Error(`no session cookie in the answer (${a.status} ${a.text})`);
  return set.split(';')[0]!;
}

/** Signs in with a workspace API key: the cookie to send. */
export async function signIn(base: string, key: string): Promise<string> {
  const a = await call(base, '/api/auth/session', { method: 'POST', headers: { authorization: `Bearer ${key}` } });
  if (a.status !== 201) throw new Error(`sign-in answered ${a.status}: ${a.text}`);
  return cookieOf(a);
}

/** The token of a sign-in link (`…/ui/signin#token=…`). */
export const linkToken = (link: string): string => new URL(link).hash.replace(/^#token=/, '');
