// Per-workspace settings (policy, proxy provider, alert rules): one JSON document per workspace,
// managed with the CLI, cached briefly so the hot path does not read storage per request.
import { z } from 'zod';
import type { Config } from '../../config/index.ts';
import type { Storage } from '../../core/ports/storage.ts';
import { BackpressureError, TracegateError } from '../../core/errors.ts';

import type { LastKnown } from './last-known.ts';
import { DEFAULT_POLICY, policySchema, type Policy } from '../../processors/governance/policy.ts';
import { POLICY_ACTION_KEYS } from '../../processors/governance/types.ts';
import { alertRuleSchema, type AlertSettings } from '../../processors/alerts.ts';
import { LOOKUP_DEADLINE_MS, SingleFlight, STALE_GRACE_MS, within } from '../../platform/slow-storage.ts';

export const providerSettingsSchema = z.strictObject({
  baseUrl: z.url({ protocol: /^https?$/ }).optional(),
  apiKey: z.string().min(1).max(512).optional(),
  /** Callers may send their own provider key in X-Provider-Api-Key instead of the configured one. */
  allowCallerKey: z.boolean().default(false),
});

export const settingsSchema = z.strictObject({
  policy: policySchema.optional(),
  provider: providerSettingsSchema.optional(),
  alertRules: z.array(alertRuleSchema).max(100).optional(),
  alertWebhookUrl: z.url({ protocol: /^https?$/ }).optional(),
  alertWebhookSecret: z.string().min(16).max(256).optional(),
});
export type SettingsDoc = z.infer<typeof settingsSchema>;

/**
 * A change to the settings (the admin route's and the CLI's): each top-level part replaces the stored one, except
 * `provider`, whose fields are merged so that changing the base URL keeps the stored key; null removes a provider
 * field (the server's default applies again) or the alert webhook's URL or secret.
 */
// zod runs a refinement even after z.url() failed: an unparsable URL is z.url()'s to report.
const noUserInfo = (u: string) => {
  if (!URL.canParse(u)) return true;
  const x = new URL(u);
  return x.username === '' && x.password === '';
};
const NO_USERINFO =
  'must not carry credentials (user:password@): they would be printed with the URL and fetch refuses them; sign webhooks with the webhook secret instead';

export const settingsPatchSchema = settingsSchema.partial().extend({
  alertWebhookUrl: settingsSchema.shape.alertWebhookUrl.unwrap().refine(noUserInfo, NO_USERINFO).nullable().optional(),
  alertWebhookSecret: settingsSchema.shape.alertWebhookSecret.unwrap().nullable().optional(),
  provider: z
    .strictObject({
      baseUrl: providerSettingsSchema.shape.baseUrl
        .unwrap()
        .refine(noUserInfo, 'must not carry credentials (user:password@); set the provider key with --api-key-env')
        .nullable()
        .optional(),
      apiKey: providerSettingsSchema.shape.apiKey.unwrap().nullable().optional(),
      allowCallerKey: z.boolean().optional(),
    })
    .optional(),
});
export type SettingsPatch = z.infer<typeof settingsPatchSchema>;

export interface ResolvedSettings {
  policy: Policy;
  /** `sharedKey`: apiKey is the server's (TRACEGATE_PROVIDER_API_KEY), which every workspace without a key of its own shares. */
  provider: { baseUrl: string; apiKey: string | undefined; allowCallerKey: boolean; sharedKey: boolean };
  doc: SettingsDoc;
  version: number;
}

export class SettingsStore {
  private readonly cache = new Map<string, { value: ResolvedSettings; until: number }>();
  private readonly storage: Storage;
  private readonly config: Config;
  private readonly ttlMs: number;
  private readonly onWarning: ((o: object, m: string) => void) | undefined;
  private readonly lastKnown: LastKnown | undefined;
  private readonly deadlineMs: number;
  private readonly lookups = new SingleFlight<ResolvedSettings>();
  /** Per workspace, the tail of the changes under way here (update() runs them in turn). */
  private readonly updating = new Map<string, Promise<void>>();
  constructor(
    storage: Storage,
    config: Config,
    ttlMs = 5_000,
    onWarning?: (o: object, m: string) => void,
    lastKnown?: LastKnown,
    deadlineMs = LOOKUP_DEADLINE_MS,
  ) {
    this.storage = storage;
    this.config = config;
    this.ttlMs = ttlMs;
    this.onWarning = onWarning;
    this.lastKnown = lastKnown;
    this.deadlineMs = deadlineMs;
  }

  async forWorkspace(workspaceId: string): Promise<ResolvedSettings> {
    const hit = this.cache.get(workspaceId);
    if (hit && hit.until > Date.now()) return hit.value;
    const gen = this.lookups.generation(workspaceId);
    // Storage down or too slow (see slow-storage.ts): keep ingesting with the last known settings (also those
    // known before a restart); without any, refuse (retryable) rather than fall back to a default policy that
    // might store text the real policy redacts.
    const fallback = (err?: unknown): ResolvedSettings => {
      let value = hit?.value;
      if (!value) {
        const known = this.lastKnown?.settings(workspaceId);
        if (known === undefined)
          throw Object.assign(
            new BackpressureError('workspace settings are unavailable while storage is unreachable; retry later', 5),
            { cause: err },
          );
        value = this.resolve(known ? this.parseStored(known.doc, workspaceId) : {}, known?.version ?? 0);
      }
      // Held a little longer, so the lookups that follow (the same request asks more than once) do not wait again;
      // unless the settings changed here meanwhile (update() cached the new version).
      if (this.lookups.current(workspaceId, gen))
        this.cache.set(workspaceId, { value, until: Date.now() + STALE_GRACE_MS });
      return value;
    };
    let got: { value: ResolvedSettings } | null;
    try {
      got = await within(
        this.lookups.run(workspaceId, (g) => this.lookup(workspaceId, g)),
        this.deadlineMs,
      );
    } catch (err) {
      return fallback(err);
    }
    return got ? got.value : fallback();
  }

  /** Reads the settings and caches them (also when the asking request has given up waiting). */
  private async lookup(workspaceId: string, gen: number): Promise<ResolvedSettings> {
    const row = await this.storage.getSettings(workspaceId);
    const value = this.resolve(row ? this.parseStored(row.doc, workspaceId) : {}, row?.version ?? 0);
    if (!this.lookups.current(workspaceId, gen)) return value; // read before a change made here: not kept
    this.lastKnown?.rememberSettings(workspaceId, row);
    this.cache.set(workspaceId, { value, until: Date.now() + this.ttlMs });
    return value;
  }

  /** The proxy upstream a workspace without its own base URL uses. */
  get defaultProviderBaseUrl(): string {
    return this.config.PROVIDER_BASE_URL;
  }

  private resolve(doc: SettingsDoc, version: number): ResolvedSettings {
    const baseUrl = doc.provider?.baseUrl ?? this.config.PROVIDER_BASE_URL;
    // The server's key goes only to the server's provider host, never to one a workspace chose.
    const serverKey =
      new URL(baseUrl).origin === new URL(this.config.PROVIDER_BASE_URL).origin
        ? this.config.PROVIDER_API_KEY
        : undefined;
    return {
      doc,
      version,
      policy: doc.policy ?? DEFAULT_POLICY,
      provider: {
        baseUrl,
        apiKey: doc.provider?.apiKey ?? serverKey,
        allowCallerKey: doc.provider?.allowCallerKey ?? false,
        // A workspace given the server's own key shares its account all the same.
        sharedKey: serverKey !== undefined && (doc.provider?.apiKey ?? serverKey) === serverKey,
      },
    };
  }

  /**
   * Documents are validated when written; one stored by an older version may hold a policy action key that is
   * no longer accepted (keys are checked since keys that did nothing were silently accepted): it is dropped
   * with a warning rather than failing every request of the workspace.
   */
  private parseStored(text: string, workspaceId: string): SettingsDoc {
    const raw = JSON.parse(text) as { policy?: { actions?: Record<string, unknown> } };
    const actions = raw.policy?.actions;
    if (actions && typeof actions === 'object') {
      const unknown = Object.keys(actions).filter((k) => !POLICY_ACTION_KEYS.includes(k));
      if (unknown.length) {
        this.onWarning?.(
          { workspaceId, ignoredActionKeys: unknown },
          'settings: stored policy has action keys that match no rule, category or detector; ignored',
        );
        for (const k of unknown) delete actions[k];
      }
    }
    return settingsSchema.parse(raw);
  }

  async policyFor(workspaceId: string): Promise<Policy> {
    return (await this.forWorkspace(workspaceId)).policy;
  }

  async alertsFor(workspaceId: string): Promise<AlertSettings> {
    const { doc } = await this.forWorkspace(workspaceId);
    return { rules: doc.alertRules ?? [], webhookUrl: doc.alertWebhookUrl, webhookSecret: doc.alertWebhookSecret };
  }

  /**
   * Validates and stores a new version; returns it. Callers audit the change. Changes made through this process
   * run one after the other (each applies to the one before); one racing a change made through another collector
   * on the same storage, which wrote the same version first, is 409 conflict: nothing of it counts, retry it.
   */
  update(workspaceId: string, change: (doc: SettingsDoc) => SettingsDoc): Promise<ResolvedSettings> {
    const run = (this.updating.get(workspaceId) ?? Promise.resolve()).then(() => this.updateNow(workspaceId, change));
    const tail = run.then(
      () => {},
      () => {},
    );
    this.updating.set(workspaceId, tail);
    void tail.then(() => {
      if (this.updating.get(workspaceId) === tail) this.updating.delete(workspaceId);
    });
    return run;
  }

  private async updateNow(workspaceId: string, change: (doc: SettingsDoc) => SettingsDoc): Promise<ResolvedSettings> {
    const current = await this.storage.getSettings(workspaceId);
    const doc = settingsSchema.parse(change(current ? JSON.parse(current.doc) : {}));
    const version = (current?.version ?? 0) + 1;
    if (!(await this.storage.putSettings(workspaceId, JSON.stringify(doc), version, Date.now()))) {
      this.forget(workspaceId);
      throw new TracegateError(
        'conflict',
        'conflict',
        `the settings of this workspace were changed through another collector at the same moment (version ${version}); nothing of this change was kept: read them again and retry`,
      );
    }
    // What was written, not read back: the audit record must name this version even if another change follows.
    const value = this.resolve(doc, version);
    this.lookups.changed(workspaceId);
    this.cache.set(workspaceId, { value, until: Date.now() + this.ttlMs });
    return value;
  }

  forget(workspaceId: string): void {
    this.cache.delete(workspaceId);
    this.lookups.changed(workspaceId);
  }
}
