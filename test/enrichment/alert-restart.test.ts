// A restarted collector remembers when each alert rule last fired (DATA_DIR/cache/alert-fires.json): a restart within
// the cooldown does not fire the rule again (nor call its webhook again); an edited rule is a new rule.
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { loadConfig } from '../../config/index.ts';
import { startServer, type Running } from '../../collector/server.ts';
import { createKey, parseSettingsPatch, updateSettings } from '../../collector/workspaces/admin.ts';
import { flushed, get, post, testEnv } from '../support/server.ts';

describe('alert cooldowns across restarts (duckdb)', function () {
  this.timeout(120_000);
  it('a rule that fired is not fired again after a restart within its cooldown; an edited rule fires', async () => {
    const config = loadConfig(testEnv('duckdb'));
    let running: Running = await startServer(config);
    try {
      const k = await createKey(running.storage, 'alert-restart');
      const auth = { authorization: `Bearer ${k.key}` };
      const rules = (severity: 'low' | 'medium') =>
        parseSettingsPatch({ alertRules: [{ id: 'mail', kind: 'finding', severity, cooldownSeconds: 3600 }] });
      await updateSettings(running.settings, k.workspaceId, rules('medium'));
      const url = () => `http://127.0.0.1:${running.port}`;
      const leak = async (id: string) => {
        expect(
          (await post(`${url()}/api/traces`, { requestId: id, prompt: `mail ${id}@example.com`, response: 'ok' }, auth))
            .status,
        ).to.equal(200);
        await flushed({ running } as never);
      };
      const alerts = async () =>
        (
          (await get(`${url()}/api/alerts`, auth)).json as { items: Array<{ ruleId: string; traceId: string }> }
        ).items.map((a) => a.traceId);

      await leak('first');
      expect(await alerts()).to.deep.equal(['first']);
      await leak('second'); // within the cooldown
      expect(await alerts()).to.deep.equal(['first']);

      await running.close();
      running = await startServer(config);
      await leak('after-restart');
      expect(await alerts()).to.deep.equal(['first']); // the restart did not forget the cooldown

      // The same id with other content is a new rule: its window and cooldown start afresh (e-mail is medium: low matches).
      await updateSettings(running.settings, k.workspaceId, rules('low'));
      await leak('edited');
      expect(await alerts()).to.deep.equal(['edited', 'first']);
    } finally {
      await running.close();
      rmSync(config.DATA_DIR, { recursive: true, force: true });
    }
  });
});
