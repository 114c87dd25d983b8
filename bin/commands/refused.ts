// tracegate refused list | requeue: the records storage refused on their own (DATA_DIR/refused).
import { mkdirSync } from 'node:fs';
import type { Config } from '../../config/index.ts';
import { type Command, maxPositionals, parseCommandArgs, UsageError } from '../shared/args.ts';

export const command: Command = {
  summary: [['refused list | requeue [FILE...]', 'records storage refused (DATA_DIR/refused); requeue for replay']],
  help: `usage: tracegate refused list [--json]
       tracegate refused requeue [FILE...]

list     the files in DATA_DIR/refused: records storage refused on their own, set aside so they would not hold
         up the rest (see README, Durability)
requeue  moves their records (all files, or the named ones) back into the spool; the next 'tracegate serve'
         replays them. Run it with the collector stopped, after fixing what storage refused them for.`,
  run(args: string[], config: Config): Promise<number> {
    const { values, positionals } = parseCommandArgs('refused', args, {
      allowPositionals: true,
      options: { json: { type: 'boolean' } },
    });
    const [sub, ...files] = positionals;
    if (!sub) throw new UsageError('refused needs a subcommand: list | requeue', 'refused');
    if (sub !== 'list' && sub !== 'requeue') throw new UsageError(`unknown command: refused ${sub}`, 'refused');
    if (sub === 'list') {
      maxPositionals('refused', positionals, 1);
      return list(config, values.json);
    }
    return requeue(config, files);
  },
};

async function list(config: Config, json: boolean | undefined): Promise<number> {
  const { listRefused } = await import('../../pipeline/refused.ts');
  const refused = await listRefused(config.DATA_DIR);
  if (json) console.log(JSON.stringify(refused));
  else if (!refused.length) console.log('no refused records');
  else for (const f of refused) console.log(`${f.name}  ${f.records} records  first error: ${f.firstError}`);
  return 0;
}

/** Holds DATA_DIR's lock while it writes to the spool, as a server would: refused while one runs. */
async function requeue(config: Config, files: string[]): Promise<number> {
  const { requeueRefused } = await import('../../pipeline/refused.ts');
  const { DataDirInUse, lockDataDir } = await import('../../platform/data-dir-lock.ts');
  let unlock: () => void;
  try {
    mkdirSync(config.DATA_DIR, { recursive: true });
    unlock = await lockDataDir(config.DATA_DIR);
  } catch (err) {
    if (err instanceof DataDirInUse) {
      console.error(`${err.message}\nStop the collector first: requeue writes to its spool.`);
      return 1;
    }
    throw err;
  }
  try {
    const r = await requeueRefused(config.DATA_DIR, files);
    console.log(`requeued ${r.records} records from ${r.files} files; the next 'tracegate serve' replays them`);
    return 0;
  } finally {
    unlock();
  }
}
