// When each alert rule last fired (DATA_DIR/cache/alert-fires.json), so a restarted collector does not fire a rule
// again within its cooldown: a deploy or a crash loop would otherwise repeat every alert (and webhook) at each start.
// The windows themselves start empty. A state file: written at most once a second after a fire, and at shutdown.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { JsonSnapshot } from '../platform/json-snapshot.ts';
import type { AlertFires } from './alerts.ts';

const fileIn = (dataDir: string) => join(dataDir, 'cache', 'alert-fires.json');

export function readAlertFires(dataDir: string): AlertFires {
  try {
    const v = JSON.parse(readFileSync(fileIn(dataDir), 'utf8')) as unknown;
    if (!v || typeof v !== 'object' || Array.isArray(v)) return {};
    const out: AlertFires = {};
    for (const [ws, keys] of Object.entries(v as Record<string, unknown>)) {
      if (!keys || typeof keys !== 'object' || Array.isArray(keys)) continue;
      for (const [key, at] of Object.entries(keys as Record<string, unknown>)) {
        if (typeof at === 'number' && Number.isFinite(at)) (out[ws] ??= {})[key] = at;
      }
    }
    return out;
  } catch {
    return {}; // first run, or an unreadable file: no rule is held back
  }
}

export function alertFiresFile(dataDir: string, value: () => AlertFires): JsonSnapshot {
  return new JsonSnapshot(fileIn(dataDir), value);
}
