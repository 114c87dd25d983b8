#!/usr/bin/env node
// tracegate CLI: serve; keys; policy, provider and alert settings; verify.
// The collector, storage drivers and ops are imported when a command needs them: `--help` and the management
// commands then start without loading (and type-stripping) the whole server.
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { accessSync, constants, mkdirSync, readFileSync } from 'node:fs';
import { loadConfig, ConfigError, type Config } from '../config/index.ts';
import { compileCacheDir, fillCompileCache } from './compile-cache.ts';
import type { VerifyResult } from './ops.ts';
import type { SettingsPatch } from '../collector/workspaces/settings.ts';

const HELP: Record<string, string> = {
  main: `usage: tracegate <command> [options]

commands:
  serve                                      start the collector (configuration from TRACEGATE_* variables)
  keys create --workspace NAME [--json]      create a workspace API key (shown once)
  keys list [--workspace NAME] [--json]      list keys (ids only; secrets are never stored)
  keys revoke KEY_ID                         revoke a key
  policy show --workspace NAME               print the policy in force (JSON)
  policy set --workspace NAME --file F       replace the policy (JSON; F may be - for stdin)
  provider set --workspace NAME [...]        proxy upstream for the workspace
  alerts set --workspace NAME --file F       alert rules and optional webhook (JSON; fields left out stay)
  settings show --workspace NAME             every setting (secrets shown as "(set)")
  verify [--workspace NAME] [--json]         re-check stored data against verification records
  refused list | requeue [FILE...]           records storage refused (DATA_DIR/refused); requeue for replay

Run 'tracegate <command> --help' for details.`,
  serve: `usage: tracegate serve\n\nStarts the HTTP server on TRACEGATE_PORT (default 4318). Stops gracefully on SIGTERM/SIGINT, flushing the spool.`,
  keys: `usage: tracegate keys create --workspace NAME [--json]
       tracegate keys list [--workspace NAME] [--json]
       tracegate keys revoke KEY_ID

create  creates the workspace if needed and prints a new key once; --json prints {workspaceId,keyId,key}
list    lists key ids, workspaces and revocation times
revoke  revokes a key (a running server stops accepting it at once)`,
  policy: `usage: tracegate policy show --workspace NAME
       tracegate policy set --workspace NAME --file policy.json

A policy: {"version":2,"modelAllow":[],"modelDeny":["gpt-3.5*"],"actions":{"api_key":"block","email":"redact"},
"defaultAction":"flag","maxPromptChars":0,"requiredEnvironments":[],"minSeverity":"low"}
Actions are keyed by finding category or rule id: flag | redact | block. Every change is audited.
show prints the policy in force as JSON (the default one when the workspace has none), which set takes back.`,
  provider: `usage: tracegate provider set --workspace NAME [--base-url URL | --default-base-url]
                              [--api-key-env VAR | --clear-api-key] [--allow-caller-key | --no-allow-caller-key]

Sets the proxy upstream for the workspace (default: TRACEGATE_PROVIDER_BASE_URL / TRACEGATE_PROVIDER_API_KEY).
Only the options given change; --default-base-url and --clear-api-key go back to the server's defaults.
The provider key is read from the environment variable named by --api-key-env, never from the command line,
and is never printed.`,
  alerts: `usage: tracegate alerts set --workspace NAME --file alerts.json

alerts.json: {"rules":[{"id":"slow","kind":"latency","threshold":2000,"windowSeconds":300,"model":"gpt-4o"}],
"webhookUrl":"https://…","webhookSecret":"…"}  kinds: latency (p95 ms), cost (USD), error_rate (0..1),
finding (severity at or above), guardrail (tripwires). Deliveries are signed: X-Service-Signature: v1=<hmac>.
The file is a JSON object; only the fields it gives change, the others stay as stored ("rules":[] removes
every rule).`,
  settings: `usage: tracegate settings show --workspace NAME`,
  verify: `usage: tracegate verify [--workspace NAME] [--json]

Re-checks every verification record of the workspace (or of every workspace): the content hash of the stored
spans, the continuity of the hash chain, the Ed25519 signatures of its checkpoints, and the audit log chain.
Exits 1 and names each failure when anything does not match.`,
};

HELP.refused = `usage: tracegate refused list [--json]
       tracegate refused requeue [FILE...]

list     the files in DATA_DIR/refused: records storage refused on their own, set aside so they would not hold
         up the rest (see README, Durability)
requeue  moves their records (all files, or the named ones) back into the spool; the next 'tracegate serve'
         replays them. Run it with the collector stopped, after fixing what storage refused them for.`;

/**
 * A usage error: a short message, then a pointer to the command's --help; exits 2. `cmd` names the help to point
 * to (the main one when omitted).
 */
class UsageError extends Error {
  readonly cmd: string | undefined;
  constructor(message: string, cmd?: string) {
    super(message);
    this.cmd = cmd;
  }
}

type ArgsConfig = Omit<Parameters<typeof parseArgs>[0] & object, 'args'>;

/** parseArgs, its complaints (unknown option, missing value, stray argument) turned into usage errors. */
function parseCommandArgs<T extends ArgsConfig>(cmd: string, args: string[], config: T) {
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
function maxPositionals(cmd: string, positionals: string[], max: number): void {
  if (positionals.length > max) throw new UsageError(`unexpected argument ${positionals[max]}`, cmd);
}

const readDoc = (file: string): unknown => {
  const text = readFileSync(file === '-' ? 0 : file, 'utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`${file === '-' ? 'stdin' : file}: not valid JSON (${(err as Error).message})`);
  }
};

function printVerify(name: string, r: VerifyResult): void {
  console.log(
    `${r.ok ? 'OK  ' : 'FAIL'} ${name}: ${r.recordsChecked} records over ${r.tracesChecked} traces, ${r.checkpointsChecked} signed checkpoints` +
      `${r.superseded ? `, ${r.superseded} superseded by later deliveries` : ''}${r.unsignedTail ? `, ${r.unsignedTail} awaiting their checkpoint` : ''}`,
  );
  for (const p of r.problems)
    console.log(
      `  ${p.kind}:${p.chainId ? ` chain ${p.chainId} seq ${p.seq}` : ''}${p.traceId ? ` trace ${p.traceId}` : ''}: ${p.message}`,
    );
  for (const p of r.audit)
    console.log(`  audit ${p.kind}:${p.chainId ? ` chain ${p.chainId} seq ${p.seq}` : ''} ${p.message}`);
  if (r.problemsOmitted)
    console.log(
      `  … and ${r.problemsOmitted} more problems (the first ${r.problems.length + r.audit.length} are listed)`,
    );
}

async function manage(cmd: string, args: string[], config: Config): Promise<number> {
  const { values, positionals } = parseCommandArgs(cmd, args, {
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
  });
  const sub = positionals[0];
  if (values.help) {
    console.log(HELP[cmd]);
    return 0;
  }
  const subs: Record<string, string[]> = {
    keys: ['create', 'list', 'revoke'],
    policy: ['show', 'set'],
    provider: ['set'],
    alerts: ['set'],
    settings: ['show'],
  };
  if (cmd === 'verify') maxPositionals(cmd, positionals, 0);
  else if (!sub) throw new UsageError(`${cmd} needs a subcommand: ${subs[cmd]!.join(' | ')}`, cmd);
  else if (!subs[cmd]!.includes(sub)) throw new UsageError(`unknown command: ${cmd} ${sub}`, cmd);
  else maxPositionals(cmd, positionals, cmd === 'keys' && sub === 'revoke' ? 2 : 1);
  const need = (v: string | undefined, what: string) => {
    if (!v) throw new UsageError(`${cmd} ${sub ?? ''} needs ${what}`, cmd);
    return v;
  };
  // What the command reads from a file or stdin is read and checked before storage is opened.
  const needsFile = (cmd === 'policy' || cmd === 'alerts') && sub === 'set';
  const file = needsFile ? need(values.file, '--file F') : undefined;
  if (needsFile || (cmd === 'provider' && sub === 'set')) need(values.workspace, '--workspace NAME');
  const doc = file === undefined ? undefined : readDoc(file);
  const alerts = cmd === 'alerts' ? alertsPatch(file!, doc) : undefined;
  if (needsFile) await checkFile(file!, cmd === 'alerts' ? alerts! : { policy: doc as never });
  const provider = cmd === 'provider' ? providerPatch(values) : undefined;
  const { openOps } = await import('./ops.ts');
  const ops = await openOps(config, { mayCreate: cmd === 'keys' && sub === 'create' });
  try {
    if (cmd === 'keys' && sub === 'create') {
      const c = await ops.createKey(need(values.workspace, '--workspace NAME'));
      if (values.json) console.log(JSON.stringify({ workspaceId: c.workspaceId, keyId: c.keyId, key: c.key }));
      else
        console.log(
          `workspace ${c.workspace} (${c.workspaceId})\nkey id    ${c.keyId}\nkey       ${c.key}\n\nStore the key now: it is not shown again.`,
        );
      return 0;
    }
    if (cmd === 'keys' && sub === 'list') {
      const list = await ops.listKeys(values.workspace);
      if (values.json) console.log(JSON.stringify(list));
      else
        for (const k of list)
          console.log(
            `${k.keyId}  ${k.workspaceId}  created ${new Date(k.createdAtMs).toISOString()}  ${k.revokedAtMs ? `revoked ${new Date(k.revokedAtMs).toISOString()}` : 'active'}`,
          );
      return 0;
    }
    if (cmd === 'keys' && sub === 'revoke') {
      const id = need(positionals[1], 'KEY_ID');
      if (!(await ops.revokeKey(id))) {
        console.error(`no key ${id}`);
        return 1;
      }
      console.log(`revoked ${id}`);
      return 0;
    }
    if ((cmd === 'policy' || cmd === 'settings') && sub === 'show') {
      const s = await ops.settings(need(values.workspace, '--workspace NAME'));
      if (cmd === 'settings') {
        console.log(JSON.stringify(s, null, 2));
        return 0;
      }
      // The policy in force, as GET /api/policy has it: the default one when the workspace has none of its own.
      // Only the JSON on stdout, so it can be edited and given back to `policy set`.
      let policy = s.policy;
      if (!policy) {
        ({ DEFAULT_POLICY: policy } = await import('../processors/governance/policy.ts'));
        console.error('(no policy of its own: the default one, flag every finding and block nothing)');
      }
      console.log(JSON.stringify(policy, null, 2));
      return 0;
    }
    if (cmd === 'policy' && sub === 'set') {
      const ws = need(values.workspace, '--workspace NAME');
      const s = await ops.updateSettings(ws, { policy: doc as never });
      console.log(`policy set (settings version ${s.version})`);
      return 0;
    }
    if (cmd === 'provider' && sub === 'set') {
      const s = await ops.updateSettings(need(values.workspace, '--workspace NAME'), { provider: provider! });
      console.log(`provider set (settings version ${s.version}): ${JSON.stringify(s.provider)}`);
      return 0;
    }
    if (cmd === 'alerts' && sub === 'set') {
      const s = await ops.updateSettings(need(values.workspace, '--workspace NAME'), alerts!);
      console.log(
        `alert rules set (settings version ${s.version}): ${(s.alertRules ?? []).length} rules` +
          `, webhook ${s.alertWebhookUrl ? `set${s.alertWebhookSecret ? ' (signed)' : ' (unsigned)'}` : 'none'}`,
      );
      return 0;
    }
    if (cmd === 'verify') {
      // Without --workspace: every workspace with anything to check, and _system (the audit chain of rejected
      // requests) even when it has no records yet.
      const { SYSTEM_WORKSPACE } = await import('../processors/audit.ts');
      const targets = values.workspace
        ? [values.workspace]
        : [...new Set([...(await ops.verifiableWorkspaces()), SYSTEM_WORKSPACE])];
      let ok = true;
      const results: Record<string, VerifyResult> = {};
      for (const ws of targets) {
        const r = await ops.verify(ws);
        results[ws] = r;
        ok &&= r.ok;
        if (!values.json) printVerify(ws, r);
      }
      if (values.json) console.log(JSON.stringify(results));

      return ok ? 0 : 1;
    }
    throw new UsageError(`unknown command: ${cmd} ${sub ?? ''}`, cmd);
  } finally {
    await ops.close();
  }
}

type ProviderOptions = {
  'base-url'?: string;
  'default-base-url'?: boolean;
  'api-key-env'?: string;
  'clear-api-key'?: boolean;
  'allow-caller-key'?: boolean;
};
/** provider set's options as a settings part: only what is given changes (the stored key stays unless replaced or cleared). */
function providerPatch(values: ProviderOptions): NonNullable<SettingsPatch['provider']> {
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

/** The alerts file's fields as settings parts. Only the fields the file gives change: the others stay as stored. */
const ALERT_FIELDS = {
  rules: 'alertRules',
  webhookUrl: 'alertWebhookUrl',
  webhookSecret: 'alertWebhookSecret',
} as const;
function alertsPatch(file: string, doc: unknown): SettingsPatch {
  const name = file === '-' ? 'stdin' : file;
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

/** A settings part by the key of the file it came from (ALERT_FIELDS reversed; a policy file is the part itself). */
const FILE_KEYS = new Map<string, string | null>([
  ...Object.entries(ALERT_FIELDS).map(([file, part]) => [part, file] as const),
  ['policy', null],
]);

/**
 * A settings file checked before storage is opened, its problems named by the file's own keys (`rules.0.kind`, not
 * the stored document's `alertRules.0.kind`), the same with or without a running server.
 */
async function checkFile(file: string, patch: SettingsPatch): Promise<void> {
  const { settingsPatchSchema } = await import('../collector/workspaces/settings.ts');
  const { formatIssues } = await import('../collector/workspaces/admin.ts');
  const r = settingsPatchSchema.safeParse(patch);
  if (r.success) return;
  const issues = r.error.issues.map((i) => {
    const [top, ...rest] = i.path.map(String);
    const key = top === undefined ? null : FILE_KEYS.has(top) ? (FILE_KEYS.get(top) as string | null) : top;
    return { path: key === null ? rest : [key, ...rest], message: i.message };
  });
  throw new Error(`${file === '-' ? 'stdin' : file}: ${formatIssues(issues)}; nothing changed`);
}

async function refused(args: string[], config: Config): Promise<number> {
  const { values, positionals } = parseCommandArgs('refused', args, {
    allowPositionals: true,
    options: { json: { type: 'boolean' } },
  });
  const [sub, ...files] = positionals;
  if (!sub) throw new UsageError('refused needs a subcommand: list | requeue', 'refused');
  if (sub !== 'list' && sub !== 'requeue') throw new UsageError(`unknown command: refused ${sub}`, 'refused');
  if (sub === 'list') maxPositionals('refused', positionals, 1);
  const { listRefused, requeueRefused } = await import('../pipeline/refused.ts');
  const { DataDirInUse, lockDataDir } = await import('../platform/data-dir-lock.ts');
  if (sub === 'list') {
    const list = await listRefused(config.DATA_DIR);
    if (values.json) console.log(JSON.stringify(list));
    else if (!list.length) console.log('no refused records');
    else for (const f of list) console.log(`${f.name}  ${f.records} records  first error: ${f.firstError}`);
    return 0;
  }
  if (sub === 'requeue') {
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
  throw new UsageError(`unknown command: refused ${sub}`, 'refused');
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
  const [cmd, ...rest] = argv;
  if (!cmd) {
    console.error(HELP.main);
    return 2;
  }
  if (cmd === '--help' || cmd === '-h' || cmd === 'help') {
    console.log(HELP.main);
    return 0;
  }
  if (cmd === 'main' || !Object.hasOwn(HELP, cmd)) throw new UsageError(`unknown command: ${cmd}`);
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(HELP[cmd]);
    return 0;
  }
  if (cmd === 'serve') parseCommandArgs(cmd, rest, { options: {} }); // takes no arguments
  const config = loadConfig();
  if (cmd === 'serve') {
    restartWith(serveFlags(config), serveEnv(config));
    const { startServer } = await import('../collector/server.ts');
    const running = await startServer(config);
    const stop = (sig: string) => {
      running.log.info({ signal: sig }, 'signal received');
      running.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
    return -1; // keep running
  }
  if (cmd === 'refused') return refused(rest, config);
  return manage(cmd, rest, config);
}

/**
 * V8 flags `serve` needs from the start: they cannot be set once V8 runs (--single-threaded-gc not even in
 * NODE_OPTIONS), so the process replaces itself with one started with them (same pid, before anything is opened).
 * - --single-threaded-gc: V8 collects garbage with helper threads (four by default) woken at every young-generation
 *   collection. On two cores they only compete with the threads doing the work, and waking a thread is costly on a
 *   virtual machine: measured, native ingestion ran 12-16 % faster without them (2,578-2,587 → 2,891-2,995
 *   traces/s), p99 no worse.
 * - --max-semi-space-size: for every thread's heap, but the processor and storage threads are held lower already
 *   (WORKER_YOUNG_GEN_MB), so it is the HTTP thread's young generation (about three semi-spaces) it shrinks. Left to
 *   V8 that grows under load until the process holds ~100 MB more, for no measured throughput (native ingestion on
 *   ClickHouse, two interleaved runs each: 16 MB semi-spaces 3,966 and 4,088 traces/s, peak RSS 487 and 501 MB;
 *   V8's default 3,572 and 4,084, 590 and 619 MB; 8 MB mixed, 4 MB slower and no smaller). Not added when node was
 *   given a size itself (NODE_OPTIONS or its command line).
 * - --heap-growing-percent (HEAP_GROWING_PERCENT, off by default): how far past what survived a full collection a
 *   thread's old generation may grow before the next one. V8 picks up to 300 % when collecting is cheap; capped at 25 %,
 *   native ingestion peaked at 440 MB instead of 514 MB on ClickHouse at 7.5 % fewer traces/s, and at 635 instead of
 *   678 MB on DuckDB at 4 % fewer (three interleaved runs each). A trade for an operator short of memory, not a
 *   default. Node refuses it in NODE_OPTIONS.
 */
function serveFlags(config: {
  SINGLE_THREADED_GC: string;
  SEMI_SPACE_MB: number;
  HEAP_GROWING_PERCENT: number;
}): string[] {
  const given = `${process.env.NODE_OPTIONS ?? ''} ${process.execArgv.join(' ')}`;
  const s = config.SINGLE_THREADED_GC;
  const flags: string[] = [];
  if (s === 'auto' ? availableParallelism() <= 2 : s === 'true' || s === '1') flags.push('--single-threaded-gc');
  if (config.SEMI_SPACE_MB > 0 && !/--max[-_]semi[-_]space[-_]size/.test(given))
    flags.push(`--max-semi-space-size=${config.SEMI_SPACE_MB}`);
  if (config.HEAP_GROWING_PERCENT > 0 && !/--heap[-_]growing[-_]percent/.test(given))
    flags.push(`--heap-growing-percent=${config.HEAP_GROWING_PERCENT}`);
  return flags;
}

/** Set in the environment of the process `serve` replaces itself with (restartWith), and taken out there. */
const RESTARTED = 'TRACEGATE_SERVE_RESTARTED';

/**
 * The compile cache (bin/compile-cache.ts), filled before the server starts: the environment the server needs, and
 * whether this process must be replaced anyway (the cache was not current, so it stripped its own sources itself).
 */
function serveEnv(config: Config): { env: NodeJS.ProcessEnv; replace: boolean } {
  // Replaced by `serve` a moment ago: the process before it filled the cache, or said why it could not.
  if (process.env[RESTARTED]) {
    delete process.env[RESTARTED];
    return { env: {}, replace: false };
  }
  const dir = compileCacheDir(config.DATA_DIR);
  if (!dir || !process.execve) return { env: {}, replace: false }; // used only through the restart
  const { filled, error } = fillCompileCache(dir);
  if (error) {
    console.error(`tracegate: starting without the compile cache in ${dir}: ${error}`);
    return { env: {}, replace: false };
  }
  return { env: { NODE_COMPILE_CACHE: dir }, replace: filled };
}

function restartWith(flags: string[], { env, replace }: { env: NodeJS.ProcessEnv; replace: boolean }): void {
  const missing = flags.filter((f) => !process.execArgv.includes(f));
  const changed = Object.entries(env).some(([k, v]) => process.env[k] !== v);
  if ((!missing.length && !changed && !replace) || !process.execve) return; // execve: POSIX only
  // A failed execve aborts the process (it does not throw): go on without the flags when node cannot be run again.
  try {
    accessSync(process.execPath, constants.X_OK);
  } catch {
    return;
  }
  process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], {
    ...process.env,
    ...env,
    [RESTARTED]: '1',
  });
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
