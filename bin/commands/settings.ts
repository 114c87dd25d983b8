// tracegate settings show: every setting of a workspace.
import type { Config } from '../../config/index.ts';
import type { Command } from '../shared/args.ts';
import { manageArgs, withOps } from '../shared/manage.ts';

export const command: Command = {
  summary: [['settings show --workspace NAME', 'every setting (secrets shown as "(set)")']],
  help: `usage: tracegate settings show --workspace NAME`,
  run(args: string[], config: Config): Promise<number> {
    const a = manageArgs('settings', args, { show: 1 });
    return withOps(config, { mayCreate: false }, async (ops) => {
      const s = await ops.settings(a.need(a.values.workspace, '--workspace NAME'));
      console.log(JSON.stringify(s, null, 2));
      return 0;
    });
  },
};
