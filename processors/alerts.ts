// Alert signals: per-workspace rules evaluated at ingestion over sliding windows kept in memory
// (per instance; a restart starts the windows empty, but remembers when each rule last fired, so a restart does not
// fire again within the cooldown). Optional signed webhook notification.
import { createHash, createHmac, randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { AlertRecord, FindingRecord, SecurityAlertRecord, Severity } from '../core/enrichment-records.ts';
import type { Processor } from '../core/ports/ingest.ts';
import { USAGE_KINDS, type SpanRecord } from '../core/record.ts';
import { interpolatedQuantile } from '../storage/enrichment.ts';
import { canonicalJson } from './canonical.ts';
import { RuleWindow, spanKey } from './alert-window.ts';

const SEVERITY = ['low', 'medium', 'high', 'critical'] as const;
const RANK: Record<Severity, number> = { low: 0, medium: 1, high: 2, critical: 3 };

export const alertRuleSchema = z.strictObject({
  id: z.string().regex(/^[\w.-]{1,64}$/),
  /**
   * latency: p95 duration (ms); cost: USD summed; error_rate: errors/requests; finding: severity at or above;
   * guardrail: tripwires; security_alert: alerts from POST /api/ingest/webhooks at or above severity, more than
   * threshold in the window.
   */
  kind: z.enum(['latency', 'cost', 'error_rate', 'finding', 'guardrail', 'security_alert']),
  threshold: z.number().min(0).default(0),
  windowSeconds: z.number().int().min(1).max(86_400).default(300),
  minRequests: z.number().int().min(1).default(1),
  model: z.string().max(256).optional(),
  actionName: z.string().max(256).optional(),
  severity: z.enum(SEVERITY).default('high'),
  cooldownSeconds: z.number().int().min(0).max(86_400).optional(),
});
export type AlertRule = z.infer<typeof alertRuleSchema>;

export interface AlertSettings {
  rules: AlertRule[];
  webhookUrl?: string;
  webhookSecret?: string;
}
export interface AlertSource {
  alertsFor(workspaceId: string): Promise<AlertSettings>;
}

export function isTripwire(s: SpanRecord): boolean {
  const a = s.attributes;
  return (
    s.kind === 'guardrail' &&
    (a['guardrail.tripwire_triggered'] === true || a['tripwire_triggered'] === true || s.status === 'tripwire')
  );
}

/** The signature header value for an outbound delivery: v1=<hex HMAC-SHA256 of `${timestamp}.${body}`>. */
export function signDelivery(secret: string, timestamp: string, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** State is keyed by the rule's content: an edited rule (same id) starts with an empty window. */
function ruleKey(rule: AlertRule): string {
  return createHash('sha256').update(canonicalJson(rule)).digest('hex');
}

/**
 * Latency, cost and error-rate rules describe current traffic: a span that ended longer ago than this (and than
 * the rule's window) is a backfill and counts for nothing. Within it, a span counts when it arrives, whatever
 * the sender's clock or export delay says. Finding and guardrail rules count any span: a leak is news whenever
 * it arrives.
 */
const BACKFILL_MS = 3_600_000;

function isBackfill(s: SpanRecord, now: number, windowMs: number): boolean {
  const ended = Number(s.endTimeNs) / 1e6 || Number(s.startTimeNs) / 1e6;
  return ended > 0 && ended < now - Math.max(windowMs, BACKFILL_MS);
}

/** When each rule last fired: workspace → rule key (its content) → ms; what a restarted evaluator starts from. */
export type AlertFires = Record<string, Record<string, number>>;

/** The longest cooldown a rule can have: a fire time older than this holds nothing back. */
const MAX_COOLDOWN_MS = 86_400_000;

export class AlertEvaluator {
  // workspace → rule key → window; rules no longer configured are dropped on the workspace's next batch.
  private readonly state = new Map<string, Map<string, RuleWindow>>();
  // A previous run's fire times, each taken by its rule's first window (and dropped with its workspace's rules).
  private readonly previous: AlertFires;
  private readonly onFire: () => void;

  /** `previous`: the fire times a previous run saved (fires()); `onFire` is called after a batch that fired. */
  constructor(previous: AlertFires = {}, onFire: () => void = () => {}) {
    this.previous = previous;
    this.onFire = onFire;
  }

  /** When each rule held now last fired, within the longest cooldown of `now` (to be saved for the next run). */
  fires(now = Date.now()): AlertFires {
    const out: AlertFires = {};
    const keep = (ws: string, key: string, at: number) => {
      if (!(now - at < MAX_COOLDOWN_MS)) return;
      (out[ws] ??= {})[key] = at;
    };
    for (const [ws, keys] of Object.entries(this.previous))
      for (const [key, at] of Object.entries(keys)) keep(ws, key, at);
    for (const [ws, windows] of this.state) for (const [key, w] of windows) keep(ws, key, w.lastFiredAt);
    return out;
  }

  /**
   * Pure given its state: the alerts a batch triggers at time `now`. `undo` gets what takes the batch back should its
   * records be lost before they are stored: its samples leave the windows (so its redelivery counts again) and its
   * fires are taken back (their cooldown no longer holds the rule).
   */
  evaluate(
    workspaceId: string,
    rules: AlertRule[],
    spans: SpanRecord[],
    findings: FindingRecord[],
    now: number,
    undo?: Array<() => void>,
    security: readonly SecurityAlertRecord[] = [],
  ): AlertRecord[] {
    const before = this.state.get(workspaceId);
    const previous = this.previous[workspaceId];
    delete this.previous[workspaceId];
    if (rules.length === 0) {
      this.state.delete(workspaceId);
      return [];
    }
    const windows = new Map<string, RuleWindow>();
    this.state.set(workspaceId, windows);
    const out: AlertRecord[] = [];
    const added: Array<{ window: RuleWindow; spans: string[] }> = [];
    const fired: Array<{ window: RuleWindow; before: number }> = [];
    for (const rule of rules) {
      const key = ruleKey(rule);
      let st = windows.get(key) ?? before?.get(key);
      if (!st) {
        st = new RuleWindow();
        const at = previous?.[key];
        if (typeof at === 'number' && at <= now) st.lastFiredAt = at; // a clock set back since: not held back forever
      }
      windows.set(key, st);
      const since = now - rule.windowSeconds * 1000;
      st.prune(since);
      const cooldown = (rule.cooldownSeconds ?? rule.windowSeconds) * 1000;
      const fire = (value: number, traceId: string, message: string) => {
        if (now - st.lastFiredAt < cooldown) return;
        fired.push({ window: st, before: st.lastFiredAt });
        st.lastFiredAt = now;
        out.push({
          recordType: 'alert',
          workspaceId,
          alertId: randomUUID(),
          ruleId: rule.id,
          kind: rule.kind,
          severity: rule.severity,
          message,
          traceId,
          value,
          threshold: rule.threshold,
          windowStartMs: since,
          atMs: now,
          delivered: '',
        });
      };
      // Adds the span's sample (at its arrival) unless it was already counted: a redelivery.
      const mine = { window: st, spans: [] as string[] };
      added.push(mine);
      const countKey = (span: string, value: number, error: boolean) => {
        const ok = st.add({ at: now, value, error, span });
        if (ok) mine.spans.push(span);
        return ok;
      };
      const counted = (s: SpanRecord, value: number) => countKey(spanKey(s), value, s.status === 'error');
      const matching = spans.filter(
        (s) =>
          s.workspaceId === workspaceId &&
          (!rule.model || s.model === rule.model) &&
          (!rule.actionName || s.actionName === rule.actionName),
      );
      if (rule.kind === 'finding') {
        const hits = findingsOn(matching, findings, rule.severity, counted);
        const top = hits.reduce<FindingRecord | undefined>(
          (a, f) => (!a || RANK[f.severity] > RANK[a.severity] ? f : a),
          undefined,
        );
        if (top)
          fire(hits.length, top.traceId, `${top.severity} ${top.category} finding (${top.rule}) in ${top.field}`);
        continue;
      }
      if (rule.kind === 'security_alert') {
        // An alert redelivered (same id) is counted once; model and action filters do not apply to alerts.
        const hits = security.filter(
          (a) =>
            a.workspaceId === workspaceId &&
            RANK[a.severity] >= RANK[rule.severity] &&
            countKey(`security_alert\u0000${a.alertId}`, 1, false),
        );
        const top = hits.reduce<SecurityAlertRecord | undefined>(
          (a, x) => (!a || RANK[x.severity] > RANK[a.severity] ? x : a),
          undefined,
        );
        if (top && st.size > rule.threshold)
          fire(
            st.size,
            top.traceId,
            `${top.severity} security alert from ${top.source}: ${top.title || top.category || top.externalId || top.alertId}`,
          );
        continue;
      }
      if (rule.kind === 'guardrail') {
        const hit = matching.filter((s) => isTripwire(s) && counted(s, 1))[0];
        if (hit) fire(1, hit.traceId, `guardrail tripwire: ${hit.name}`);
        continue;
      }
      const windowMs = rule.windowSeconds * 1000;
      const calls = matching.filter(
        (s) =>
          USAGE_KINDS.has(s.kind) &&
          !isBackfill(s, now, windowMs) &&
          counted(s, rule.kind === 'cost' ? s.costUsd : s.durationMs),
      );
      if (calls.length === 0 || st.size < rule.minRequests) continue;
      const last = calls[calls.length - 1]!.traceId;
      const scope =
        [rule.model && `model ${rule.model}`, rule.actionName && `action ${rule.actionName}`]
          .filter(Boolean)
          .join(', ') || 'all traffic';
      const samples = st.values;
      if (rule.kind === 'latency') {
        const v = interpolatedQuantile(
          samples.map((x) => x.value).sort((a, b) => a - b),
          0.95,
        );
        if (v > rule.threshold)
          fire(
            v,
            last,
            `p95 latency ${v.toFixed(1)} ms over ${rule.windowSeconds}s exceeds ${rule.threshold} ms (${scope})`,
          );
      } else if (rule.kind === 'cost') {
        const v = samples.reduce((a, x) => a + x.value, 0);
        if (v > rule.threshold)
          fire(v, last, `cost $${v.toFixed(6)} over ${rule.windowSeconds}s exceeds $${rule.threshold} (${scope})`);
      } else {
        const v = samples.filter((x) => x.error).length / samples.length;
        if (v > rule.threshold)
          fire(
            v,
            last,
            `error rate ${(v * 100).toFixed(1)}% over ${rule.windowSeconds}s exceeds ${(rule.threshold * 100).toFixed(1)}% (${scope})`,
          );
      }
    }
    if (out.length) this.onFire();
    if (undo && (fired.length || added.some((a) => a.spans.length))) {
      undo.push(() => {
        for (const a of added) a.window.remove(a.spans);
        let changed = false;
        for (const f of fired) if (f.window.takeBack(now, f.before)) changed = true;
        if (changed) this.onFire(); // the saved fire times follow
      });
    }
    return out;
  }
}

/** The findings at or above `severity` on the given spans, for the spans `counted` accepts (not counted before). */
function findingsOn(
  spans: SpanRecord[],
  findings: FindingRecord[],
  severity: Severity,
  counted: (s: SpanRecord, value: number) => boolean,
): FindingRecord[] {
  const bySpan = new Map<string, FindingRecord[]>();
  for (const f of findings) {
    if (RANK[f.severity] < RANK[severity]) continue;
    const k = spanKey(f);
    const list = bySpan.get(k);
    if (list) list.push(f);
    else bySpan.set(k, [f]);
  }
  const hits: FindingRecord[] = [];
  if (bySpan.size === 0) return hits;
  for (const s of spans) {
    const list = bySpan.get(spanKey(s));
    if (list && counted(s, list.length)) hits.push(...list);
  }
  return hits;
}

/** How a webhook delivery ended: 'sent' (answered 2xx) or 'failed' (a final non-2xx, or every attempt failed). */
export type DeliveryOutcome = 'sent' | 'failed';

export interface Notifier {
  /** `done` is called once the delivery ends, not for one abandoned at shutdown. */
  notify(url: string, secret: string | undefined, alert: AlertRecord, done?: (outcome: DeliveryOutcome) => void): void;
  /** At shutdown: wait up to `maxMs` for deliveries under way, then log and drop the rest (their ids are returned). */
  settle(maxMs: number): Promise<string[]>;
}

/** Waits before the second and third delivery attempts. */
export const WEBHOOK_RETRY_DELAYS_MS: readonly number[] = [1_000, 5_000];

/**
 * Fire-and-forget POST, signed like the inbound webhook scheme; never blocks ingestion. A network error, a timeout,
 * 429 or 5xx is retried (after WEBHOOK_RETRY_DELAYS_MS, each attempt re-signed with its own timestamp); another 4xx
 * is final. Failures are logged; the alert itself is stored either way.
 */
export function webhookNotifier(
  log: { warn(o: object, m: string): void },
  timeoutMs = 5000,
  retryDelaysMs: readonly number[] = WEBHOOK_RETRY_DELAYS_MS,
): Notifier {
  // Deliveries not finished, by alert id: an attempt in flight, or a retry waiting on its timer.
  const pending = new Map<string, { inFlight: boolean; timer: NodeJS.Timeout | null }>();
  let closed = false;
  let idle: (() => void) | null = null;
  const settled = () => {
    if (![...pending.values()].some((p) => p.inFlight)) idle?.();
  };
  const abandoned = (ids: string[]) =>
    log.warn(
      { alertIds: ids, count: ids.length },
      'alert webhook deliveries abandoned at shutdown (the alerts are stored)',
    );
  return {
    async settle(maxMs) {
      closed = true; // no retry from here on: an attempt answering now is the last one
      if ([...pending.values()].some((p) => p.inFlight)) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          new Promise<void>((r) => {
            idle = r;
          }),
          new Promise<void>((r) => {
            timer = setTimeout(r, maxMs);
          }),
        ]);
        clearTimeout(timer);
        idle = null;
      }
      const left = [...pending.keys()];
      for (const p of pending.values()) if (p.timer) clearTimeout(p.timer);
      pending.clear();
      if (left.length) abandoned(left);
      return left;
    },
    notify(url, secret, alert, done) {
      if (closed) return abandoned([alert.alertId]);
      // `delivered` is this collector's own bookkeeping ('queued' while this runs), not news for the receiver.
      const body = JSON.stringify({ alert: { ...alert, recordType: undefined, delivered: undefined } });
      const state = { inFlight: false, timer: null as NodeJS.Timeout | null };
      pending.set(alert.alertId, state);
      const finish = (outcome: DeliveryOutcome) => {
        if (pending.get(alert.alertId) === state) pending.delete(alert.alertId);
        settled();
        done?.(outcome);
      };
      const attempt = (n: number): void => {
        state.timer = null;
        if (pending.get(alert.alertId) !== state) return; // abandoned at shutdown
        state.inFlight = true;
        const ts = String(Math.floor(Date.now() / 1000));
        // The delivery id lets a receiver drop a repeat (a timed-out attempt it did process).
        const headers: Record<string, string> = {
          'content-type': 'application/json',
          'x-service-delivery-timestamp': ts,
          'x-service-delivery-id': alert.alertId,
        };
        if (secret) headers['x-service-signature'] = signDelivery(secret, ts, body);
        const retry = (why: object, retryAfterSeconds = 0) => {
          state.inFlight = false;
          if (closed) return settled(); // left pending: settle reports it as abandoned
          if (n < retryDelaysMs.length) {
            state.timer = setTimeout(
              () => attempt(n + 1),
              Math.max(retryDelaysMs[n]!, Math.min(retryAfterSeconds, 60) * 1000),
            );
            state.timer.unref();
            return;
          }
          log.warn({ ...why, alertId: alert.alertId, attempts: n + 1 }, 'alert webhook delivery failed');
          finish('failed');
        };
        // redirect: 'manual': a redirect is answered as such (final, logged), never followed to another host.
        fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' })
          .then((r) => {
            void r.body?.cancel().catch(() => {});
            if (r.status === 429 || r.status >= 500)
              return retry({ status: r.status }, Number(r.headers.get('retry-after')) || 0);
            if (!r.ok) log.warn({ status: r.status, alertId: alert.alertId }, 'alert webhook answered non-2xx');
            finish(r.ok ? 'sent' : 'failed');
          })
          .catch((err: unknown) => retry({ err: String(err) }));
      };
      attempt(0);
    },
  };
}

/** Delivery outcomes waiting for a batch to carry them; past this many, the oldest are only in the logs. */
const MAX_OUTCOMES = 10_000;

/** Outcomes taken out for a write that failed: back at the front of the line (past the cap, the oldest go). */
export function putBackOutcomes(outcomes: AlertRecord[], carried: readonly AlertRecord[]): void {
  outcomes.unshift(...carried);
  if (outcomes.length > MAX_OUTCOMES) outcomes.splice(0, outcomes.length - MAX_OUTCOMES);
}

/**
 * An alert with a webhook is stored as delivered 'queued' and sent once that record is durable; when the delivery
 * ends, the same record (same alert id and atMs, so it replaces the first: the alerts table keeps the last write of a
 * version) goes out with the next batch, saying 'sent' or 'failed' (`outcomes`; at shutdown the rest goes out with the
 * final checkpoints). A batch or checkpoint write carrying outcomes that cannot be spooled puts them back for the
 * next one; only a failed final write at shutdown leaves the record 'queued' (the outcome is in the logs).
 */
export function alertProcessor(
  source: AlertSource,
  evaluator: AlertEvaluator,
  notifier: Notifier,
  outcomes: AlertRecord[] = [],
): Processor {
  return async (batch) => {
    if (outcomes.length) {
      const carried = outcomes.splice(0);
      batch.extra.push(...carried);
      // Lost with the batch: back at the front of the line for the next one (past the cap, the oldest go).
      (batch.lost ??= []).push(() => putBackOutcomes(outcomes, carried));
    }
    const security = batch.extra.filter((r): r is SecurityAlertRecord => r.recordType === 'security_alert');
    if (batch.spans.length === 0 && security.length === 0) return batch;
    const findings = batch.extra.filter((r): r is FindingRecord => r.recordType === 'finding');
    const now = Date.now();
    for (const ws of new Set([...batch.spans, ...security].map((s) => s.workspaceId))) {
      const settings = await source.alertsFor(ws);
      const lost = (batch.lost ??= []);
      for (const alert of evaluator.evaluate(ws, settings.rules, batch.spans, findings, now, lost, security)) {
        const { webhookUrl, webhookSecret } = settings;
        if (webhookUrl) {
          alert.delivered = 'queued';
          // Sent once the alert is stored: a receiver never hears of an alert the collector then lost.
          (batch.durable ??= []).push(() =>
            notifier.notify(webhookUrl, webhookSecret, alert, (delivered) => {
              if (outcomes.push({ ...alert, delivered }) > MAX_OUTCOMES) outcomes.shift();
            }),
          );
        }
        batch.extra.push(alert);
      }
    }
    return batch;
  };
}
