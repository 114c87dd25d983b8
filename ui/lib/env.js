// @tanstack/virtual-core reads process.env.NODE_ENV (a bundler's job to replace): the browser has no `process`.
const g = /** @type {any} */ (globalThis);
g.process ??= { env: { NODE_ENV: 'production' } };
