// The command groups, in the order `tracegate --help` lists them: a new group is a module here and one line below.
// Loaded on demand, so that a command loads (and type-strips) only its own module.
import type { Command } from '../shared/args.ts';

export const COMMANDS: Record<string, () => Promise<{ command: Command }>> = {
  serve: () => import('./serve.ts'),
  keys: () => import('./keys.ts'),
  sessions: () => import('./sessions.ts'),
  policy: () => import('./policy.ts'),
  provider: () => import('./provider.ts'),
  alerts: () => import('./alerts.ts'),
  webhooks: () => import('./webhooks.ts'),
  settings: () => import('./settings.ts'),
  verify: () => import('./verify.ts'),
  export: () => import('./export.ts'),
  refused: () => import('./refused.ts'),
};
