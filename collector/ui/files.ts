// What the web UI serves, fixed when the server starts: the files of the repository's `ui/` folder (listed once, by
// name) and the vendor modules taken from node_modules (an explicit allow-list). A request path is only ever a key
// looked up in these maps: it never becomes a file path, so `..`, encoded dots or symlinks lead nowhere.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const UI_ROOT = fileURLToPath(new URL('../../ui/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

export interface ServedFile {
  path: string;
  type: string;
}

/** Vendor modules: the URL name under /ui/vendor/ → the package specifier it resolves from. */
const VENDOR: Record<string, string> = {
  'preact.mjs': 'preact',
  'preact-hooks.mjs': 'preact/hooks',
  'htm.mjs': 'htm',
  'uplot.mjs': 'uplot/dist/uPlot.esm.js', // the package's main is CommonJS
  'uplot.css': 'uplot/dist/uPlot.min.css',
  'marked.mjs': 'marked',
  'purify.mjs': 'dompurify',
  'virtual-core/index.js': '@tanstack/virtual-core',
};
/** The modules @tanstack/virtual-core's entry imports by relative path, served beside it. */
const VIRTUAL_CORE_PARTS = ['utils.js', 'ios-gesture.js', 'lazy-measurements.js', 'scroll-classifier.js'];

/** The bare specifiers the browser code imports, mapped by the page's import map. */
export const IMPORTS: Record<string, string> = {
  preact: '/ui/vendor/preact.mjs',
  'preact/hooks': '/ui/vendor/preact-hooks.mjs',
  htm: '/ui/vendor/htm.mjs',
  uplot: '/ui/vendor/uplot.mjs',
  marked: '/ui/vendor/marked.mjs',
  dompurify: '/ui/vendor/purify.mjs',
  '@tanstack/virtual-core': '/ui/vendor/virtual-core/index.js',
};

function typeOf(path: string): string | undefined {
  return TYPES[extname(path)];
}

/** The vendor files by their name under /ui/vendor/. */
export function vendorFiles(): Map<string, ServedFile> {
  const files = new Map<string, ServedFile>();
  for (const [name, specifier] of Object.entries(VENDOR)) {
    const path = fileURLToPath(import.meta.resolve(specifier));
    files.set(name, { path, type: typeOf(path) ?? typeOf(name)! });
  }
  const core = dirname(files.get('virtual-core/index.js')!.path);
  for (const part of VIRTUAL_CORE_PARTS)
    files.set(`virtual-core/${part}`, { path: join(core, part), type: TYPES['.js']! });
  return files;
}

/** Every file of the ui/ folder with a type we serve, by its path under /ui/ (forward slashes). */
export function uiFiles(root = UI_ROOT): Map<string, ServedFile> {
  const files = new Map<string, ServedFile>();
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (typeOf(path)) files.set(relative(root, path).split(sep).join('/'), { path, type: typeOf(path)! });
    }
  };
  walk(root);
  return files;
}

/** The page's import map (inline: browsers load no external import maps), and its CSP hash. */
export function importMap(): { json: string; hash: string } {
  const json = JSON.stringify({ imports: IMPORTS });
  return { json, hash: `'sha256-${createHash('sha256').update(json).digest('base64')}'` };
}

/** The shell page with the import map written in and whether a session cookie came with the request. */
export function shellPage(template: string, map: string, cookie: boolean): string {
  return template
    .replace('<!--importmap-->', `<script type="importmap">${map}</script>`)
    .replace('data-session=""', `data-session="${cookie ? 'cookie' : 'none'}"`);
}

export const readShell = (root = UI_ROOT): string => readFileSync(join(root, 'index.html'), 'utf8');
