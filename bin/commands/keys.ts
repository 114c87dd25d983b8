// tracegate keys create | list | revoke: workspace API keys.
import type { Config } from '../../config/index.ts';
import type { Command } from '../shared/args.ts';
import { type Invocation, manageArgs, withOps } from '../shared/manage.ts';
import type { Ops } from '../shared/ops.ts';

export const command: Command = {
  summary: [
    ['keys create --workspace NAME [--json]', 'create a workspace API key (shown once)'],
    ['keys list [--workspace NAME] [--json]', 'list keys (ids only; secrets are never stored)'],
    ['keys revoke KEY_ID', 'revoke a key'],
  ],
  help: `usage: tracegate keys create --workspace NAME [--json]
       tracegate keys list [--workspace NAME] [--json]
       tracegate keys revoke KEY_ID

create  creates the workspace if needed and prints a new key once; --json prints {workspaceId,keyId,key}
list    lists key ids, workspaces and revocation times
revoke  revokes a key (a running server stops accepting it at once)`,
  run(args: string[], config: Config): Promise<number> {
    const a = manageArgs('keys', args, { create: 1, list: 1, revoke: 2 });
    // Only the first key on a new machine makes its DATA_DIR.
    return withOps(config, { mayCreate: a.sub === 'create' }, (ops) =>
      a.sub === 'create' ? create(ops, a) : a.sub === 'list' ? list(ops, a) : revoke(ops, a),
    );
  },
};

async function create(ops: Ops, a: Invocation): Promise<number> {
  const c = await ops.createKey(a.need(a.values.workspace, '--workspace NAME'));
  if (a.values.json) console.log(JSON.stringify({ workspaceId: c.workspaceId, keyId: c.keyId, key: c.key }));
  else
    console.log(
      `workspace ${c.workspace} (${c.workspaceId})\nkey id    ${c.keyId}\nkey       ${c.key}\n\nStore the key now: it is not shown again.`,
    );
  return 0;
}

async function list(ops: Ops, a: Invocation): Promise<number> {
  const keys = await ops.listKeys(a.values.workspace);
  if (a.values.json) console.log(JSON.stringify(keys));
  else
    for (const k of keys)
      console.log(
        `${k.keyId}  ${k.workspaceId}  created ${new Date(k.createdAtMs).toISOString()}  ${k.revokedAtMs ? `revoked ${new Date(k.revokedAtMs).toISOString()}` : 'active'}`,
      );
  return 0;
}

async function revoke(ops: Ops, a: Invocation): Promise<number> {
  const id = a.need(a.positionals[1], 'KEY_ID');
  if (!(await ops.revokeKey(id))) {
    console.error(`no key ${id}`);
    return 1;
  }
  console.log(`revoked ${id}`);
  return 0;
}
