// tracegate export training: the training-data export (GET /api/export/training) for a workspace, to a file or stdout.
import { createWriteStream, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Config } from '../../config/index.ts';
import { type Command, HelpRequested, maxPositionals, parseCommandArgs, UsageError } from '../shared/args.ts';
import { withOps } from '../shared/manage.ts';

/** Each option and the route's parameter it gives. */
const PARAMS = {
  format: 'format',
  from: 'from',
  to: 'to',
  'action-name': 'actionName',
  model: 'model',
  environment: 'environment',
  source: 'source',
  feedback: 'feedback',
  'eval-fraction': 'evalFraction',
  'split-seed': 'splitSeed',
  split: 'split',
} as const;

const OPTIONS = {
  allowPositionals: true,
  options: {
    workspace: { type: 'string' },
    out: { type: 'string', short: 'o' },
    curated: { type: 'boolean' },
    provenance: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
    ...Object.fromEntries(Object.keys(PARAMS).map((k) => [k, { type: 'string' }])),
  },
} as const;

export const command: Command = {
  summary: [
    [
      'export training --workspace NAME [filters] [--out FILE]',
      'write the training-data export (NDJSON) to FILE or stdout',
    ],
  ],
  help: `usage: tracegate export training --workspace NAME [--format openai_chat|openai_dpo|hf_kto]
         [--from TIME] [--to TIME] [--action-name NAME] [--model MODEL] [--environment ENV] [--source SOURCE]
         [--curated] [--feedback up|down] [--eval-fraction F [--split-seed S] [--split train|eval]] [--provenance] [--out FILE]

Writes the workspace's trainable model calls as training data, one JSON example per line, exactly as
GET /api/export/training answers (docs/routes.md): the options are its query parameters.
--out FILE   written to FILE.partial first, renamed to FILE only once the export is complete: a failure
             leaves no FILE (and exits 1). Without --out the lines go to stdout; a failure exits 1.
Through the running server when one holds DATA_DIR, else on storage directly.`,
  checkArgs(args) {
    parse(args);
  },
  async run(args: string[], config: Config): Promise<number> {
    const { workspace, params, out } = parse(args);
    const { checkedExport } = await import('../../collector/routes/export.ts');
    try {
      checkedExport(params); // a bad filter said before storage is opened
    } catch (err) {
      throw new UsageError((err as Error).message, 'export');
    }
    return withOps(config, { mayCreate: false }, async (ops) => {
      if (!out) {
        await pipeline(Readable.from(await ops.exportTraining(workspace, params)), process.stdout, { end: false });
        return 0;
      }
      const partial = join(dirname(out), `${basename(out)}.partial`);
      try {
        const lines = await ops.exportTraining(workspace, params);
        await pipeline(Readable.from(lines), createWriteStream(partial));
        renameSync(partial, out);
      } catch (err) {
        rmSync(partial, { force: true });
        throw new Error(`export failed, ${out} not written: ${(err as Error).message}`);
      }
      return 0;
    });
  },
};

function parse(args: string[]): { workspace: string; params: Record<string, string>; out: string | undefined } {
  const { values, positionals } = parseCommandArgs('export', args, OPTIONS);
  if (values.help) throw new HelpRequested();
  if (positionals[0] !== 'training')
    throw new UsageError(
      positionals[0] ? `unknown command: export ${positionals[0]}` : 'export needs a subcommand: training',
      'export',
    );
  maxPositionals('export', positionals, 1);
  const workspace = values.workspace as string | undefined;
  if (!workspace) throw new UsageError('export training needs --workspace NAME', 'export');
  const params: Record<string, string> = {};
  for (const [option, param] of Object.entries(PARAMS)) {
    const v = (values as Record<string, unknown>)[option];
    if (typeof v === 'string') params[param] = v;
  }
  if (values.curated) params.curated = 'true';
  if (values.provenance) params.provenance = 'true';
  return { workspace, params, out: values.out as string | undefined };
}
