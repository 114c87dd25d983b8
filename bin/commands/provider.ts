// tracegate provider set: the proxy's upstream for a workspace.
import type { Config } from '../../config/index.ts';
import type { SettingsPatch } from '../../collector/workspaces/settings.ts';
import { type Command, UsageError } from '../shared/args.ts';
import { type ManageValues, manageArgs, withOps } from '../shared/manage.ts';

export const command: Command = {
  summary: [['provider set --workspace NAME [...]', 'proxy upstream for the workspace']],
  help: `usage: tracegate provider set --workspace NAME [--base-url URL | --default-base-url]
                              [--api-key-env VAR | --clear-api-key] [--allow-caller-key | --no-allow-caller-key]

Sets the proxy upstream for the workspace (default: TRACEGATE_PROVIDER_BASE_URL / TRACEGATE_PROVIDER_API_KEY).
Only the options given change; --default-base-url and --clear-api-key go back to the server's defaults.
The provider key is read from the environment variable named by --api-key-env, never from the command line,
and is never printed.`,
  run(args: string[], config: Config): Promise<number> {
    const a = manageArgs('provider', args, { set: 1 });
    const workspace = a.need(a.values.workspace, '--workspace NAME');
    const provider = providerPatch(a.values);
    return withOps(config, { mayCreate: false }, async (ops) => {
      const s = await ops.updateSettings(workspace, { provider });
      console.log(`provider set (settings version ${s.version}): ${JSON.stringify(s.provider)}`);
      return 0;
    });
  },
};

/** provider set's options as a settings part: only what is given changes (the stored key stays unless replaced or cleared). */
function providerPatch(values: ManageValues): NonNullable<SettingsPatch['provider']> {
  if (values['base-url'] && values['default-base-url'])
    throw new UsageError('--base-url and --default-base-url exclude each other', 'provider');
  if (values['api-key-env'] && values['clear-api-key'])
    throw new UsageError('--api-key-env and --clear-api-key exclude each other', 'provider');
  const provider: NonNullable<SettingsPatch['provider']> = {};
  if (values['base-url']) provider.baseUrl = values['base-url'];
  if (values['default-base-url']) provider.baseUrl = null;
  if (values['allow-caller-key'] !== undefined) provider.allowCallerKey = values['allow-caller-key'];
  if (values['clear-api-key']) provider.apiKey = null;
  if (values['api-key-env']) {
    const v = process.env[values['api-key-env']];
    if (!v) throw new UsageError(`environment variable ${values['api-key-env']} is empty`, 'provider');
    provider.apiKey = v;
  }
  if (Object.keys(provider).length === 0) throw new UsageError('provider set needs at least one change', 'provider');
  return provider;
}
