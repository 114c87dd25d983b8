// Settings files (policy set, alerts set): read and checked before storage is opened, so that a bad file changes
// nothing and says so the same way with or without a running server.
import { readFileSync } from 'node:fs';
import type { SettingsPatch } from '../../collector/workspaces/settings.ts';

/** How a file is named in messages ('-' is stdin). */
export const fileName = (file: string): string => (file === '-' ? 'stdin' : file);

/** A JSON file, or stdin for '-'. */
export function readDoc(file: string): unknown {
  const text = readFileSync(file === '-' ? 0 : file, 'utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`${fileName(file)}: not valid JSON (${(err as Error).message})`);
  }
}

/**
 * A settings file checked as the server would check it, its problems named by the file's own keys (`rules.0.kind`,
 * not the stored document's `alertRules.0.kind`). `fileKeys`: the file key of each settings part the patch holds
 * (null: the file is that part itself, as a policy file is).
 */
export async function checkFile(
  file: string,
  patch: SettingsPatch,
  fileKeys: ReadonlyMap<string, string | null>,
): Promise<void> {
  const { settingsPatchSchema } = await import('../../collector/workspaces/settings.ts');
  const { formatIssues } = await import('../../collector/workspaces/admin.ts');
  const r = settingsPatchSchema.safeParse(patch);
  if (r.success) return;
  const issues = r.error.issues.map((i) => {
    const [top, ...rest] = i.path.map(String);
    const key = top === undefined ? null : fileKeys.has(top) ? (fileKeys.get(top) as string | null) : top;
    return { path: key === null ? rest : [key, ...rest], message: i.message };
  });
  throw new Error(`${fileName(file)}: ${formatIssues(issues)}; nothing changed`);
}
