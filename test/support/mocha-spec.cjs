// The default test files of a mocha configuration (.mocharc.cjs, .mocharc.unit.cjs), unless the command line names
// some: mocha adds files named there to the configuration's `spec` instead of running them alone, so
// `npx mocha test/unit/otlp/mapper.test.ts` would run the whole suite.
const { existsSync } = require('node:fs');

/** Options whose value is a path or pattern that is not a test file to run. */
const VALUE_OPTIONS = new Set([
  '-r',
  '--require',
  '--file',
  '--config',
  '--package',
  '--ignore',
  '--exclude',
  '--watch-files',
  '--watch-ignore',
  '-R',
  '--reporter',
  '-O',
  '--reporter-option',
  '--reporter-options',
  '-n',
  '--node-option',
]);

/** Test files or folders named on the command line (`--spec x` included), as paths that exist or globs. */
function named(argv) {
  return argv.some(
    (arg, i) =>
      !arg.startsWith('-') && !VALUE_OPTIONS.has(argv[i - 1] ?? '') && (existsSync(arg) || /[*?{[]/.test(arg)),
  );
}

/** `spec`, or nothing when the command line names the files to run. */
exports.defaultSpec = (spec) => (named(process.argv.slice(2)) ? [] : spec);
