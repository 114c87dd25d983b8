import { html } from '../lib/html.js';
export function Workbench() {
  return html`<p>Workbench</p>`;
}
