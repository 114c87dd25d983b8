// Loaded by the unit run only (.mocharc.unit.cjs, `make test-unit`): a unit test starts no ClickHouse (shared or its
// own), no Redis, no child process and no listening socket. Any attempt throws, naming the rule, so a test that needs
// one fails at once in the unit run and belongs with the server suites (outside test/unit) instead.
import childProcess from 'node:child_process';
import { registerHooks, syncBuiltinESMExports } from 'node:module';
import net from 'node:net';
import { forbidSharedServers } from './shared.ts';

const RULE = 'a unit test (test/unit) starts no server, child process or listener; move it out of test/unit';

forbidSharedServers(RULE);
const forbid = (what: string) => () => {
  throw new Error(`${what}: ${RULE}`);
};
for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const) {
  Object.assign(childProcess, { [name]: forbid(`child_process.${name}`) });
}
net.Server.prototype.listen = forbid('listen') as never;
// `import { spawn } from 'node:child_process'` sees the replacements too.
syncBuiltinESMExports();
// chDB is ClickHouse in-process: a server suite's too (and its native library alone takes seconds to load).
registerHooks({
  resolve(specifier, context, next) {
    if (specifier === 'chdb' || specifier.startsWith('chdb/')) throw new Error(`import '${specifier}': ${RULE}`);
    return next(specifier, context);
  },
});
