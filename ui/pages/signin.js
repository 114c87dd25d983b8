// Sign in with a workspace API key (exchanged at once for the session cookie; the key is dropped from the page), or
// with the one-time link `tracegate sessions create` prints (its token in the fragment, so it reaches no server log).
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { html } from '../lib/html.js';
import { navigate } from '../lib/router.js';

/** A page of this UI to go to after signing in: only a path under /ui/. @param {string | null} next */
function safeNext(next) {
  return next && /^\/ui\/(?!\/)/.test(next) && !next.startsWith('/ui/signin') ? next : '/ui/traces';
}

/** @param {{ onSignedIn: (session: any) => void }} props */
export function SignIn({ onSignedIn }) {
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const [link, setLink] = useState(false);
  const keyInput = useRef(/** @type {HTMLInputElement | null} */ (null));
  const next = safeNext(new URLSearchParams(location.search).get('next'));

  const done = (/** @type {any} */ answer) => {
    onSignedIn(answer.session);
    navigate(next, { replace: true });
  };

  useEffect(() => {
    const token = new URLSearchParams(location.hash.slice(1)).get('token');
    if (!token) {
      keyInput.current?.focus();
      return;
    }
    // The token leaves the address bar (and the history) before it is used.
    history.replaceState(null, '', location.pathname + location.search);
    setLink(true);
    setBusy(true);
    api('/api/auth/session', { method: 'POST', body: { linkToken: token } })
      .then(done)
      .catch((/** @type {Error} */ e) => {
        setError(e.message);
        setBusy(false);
      });
  }, []);

  const submit = async (/** @type {Event} */ e) => {
    e.preventDefault();
    const input = keyInput.current;
    const key = input?.value.trim() ?? '';
    if (!input || !key) return setError('Enter a workspace API key.');
    input.value = ''; // the key is not kept in the page
    setBusy(true);
    setError('');
    try {
      done(await api('/api/auth/session', { method: 'POST', headers: { authorization: `Bearer ${key}` } }));
    } catch (err) {
      setError(/** @type {Error} */ (err).message);
      setBusy(false);
      input.focus();
    }
  };

  return html`
    <main class="signin" id="main">
      <h1>tracegate</h1>
      <p class="muted">Sign in to your workspace.</p>
      ${link && busy && html`<p role="status">Signing in with the link…</p>`}
      <form onSubmit=${submit} aria-label="Sign in">
        <label for="key">Workspace API key</label>
        <input ref=${keyInput} id="key" name="key" type="password" autocomplete="off" spellcheck="false" placeholder="tr_live_…" disabled=${busy} />
        <button type="submit" disabled=${busy}>Sign in</button>
      </form>
      ${error && html`<p class="error" role="alert">${error}</p>`}
      <p class="muted small">
        The key is exchanged for a session cookie and not kept by the browser. Or run <code>tracegate sessions create --workspace NAME</code> and open the link it prints.
      </p>
    </main>
  `;
}
