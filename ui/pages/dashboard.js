import { html } from '../lib/html.js';
export function Dashboard() {
  return html`<p>Dashboard</p>`;
}
