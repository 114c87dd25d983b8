// The web UI's entry: the session, the top bar and the page for the current path.
import './lib/env.js';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api } from './lib/api.js';
import { html } from './lib/html.js';
import { Link, navigate, useLocation } from './lib/router.js';
import { Dashboard } from './pages/dashboard.js';
import { SignIn } from './pages/signin.js';
import { TraceDetail } from './pages/trace.js';
import { TraceList } from './pages/traces.js';
import { Workbench } from './pages/workbench.js';

const root = document.documentElement;

/** Where to come back after signing in: a page of this UI only. @param {URL} loc */
const here = (loc) => encodeURIComponent(loc.pathname + loc.search);

function App() {
  const loc = useLocation();
  const page = loc.pathname.replace(/^\/ui\/?/, '');
  /** @type {[any, (s: any) => void]} */
  const [session, setSession] = useState(undefined);

  useEffect(() => {
    const out = () => {
      root.dataset.session = 'none';
      setSession(null);
      const now = new URL(location.href);
      if (!now.pathname.startsWith('/ui/signin')) navigate(`/ui/signin?next=${here(now)}`, { replace: true });
    };
    window.addEventListener('tg:signed-out', out);
    return () => window.removeEventListener('tg:signed-out', out);
  }, []);

  useEffect(() => {
    if (page === 'signin' || session) return;
    // No cookie at all: straight to sign-in, without a request bound to fail.
    if (root.dataset.session === 'none') {
      navigate(`/ui/signin?next=${here(loc)}`, { replace: true });
      return;
    }
    api('/api/auth/session')
      .then((s) => setSession(s.session))
      .catch(() => window.dispatchEvent(new CustomEvent('tg:signed-out')));
  }, [page, session]);

  const signedIn = (/** @type {any} */ s) => {
    root.dataset.session = 'cookie';
    setSession(s);
  };
  const signOut = async () => {
    await api('/api/auth/session', { method: 'DELETE' }).catch(() => {});
    root.dataset.session = 'none';
    setSession(null);
    navigate('/ui/signin', { replace: true });
  };

  if (page === 'signin') return html`<${SignIn} onSignedIn=${signedIn} />`;
  if (!session) return html`<div class="loading" role="status">Loading…</div>`;
  return html`
    <a class="skip" href="#main">Skip to content</a>
    <header class="top">
      <${Link} class="brand" href="/ui/traces">tracegate</${Link}>
      <nav aria-label="Pages">
        <${Link} href="/ui/traces" aria-current=${page === '' || page.startsWith('traces') ? 'page' : undefined}>Traces</${Link}>
        <${Link} href="/ui/dashboard" aria-current=${page === 'dashboard' ? 'page' : undefined}>Dashboard</${Link}>
        <${Link} href="/ui/workbench" aria-current=${page === 'workbench' ? 'page' : undefined}>Workbench</${Link}>
      </nav>
      <span class="who" title=${`session ${session.id}`}>workspace <b>${session.workspace || session.workspaceId}</b></span>
      <button type="button" class="quiet" onClick=${signOut}>Sign out</button>
    </header>
    <main id="main" tabindex="-1">${pageFor(page, loc)}</main>
  `;
}

/** @param {string} page @param {URL} loc */
function pageFor(page, loc) {
  if (page === '' || page === 'traces') return html`<${TraceList} loc=${loc} />`;
  if (page.startsWith('traces/'))
    return html`<${TraceDetail} key=${page} traceId=${decodeURIComponent(page.slice(7))} loc=${loc} />`;
  if (page === 'dashboard') return html`<${Dashboard} loc=${loc} />`;
  if (page === 'workbench') return html`<${Workbench} loc=${loc} />`;
  return html`<p class="empty">No such page.</p>`;
}

render(html`<${App} />`, /** @type {HTMLElement} */ (document.getElementById('app')));
