// What every command module gives the entry point (bin/tracegate.ts), and the argument checks they share.
// Light on purpose: the entry point loads it for `--help` too.
import { parseArgs } from 'node:util';
import type { Config } from '../../config/index.ts';

/** A command group: `tracegate <name> …`, listed in bin/commands/index.ts. */
export interface Command {
  /** Its lines in `tracegate --help`: [synopsis, what it does]. */
  readonly summary: ReadonlyArray<readonly [string, string]>;
  /** `tracegate <name> --help`. */
  readonly help: string;
  /** Checks made before the configuration is loaded, so that a usage error is reported first. */
  checkArgs?(args: string[]): void;
  /** The exit code, or -1 to keep the process running (serve). */
  run(args: string[], config: Config): Promise<number>;
}

/**
 * A usage error: a short message, then a pointer to the command's --help; exits 2. `cmd` names the help to point
 * to (the main one when omitted).
 */
export class UsageError extends Error {
  readonly cmd: string | undefined;
  constructor(message: string, cmd?: string) {
    super(message);
    this.cmd = cmd;
  }
}

/** Asks for the command's help where the entry point could not see it (`-hh`): prints it and exits 0. */
export class HelpRequested extends Error {}

type ArgsConfig = Omit<Parameters<typeof parseArgs>[0] & object, 'args'>;

/** parseArgs, its complaints (unknown option, missing value, stray argument) turned into usage errors. */
export function parseCommandArgs<T extends ArgsConfig>(cmd: string, args: string[], config: T) {
  try {
    return parseArgs({ ...config, args });
  } catch (err) {
    const e = err as { code?: unknown; message: string };
    if (typeof e.code !== 'string' || !e.code.startsWith('ERR_PARSE_ARGS_')) throw err;
    const option = /Option '(-[^' ]+)/.exec(e.message)?.[1] ?? /option '(-[^']+)'/i.exec(e.message)?.[1];
    let message = e.message.split(/\.(?:\s|$)|\n/)[0]!;
    if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) message = `unknown option ${option}`;
    else if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option && /missing|ambiguous/.test(e.message))
      message = `${option} needs a value`;
    else if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option && /does not take/.test(e.message))
      message = `${option} takes no value`;
    throw new UsageError(message, cmd);
  }
}

/** The number of positional arguments a command takes (the subcommand included): more is a usage error. */
export function maxPositionals(cmd: string, positionals: string[], max: number): void {
  if (positionals.length > max) throw new UsageError(`unexpected argument ${positionals[max]}`, cmd);
}
