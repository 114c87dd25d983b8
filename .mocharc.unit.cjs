// `make test-unit` (`npx mocha --config .mocharc.unit.cjs [files or folders]`): the tests that need no server, no
// ClickHouse (nor chDB), no Redis, no child process and no listening socket, all in test/unit. test/support/unit-guard.ts
// fails any test of this run that tries to start one.
const { defaultSpec } = require('./test/support/mocha-spec.cjs');

module.exports = {
  spec: defaultSpec(['test/unit/**/*.test.ts']),
  extension: ['ts'],
  require: ['test/setup.ts', 'test/support/unit-guard.ts'],
  timeout: 90000,
  exit: true,
};
