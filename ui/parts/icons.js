// Inline SVG icons (no emoji font is needed; they take the text colour).
import { html } from '../lib/html.js';

export const ThumbUp = () =>
  html`<svg class="icon" viewBox="0 0 24 24" aria-hidden="true"><path d="M7 10v11H3V10h4zm2 11h8.3a2 2 0 0 0 2-1.6l1.6-7A2 2 0 0 0 19 10h-5l.8-4a2 2 0 0 0-3.6-1.5L9 9v12z" fill="currentColor"/></svg>`;
export const ThumbDown = () =>
  html`<svg class="icon" viewBox="0 0 24 24" aria-hidden="true"><path d="M17 14V3h4v11h-4zm-2-11H6.7a2 2 0 0 0-2 1.6l-1.6 7A2 2 0 0 0 5 14h5l-.8 4a2 2 0 0 0 3.6 1.5L15 15V3z" fill="currentColor"/></svg>`;
export const Caret = (/** @type {{ open: boolean }} */ { open }) =>
  html`<svg class=${`icon caret${open ? ' open' : ''}`} viewBox="0 0 24 24" aria-hidden="true"><path d="M9 6l6 6-6 6" fill="none" stroke="currentColor" stroke-width="2.5"/></svg>`;
