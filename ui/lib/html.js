// htm bound to Preact's h: tagged templates instead of JSX, so the browser runs these files as they are.
import htm from 'htm';
import { h } from 'preact';

export const html = htm.bind(h);
