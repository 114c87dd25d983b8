// tracegate policy show | set: the workspace's governance policy.
import type { Config } from '../../config/index.ts';
import type { Command } from '../shared/args.ts';
import { checkFile, readDoc } from '../shared/files.ts';
import { type Invocation, manageArgs, withOps } from '../shared/manage.ts';

export const command: Command = {
  summary: [
    ['policy show --workspace NAME', 'print the policy in force (JSON)'],
    ['policy set --workspace NAME --file F', 'replace the policy (JSON; F may be - for stdin)'],
  ],
  help: `usage: tracegate policy show --workspace NAME
       tracegate policy set --workspace NAME --file policy.json

A policy: {"version":2,"modelAllow":[],"modelDeny":["gpt-3.5*"],"actions":{"api_key":"block","email":"redact"},
"defaultAction":"flag","maxPromptChars":0,"requiredEnvironments":[],"minSeverity":"low"}
Actions are keyed by finding category or rule id: flag | redact | block. Every change is audited.
show prints the policy in force as JSON (the default one when the workspace has none), which set takes back.`,
  run(args: string[], config: Config): Promise<number> {
    const a = manageArgs('policy', args, { show: 1, set: 1 });
    return a.sub === 'set' ? set(a, config) : show(a, config);
  },
};

/** A policy file is the settings part itself. */
const FILE_KEYS = new Map([['policy', null]]);

/**
 * The policy in force, as GET /api/policy has it (the default one when the workspace has none of its own). Only the
 * JSON on stdout, so it can be edited and given back to `set`.
 */
function show(a: Invocation, config: Config): Promise<number> {
  return withOps(config, { mayCreate: false }, async (ops) => {
    let { policy } = await ops.settings(a.need(a.values.workspace, '--workspace NAME'));
    if (!policy) {
      ({ DEFAULT_POLICY: policy } = await import('../../processors/governance/policy.ts'));
      console.error('(no policy of its own: the default one, flag every finding and block nothing)');
    }
    console.log(JSON.stringify(policy, null, 2));
    return 0;
  });
}

async function set(a: Invocation, config: Config): Promise<number> {
  const file = a.need(a.values.file, '--file F');
  const workspace = a.need(a.values.workspace, '--workspace NAME');
  const policy = readDoc(file) as never;
  await checkFile(file, { policy }, FILE_KEYS);
  return withOps(config, { mayCreate: false }, async (ops) => {
    const s = await ops.updateSettings(workspace, { policy });
    console.log(`policy set (settings version ${s.version})`);
    return 0;
  });
}
