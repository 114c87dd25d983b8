// Mocha root hooks: shared throwaway servers for the whole run live here.
export const mochaHooks = {};
