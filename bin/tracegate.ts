#!/usr/bin/env node
// tracegate CLI: serve, and key management (`keys create|list|revoke`).
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, ConfigError, type Config } from '../config/index.ts';
import { createStorage } from '../storage/index.ts';
import { createKey, listKeys } from '../collector/admin.ts';
import { startServer } from '../collector/server.ts';

const HELP: Record<string, string> = {
  main: `usage: tracegate <command> [options]

commands:
  serve                                 start the collector (configuration from TRACEGATE_* variables)
  keys create --workspace NAME [--json] create a workspace API key (shown once)
  keys list [--workspace NAME] [--json] list keys (ids only; secrets are never stored)
  keys revoke KEY_ID                    revoke a key

Run 'tracegate <command> --help' for details.`,
  serve: `usage: tracegate serve\n\nStarts the HTTP server on TRACEGATE_PORT (default 4318). Stops gracefully on SIGTERM/SIGINT, flushing the spool.`,
  keys: `usage: tracegate keys create --workspace NAME [--json]
       tracegate keys list [--workspace NAME] [--json]
       tracegate keys revoke KEY_ID

create  creates the workspace if needed and prints a new key once; --json prints {workspaceId,keyId,key}
list    lists key ids, workspaces and revocation times
revoke  revokes a key (a running server stops accepting it within 30 s, at once when revoked through it)`,
};

interface ServerFile { pid: number; port: number; adminToken: string }

/** When a server is running on this data dir, manage keys through its loopback admin routes (it holds the DB). */
function runningServer(config: Config): ServerFile | null {
  try {
    const s = JSON.parse(readFileSync(join(config.DATA_DIR, 'server.json'), 'utf8')) as ServerFile;
    process.kill(s.pid, 0);
    return s;
  } catch {
    return null;
  }
}

async function viaServer(s: ServerFile, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`http://127.0.0.1:${s.port}${path}`, {
    method, headers: { authorization: `Bearer ${s.adminToken}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as { error?: { message: string } };
  if (!res.ok) throw new Error(json.error?.message ?? `server answered ${res.status}`);
  return json;
}

async function keys(args: string[], config: Config): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { workspace: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } });
  const sub = positionals[0];
  if (values.help || !sub) { console.log(HELP.keys); return values.help ? 0 : 2; }
  const server = runningServer(config);
  const storage = server ? null : createStorage(config);
  await storage?.init();
  try {
    if (sub === 'create') {
      if (!values.workspace) { console.error('keys create needs --workspace NAME'); return 2; }
      const created = server
        ? (await viaServer(server, 'POST', '/admin/keys', { workspace: values.workspace })) as Awaited<ReturnType<typeof createKey>>
        : await createKey(storage!, values.workspace);
      if (values.json) console.log(JSON.stringify({ workspaceId: created.workspaceId, keyId: created.keyId, key: created.key }));
      else console.log(`workspace ${created.workspace} (${created.workspaceId})\nkey id    ${created.keyId}\nkey       ${created.key}\n\nStore the key now: it is not shown again.`);
      return 0;
    }
    if (sub === 'list') {
      const list = server
        ? ((await viaServer(server, 'GET', `/admin/keys${values.workspace ? `?workspace=${encodeURIComponent(values.workspace)}` : ''}`)) as { keys: Awaited<ReturnType<typeof listKeys>> }).keys
        : await listKeys(storage!, values.workspace);
      if (values.json) console.log(JSON.stringify(list));
      else for (const k of list) console.log(`${k.keyId}  ${k.workspaceId}  created ${new Date(k.createdAtMs).toISOString()}  ${k.revokedAtMs ? `revoked ${new Date(k.revokedAtMs).toISOString()}` : 'active'}`);
      return 0;
    }
    if (sub === 'revoke') {
      const id = positionals[1];
      if (!id) { console.error('keys revoke needs KEY_ID'); return 2; }
      if (server) await viaServer(server, 'POST', `/admin/keys/${encodeURIComponent(id)}/revoke`);
      else if (!(await storage!.revokeApiKey(id, Date.now()))) { console.error(`no key ${id}`); return 1; }
      console.log(`revoked ${id}`);
      return 0;
    }
    console.error(`unknown keys command: ${sub}\n\n${HELP.keys}`);
    return 2;
  } finally {
    await storage?.close();
  }
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') { console.log(HELP.main); return cmd ? 0 : 2; }
  if (rest.includes('--help') || rest.includes('-h')) {
    if (HELP[cmd]) { console.log(HELP[cmd]); return 0; }
  }
  const config = loadConfig();
  if (cmd === 'serve') {
    const running = await startServer(config);
    const stop = (sig: string) => { running.log.info({ signal: sig }, 'signal received'); running.close().then(() => process.exit(0), () => process.exit(1)); };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
    return -1; // keep running
  }
  if (cmd === 'keys') return keys(rest, config);
  console.error(`unknown command: ${cmd}\n\n${HELP.main}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => { if (code >= 0) process.exit(code); },
  (err) => {
    console.error(err instanceof ConfigError ? err.message : `tracegate: ${(err as Error).stack ?? err}`);
    process.exit(1);
  },
);
