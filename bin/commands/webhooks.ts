// tracegate webhooks secret add | list | revoke: the signing secrets POST /api/ingest/webhooks verifies deliveries with.
import type { Config } from '../../config/index.ts';
import { type Command, UsageError } from '../shared/args.ts';
import { type Invocation, manageArgs, withOps } from '../shared/manage.ts';
import type { Ops } from '../shared/ops.ts';

const SUBS = ['add', 'list', 'revoke'] as const;

export const command: Command = {
  summary: [
    ['webhooks secret add --workspace NAME [--json]', 'a webhook signing secret for the workspace (shown once)'],
    ['webhooks secret list [--workspace NAME] [--json]', 'list signing secrets (ids and times only)'],
    ['webhooks secret revoke SECRET_ID', 'revoke a signing secret'],
  ],
  help: `usage: tracegate webhooks secret add --workspace NAME [--json]
       tracegate webhooks secret list [--workspace NAME] [--json]
       tracegate webhooks secret revoke SECRET_ID

add     makes a signing secret for an existing workspace and prints it once; --json prints {secretId,secret}.
        Senders sign each delivery: X-Service-Delivery-Timestamp: <unix seconds> and
        X-Service-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<raw body>" with the secret as the key>.
        Several secrets may be active at once: add a new one, move the senders to it, revoke the old one.
list    lists secret ids, workspaces, creation and revocation times (the secrets are stored encrypted and never shown again)
revoke  revokes a secret (a running server stops accepting it at once; other collectors sharing its storage within
        seconds)

The secrets are encrypted with TRACEGATE_SECRETS_KEY, or DATA_DIR/keys/secrets.key (made on first use):
collectors sharing storage must share TRACEGATE_SECRETS_KEY.`,
  run(args: string[], config: Config): Promise<number> {
    const a = manageArgs('webhooks', args, { secret: 3 });
    const sub = a.positionals[1];
    if (!sub) throw new UsageError(`webhooks secret needs a subcommand: ${SUBS.join(' | ')}`, 'webhooks');
    if (!(SUBS as readonly string[]).includes(sub))
      throw new UsageError(`unknown command: webhooks secret ${sub}`, 'webhooks');
    if (sub !== 'revoke' && a.positionals.length > 2)
      throw new UsageError(`unexpected argument ${a.positionals[2]}`, 'webhooks');
    return withOps(config, { mayCreate: false }, (ops) =>
      sub === 'add' ? add(ops, a) : sub === 'list' ? list(ops, a) : revoke(ops, a),
    );
  },
};

async function add(ops: Ops, a: Invocation): Promise<number> {
  const s = await ops.addWebhookSecret(a.need(a.values.workspace, '--workspace NAME'));
  if (a.values.json) console.log(JSON.stringify({ secretId: s.secretId, secret: s.secret }));
  else
    console.log(
      `workspace  ${s.workspaceId}\nsecret id  ${s.secretId}\nsecret     ${s.secret}\n\nStore the secret now: it is not shown again.`,
    );
  return 0;
}

async function list(ops: Ops, a: Invocation): Promise<number> {
  const secrets = await ops.listWebhookSecrets(a.values.workspace);
  if (a.values.json) console.log(JSON.stringify(secrets));
  else
    for (const s of secrets)
      console.log(
        `${s.secretId}  ${s.workspaceId}  created ${new Date(s.createdAtMs).toISOString()}  ${s.revokedAtMs ? `revoked ${new Date(s.revokedAtMs).toISOString()}` : 'active'}`,
      );
  return 0;
}

async function revoke(ops: Ops, a: Invocation): Promise<number> {
  const id = a.need(a.positionals[2], 'SECRET_ID');
  if ((await ops.revokeWebhookSecret(id)) === null) {
    console.error(`no webhook secret ${id}`);
    return 1;
  }
  console.log(`revoked ${id}`);
  const all = await ops.listWebhookSecrets();
  const ws = all.find((s) => s.secretId === id)?.workspaceId;
  if (ws && !all.some((s) => s.workspaceId === ws && s.revokedAtMs === 0))
    console.error(
      `note: workspace ${ws} has no active webhook secret now: signed deliveries are accepted as unverified until one is added`,
    );
  return 0;
}
