// A small history router: pages are paths under /ui/, links are ordinary anchors (open in a new tab works), and a
// plain click is turned into a pushState.
import { useEffect, useState } from 'preact/hooks';
import { html } from './html.js';

const listeners = new Set();
const notify = () => {
  for (const l of listeners) l(location.href);
};
window.addEventListener('popstate', notify);

/** @param {string} url @param {{ replace?: boolean }} [o] */
export function navigate(url, o = {}) {
  if (o.replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  notify();
}

/** The current URL; re-renders on navigation. */
export function useLocation() {
  const [href, setHref] = useState(location.href);
  useEffect(() => {
    listeners.add(setHref);
    return () => listeners.delete(setHref);
  }, []);
  return new URL(href);
}

/** @param {{ href: string, class?: string, children?: any, [k: string]: any }} props */
export function Link({ href, children, ...rest }) {
  const onClick = (/** @type {MouseEvent} */ e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return html`<a href=${href} onClick=${onClick} ...${rest}>${children}</a>`;
}
