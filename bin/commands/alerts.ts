// tracegate alerts set: alert rules and their webhook.
import type { Config } from '../../config/index.ts';
import type { SettingsPatch } from '../../collector/workspaces/settings.ts';
import type { Command } from '../shared/args.ts';
import { checkFile, fileName, readDoc } from '../shared/files.ts';
import { manageArgs, withOps } from '../shared/manage.ts';

export const command: Command = {
  summary: [['alerts set --workspace NAME --file F', 'alert rules and optional webhook (JSON; fields left out stay)']],
  help: `usage: tracegate alerts set --workspace NAME --file alerts.json

alerts.json: {"rules":[{"id":"slow","kind":"latency","threshold":2000,"windowSeconds":300,"model":"gpt-4o"}],
"webhookUrl":"https://…","webhookSecret":"…"}  kinds: latency (p95 ms), cost (USD), error_rate (0..1),
finding (severity at or above), guardrail (tripwires), security_alert (alerts of POST /api/ingest/webhooks
at or above severity). Deliveries are signed: X-Service-Signature: v1=<hmac>.
The file is a JSON object; only the fields it gives change, the others stay as stored ("rules":[] removes
every rule).`,
  async run(args: string[], config: Config): Promise<number> {
    const a = manageArgs('alerts', args, { set: 1 });
    const file = a.need(a.values.file, '--file F');
    const workspace = a.need(a.values.workspace, '--workspace NAME');
    const patch = alertsPatch(file, readDoc(file));
    await checkFile(file, patch, FILE_KEYS);
    return withOps(config, { mayCreate: false }, async (ops) => {
      const s = await ops.updateSettings(workspace, patch);
      console.log(
        `alert rules set (settings version ${s.version}): ${(s.alertRules ?? []).length} rules` +
          `, webhook ${s.alertWebhookUrl ? `set${s.alertWebhookSecret ? ' (signed)' : ' (unsigned)'}` : 'none'}`,
      );
      return 0;
    });
  },
};

/** The alerts file's fields as settings parts. Only the fields the file gives change: the others stay as stored. */
const ALERT_FIELDS = {
  rules: 'alertRules',
  webhookUrl: 'alertWebhookUrl',
  webhookSecret: 'alertWebhookSecret',
} as const;

/** ALERT_FIELDS reversed: a settings part by the key of the file it came from. */
const FILE_KEYS = new Map(Object.entries(ALERT_FIELDS).map(([file, part]) => [part, file]));

function alertsPatch(file: string, doc: unknown): SettingsPatch {
  const name = fileName(file);
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new Error(
      `${name}: expected a JSON object {"rules":[…],"webhookUrl":"…","webhookSecret":"…"}, not ${doc === null ? 'null' : Array.isArray(doc) ? 'an array' : `a ${typeof doc}`}; nothing changed`,
    );
  }
  const patch: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(doc)) {
    if (!Object.hasOwn(ALERT_FIELDS, k))
      throw new Error(
        `${name}: unknown field "${k}" (the fields are ${Object.keys(ALERT_FIELDS).join(', ')}); nothing changed`,
      );
    patch[ALERT_FIELDS[k as keyof typeof ALERT_FIELDS]] = v;
  }
  if (!Object.keys(patch).length)
    throw new Error(`${name}: gives none of ${Object.keys(ALERT_FIELDS).join(', ')}; nothing changed`);
  return patch as SettingsPatch;
}
