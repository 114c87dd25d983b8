#!/usr/bin/env node
// tracegate CLI: arguments, usage, dispatch to a command group (bin/commands/) and exit codes.
// A command's module, and what it needs (the collector, storage drivers, ops), is loaded only when it runs: `--help`
// and the management commands then start without loading (and type-stripping) the whole server.
import { loadConfig, ConfigError } from '../config/index.ts';
import { COMMANDS } from './commands/index.ts';
import { HelpRequested, UsageError } from './shared/args.ts';

/** `tracegate --help`: every command group's summary lines. */
async function mainHelp(): Promise<string> {
  const commands = await Promise.all(Object.values(COMMANDS).map(async (load) => (await load()).command));
  const lines = commands.flatMap((c) => c.summary.map(([synopsis, what]) => `  ${synopsis.padEnd(42)} ${what}`));
  return `usage: tracegate <command> [options]

commands:
${lines.join('\n')}

Run 'tracegate <command> --help' for details.`;
}

async function main(argv: string[]): Promise<number> {
  process.umask(0o077); // what the CLI writes in DATA_DIR (the embedded store, refused files) is owner-only, as the server's
  try {
    return await run(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`tracegate: ${err.message}\nRun 'tracegate ${err.cmd ? `${err.cmd} ` : ''}--help' for usage.`);
    return 2;
  }
}

async function run(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name) {
    console.error(await mainHelp());
    return 2;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    console.log(await mainHelp());
    return 0;
  }
  if (!Object.hasOwn(COMMANDS, name)) throw new UsageError(`unknown command: ${name}`);
  const { command } = await COMMANDS[name]!();
  if (args.includes('--help') || args.includes('-h')) {
    console.log(command.help);
    return 0;
  }
  command.checkArgs?.(args);
  const config = loadConfig();
  try {
    return await command.run(args, config);
  } catch (err) {
    if (!(err instanceof HelpRequested)) throw err;
    console.log(command.help);
    return 0;
  }
}

/** process.exit drops what a pipe has not taken yet (the end of a long `verify` report): exit once stdout and stderr are written. */
function exitWhenWritten(code: number): void {
  let pending = 2;
  const done = () => {
    if (--pending === 0) process.exit(code);
  };
  process.stdout.write('', done);
  process.stderr.write('', done);
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) exitWhenWritten(code);
  },
  (err) => {
    console.error(err instanceof ConfigError ? err.message : `tracegate: ${(err as Error).message ?? err}`);
    exitWhenWritten(1);
  },
);
