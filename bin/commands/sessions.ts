// tracegate sessions create | list | revoke: browser sessions (the web UI and the local workbench sign in with them).
import type { Config } from '../../config/index.ts';
import type { Command } from '../shared/args.ts';
import { type Invocation, manageArgs, withOps } from '../shared/manage.ts';
import type { Ops } from '../shared/ops.ts';

export const command: Command = {
  summary: [
    ['sessions create --workspace NAME [--json]', 'print a one-time sign-in link for a browser'],
    ['sessions list [--workspace NAME] [--json]', 'list sessions not past their absolute expiry'],
    ['sessions revoke SESSION_ID', 'sign a session out (every server sharing the storage, at once)'],
  ],
  help: `usage: tracegate sessions create --workspace NAME [--json]
       tracegate sessions list [--workspace NAME] [--json]
       tracegate sessions revoke SESSION_ID

create  prints a one-time sign-in link for the workspace: <origin>/ui/signin#token=…, good once and for
        TRACEGATE_SESSION_LINK_SECONDS; opened in a browser, it signs in (POST /api/auth/session).
        <origin> is TRACEGATE_PUBLIC_ORIGIN, else http://localhost:<the server's port>.
        --json prints {workspaceId,workspace,link,expiresAt}
list    lists sessions (id, workspace, state, when created, last seen and when it ends); tokens are never stored
revoke  revokes a session: its cookie is refused from the next request on`,
  run(args: string[], config: Config): Promise<number> {
    const a = manageArgs('sessions', args, { create: 1, list: 1, revoke: 2 });
    return withOps(config, { mayCreate: false }, (ops) =>
      a.sub === 'create' ? create(ops, a) : a.sub === 'list' ? list(ops, a) : revoke(ops, a),
    );
  },
};

async function create(ops: Ops, a: Invocation): Promise<number> {
  const l = await ops.createSignInLink(a.need(a.values.workspace, '--workspace NAME'));
  if (a.values.json) console.log(JSON.stringify(l));
  else
    console.log(
      `workspace ${l.workspace} (${l.workspaceId})\nsign-in link, good once until ${l.expiresAt}:\n${l.link}`,
    );
  return 0;
}

async function list(ops: Ops, a: Invocation): Promise<number> {
  const sessions = await ops.listSessions(a.values.workspace);
  if (a.values.json) console.log(JSON.stringify(sessions));
  else
    for (const s of sessions)
      console.log(
        `${s.id}  ${s.workspaceId}  ${s.state.padEnd(7)}  created ${s.createdAt}  last seen ${s.lastSeenAt}  ${s.revokedAt ? `revoked ${s.revokedAt}` : `ends ${s.idleExpiresAt}`}`,
      );
  return 0;
}

async function revoke(ops: Ops, a: Invocation): Promise<number> {
  const id = a.need(a.positionals[1], 'SESSION_ID');
  if (!(await ops.revokeSession(id))) {
    console.error(`no session ${id}`);
    return 1;
  }
  console.log(`revoked ${id}`);
  return 0;
}
