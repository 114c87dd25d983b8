// `npx mocha` and `make test`: every test, the unit tests (test/unit) first, then the suites that need servers. The
// shared ClickHouse and cluster start only when a suite first needs them (test/support/shared.ts).
// `npx mocha <files or folders>` runs just those.
const { defaultSpec } = require('./test/support/mocha-spec.cjs');

module.exports = {
  spec: defaultSpec(['test/unit/**/*.test.ts', 'test/!(unit)/**/*.test.ts']),
  extension: ['ts'],
  // test/support/local-model installs its own packages there
  ignore: ['**/node_modules/**'],
  require: ['test/setup.ts'],
  timeout: 90000,
  exit: true,
};
