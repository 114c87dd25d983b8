// The layers, bottom first, declared once: a module may import from its own layer's folder and from lower layers,
// never from a higher one nor from a sibling on the same rank. `import type` counts: a type is a dependency too.
import { expect } from 'chai';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

const LAYERS: ReadonlyArray<readonly string[]> = [
  ['core'], // the span record, enrichment records, limits, errors, ports: imports nothing of the project
  ['config'], // TRACEGATE_* settings
  ['platform'], // logging, worker threads, JSON guards, state files: no domain knowledge
  ['spool'], // the write-ahead spool: segments of framed records
  ['storage'], // ClickHouse and DuckDB behind the ports
  ['processors'], // enrichment: cost, governance, audit, alerts, verification
  ['pipeline', 'protocols'], // records → processors → spool → storage; wire protocols (OTLP)
  ['mappers'], // payloads → span records (pure)
  ['training'], // span records → training-data lines, and the export's scan over storage
  ['collector/workspaces'], // workspaces, API keys and settings as the server caches them
  ['collector/http', 'collector/local-model'], // bodies, rate limits, errors, OpenAPI; the local model server's client
  ['collector/auth'], // who is calling: one strategy per credential, and the audit of refusals
  ['collector/host'], // the receiver host: declarations and route modules compiled into the app's routes
  ['collector/receivers', 'collector/routes', 'collector/proxy', 'collector/ui'], // ingest sources, read routes, the proxy, the web UI's files
  ['collector'], // the app and the server
  ['bin'], // the command line
];

const root = join(import.meta.dirname, '..', '..', '..');

/** The layer of a repository path: the longest declared folder containing it. */
function layerOf(path: string): { rank: number; folder: string } | null {
  let best: { rank: number; folder: string } | null = null;
  LAYERS.forEach((folders, rank) => {
    for (const folder of folders) {
      if ((path === folder || path.startsWith(`${folder}/`)) && (!best || folder.length > best.folder.length)) {
        best = { rank, folder };
      }
    }
  });
  return best;
}

function sources(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return sources(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'(\.[^']+)'|import\('(\.[^']+)'\)|new URL\('(\.[^']+\.ts)'/g;

function violations(): string[] {
  const found: string[] = [];
  const folders = [...new Set(LAYERS.flat().map((f) => f.split('/')[0]!))];
  for (const file of folders.flatMap(sources)) {
    const from = layerOf(file)!;
    for (const m of readFileSync(join(root, file), 'utf8').matchAll(IMPORT)) {
      const target = normalize(join(dirname(file), (m[1] ?? m[2] ?? m[3])!));
      const to = layerOf(target);
      if (!to) {
        found.push(`${file} imports ${target}, which is in no layer`);
      } else if (to.rank > from.rank || (to.rank === from.rank && to.folder !== from.folder)) {
        found.push(`${file} (${from.folder}) imports ${relative('.', target)} (${to.folder})`);
      }
    }
  }
  return found;
}

describe('architecture: layers', () => {
  it('no module imports from a higher layer or a sibling on its rank', () => {
    expect(violations()).to.deep.equal([]);
  });

  it("the browser code (ui/) imports only ui/ modules and the vendor modules of the page's import map", async () => {
    const { IMPORTS } = await import('../../../collector/ui/files.ts');
    const browser = (dir: string): string[] =>
      readdirSync(join(root, dir)).flatMap((name) => {
        const path = join(dir, name);
        if (statSync(join(root, path)).isDirectory()) return browser(path);
        return path.endsWith('.js') ? [path] : [];
      });
    const found: string[] = [];
    for (const file of browser('ui')) {
      for (const m of readFileSync(join(root, file), 'utf8').matchAll(
        /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'([^']+)'|import\s+'([^']+)'/g,
      )) {
        const spec = (m[1] ?? m[2])!;
        const inside = spec.startsWith('.') && normalize(join(dirname(file), spec)).startsWith('ui/');
        if (!inside && !Object.hasOwn(IMPORTS, spec)) found.push(`${file} imports ${spec}`);
      }
    }
    expect(found).to.deep.equal([]);
  });

  it('every source folder is in a layer', () => {
    const top = readdirSync(root).filter((n) => statSync(join(root, n)).isDirectory() && sources(n).length > 0);
    const declared = new Set(LAYERS.flat().map((f) => f.split('/')[0]));
    const outside = ['test', 'bench', 'types', 'node_modules', 'scripts', 'packages', 'docs', 'ui'];
    expect(top.filter((n) => !declared.has(n) && !outside.includes(n) && !n.startsWith('.'))).to.deep.equal([]);
  });
});
