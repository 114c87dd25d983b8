// What the management commands (keys, policy, provider, alerts, settings, verify) share: their options, the checks
// of their subcommands, and the storage they work on, opened only once their arguments have passed.
import type { Config } from '../../config/index.ts';
import { HelpRequested, maxPositionals, parseCommandArgs, UsageError } from './args.ts';
import type { Ops } from './ops.ts';

/** One option set for every management command: an option another one takes is accepted and ignored. */
const OPTIONS = {
  allowPositionals: true,
  allowNegative: true,
  options: {
    workspace: { type: 'string' },
    json: { type: 'boolean' },
    file: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
    'base-url': { type: 'string' },
    'api-key-env': { type: 'string' },
    'allow-caller-key': { type: 'boolean' },
    'default-base-url': { type: 'boolean' },
    'clear-api-key': { type: 'boolean' },
  },
} as const;

export type ManageValues = ReturnType<typeof parseManage>['values'];

function parseManage(cmd: string, args: string[]) {
  return parseCommandArgs(cmd, args, OPTIONS);
}

export interface Invocation {
  values: ManageValues;
  positionals: string[];
  /** The subcommand ('' for a command without subcommands). */
  sub: string;
  /** `v`, or a usage error saying the command needs `what`. */
  need(v: string | undefined, what: string): string;
}

/**
 * A management command's arguments, checked: `subs` gives each subcommand's most positional arguments (the
 * subcommand included); a command without subcommands (verify) takes none.
 */
export function manageArgs(cmd: string, args: string[], subs?: Record<string, number>): Invocation {
  const { values, positionals } = parseManage(cmd, args);
  if (values.help) throw new HelpRequested();
  const sub = positionals[0];
  if (!subs) maxPositionals(cmd, positionals, 0);
  else if (!sub) throw new UsageError(`${cmd} needs a subcommand: ${Object.keys(subs).join(' | ')}`, cmd);
  else if (!Object.hasOwn(subs, sub)) throw new UsageError(`unknown command: ${cmd} ${sub}`, cmd);
  else maxPositionals(cmd, positionals, subs[sub]!);
  return {
    values,
    positionals,
    sub: sub ?? '',
    need(v, what) {
      if (!v) throw new UsageError(`${cmd} ${sub ?? ''} needs ${what}`, cmd);
      return v;
    },
  };
}

/**
 * `act` on the storage the CLI works on (a running server's, or opened directly: see ./ops.ts), closed after. Only
 * `mayCreate` makes a DATA_DIR that does not exist.
 */
export async function withOps(
  config: Config,
  opts: { mayCreate: boolean },
  act: (ops: Ops) => Promise<number>,
): Promise<number> {
  const { openOps } = await import('./ops.ts'); // the storage drivers and the collector's admin code: loaded last
  const ops = await openOps(config, opts);
  try {
    return await act(ops);
  } finally {
    await ops.close();
  }
}
