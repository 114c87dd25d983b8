// POST /api/ingest/webhooks: an external scanner's alert (any JSON object: every scanner differs) → one security-alert
// record: the body as received, plus what is read from the known paths of scanners' payloads and from the delivery's
// headers: source, severity, title, category, external id, detection time, and the correlation keys (trace, span,
// request, response, session and user ids: first hit wins, every hit kept).
import { createHash } from 'node:crypto';
import type { AlertSignature, SecurityAlertRecord } from '../core/enrichment-records.ts';
import type { Severity } from '../core/governance.ts';
import { LATEST_STORABLE_NS } from '../core/record.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

/** Where scanners and relays put each correlation key (reference: ingest-signals-export-sdk.md §3.3), in order. */
export const CORRELATION_PATHS: Readonly<Record<CorrelationKey, readonly string[]>> = {
  trace_id: [
    'trace_id',
    'traceId',
    'trace.id',
    'otel.trace_id',
    'context.trace_id',
    'metadata.trace_id',
    'attributes.trace_id',
  ],
  span_id: ['span_id', 'spanId', 'observation_id', 'gen_ai.guardrail.target.id', 'metadata.span_id'],
  request_id: [
    'request_id',
    'requestId',
    'request_uuid',
    'metadata.request_uuid',
    'metadata.request_id',
    'helicone_id',
  ],
  response_id: [
    'response_id',
    'responseId',
    'gen_ai.response.id',
    'completion_id',
    'response.id',
    'metadata.response_id',
  ],
  session_id: [
    'session_id',
    'sessionId',
    'conversation_id',
    'gen_ai.conversation.id',
    'thread_id',
    'session.id',
    'metadata.session_id',
  ],
  user_id: ['user_id', 'userId', 'user.id', 'end_user', 'actor.id', 'sender.login', 'metadata.user_id'],
};
export type CorrelationKey = 'trace_id' | 'span_id' | 'request_id' | 'response_id' | 'session_id' | 'user_id';

/** Headers that carry correlation keys: W3C traceparent (trace and span id), and request ids relays pass on. */
const HEADER_KEYS: ReadonlyArray<[string, CorrelationKey]> = [
  ['x-trace-id', 'trace_id'],
  ['x-request-id', 'request_id'],
  ['x-correlation-id', 'request_id'],
];

/** Envelopes scanners wrap their alert in: paths are tried at the top, then under each of these. */
const ENVELOPES = ['alert', 'data', 'event', 'payload', 'finding', 'issue', 'incident', 'detail'];

const FIELD_PATHS = {
  source: ['source', 'vendor', 'scanner', 'provider', 'tool.name', 'tool', 'product', 'integration', 'service'],
  severity: [
    'severity',
    'severity_level',
    'security_severity_level',
    'level',
    'priority',
    'risk_level',
    'risk',
    'security.risk.score',
    'score',
  ],
  title: [
    'title',
    'name',
    'summary',
    'secret_type_display_name',
    'rule.name',
    'rule.description',
    'message',
    'description',
    'check_id',
    'event',
  ],
  category: [
    'category',
    'security.risk.category',
    'type',
    'kind',
    'detector_type',
    'secret_type',
    'threat_type',
    'pluginId',
    'plugin_id',
    'rule_id',
    'rule.id',
    'check_id',
    'breakdown.0.detector_type',
  ],
  externalId: [
    'id',
    'alert_id',
    'alertId',
    'finding_id',
    'incident_id',
    'event_id',
    'uuid',
    'external_id',
    'security.external_finding_id',
    'number',
  ],
  detectedAt: [
    'detected_at',
    'detectedAt',
    'created_at',
    'createdAt',
    'timestamp',
    'time',
    'occurred_at',
    'event_time',
  ],
} as const;

/** Senders told apart by their own headers when the body does not name its source. */
const SOURCE_HEADERS: ReadonlyArray<[string, string]> = [
  ['x-github-event', 'github'],
  ['x-snyk-event', 'snyk'],
  ['x-semgrep-signature-256', 'semgrep'],
  ['x-gitguardian-signature', 'gitguardian'],
];

/** The value at a dotted path: a key holding dots itself (`gen_ai.response.id`) first, then nested objects (and array indexes). */
function at(obj: Json | undefined, path: string): Json | undefined {
  if (obj === null || typeof obj !== 'object') return undefined;
  if (!Array.isArray(obj) && Object.hasOwn(obj, path)) return obj[path];
  // Each split point in turn: the head as a key (or an array index), the rest below it.
  for (let i = path.indexOf('.'); i >= 0; i = path.indexOf('.', i + 1)) {
    const head = path.slice(0, i);
    let next: Json | undefined;
    if (Array.isArray(obj)) next = /^\d+$/.test(head) ? obj[Number(head)] : undefined;
    else next = Object.hasOwn(obj, head) ? obj[head] : undefined;
    const found = next === undefined ? undefined : at(next, path.slice(i + 1));
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Scalar text of a value (strings and numbers), trimmed, at most `max` characters; '' otherwise. */
function scalar(v: Json | undefined, max = 256): string {
  if (typeof v === 'string') return v.trim().slice(0, max);
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return '';
}

/**
 * Every place a path is looked for: the body itself, then the envelopes in it (an alert under `alert`, `data`, …, or
 * under the one key of a body that has just one, as Semgrep's `semgrep_finding`), and the envelopes in those.
 */
function roots(body: Obj): Array<{ prefix: string; obj: Json }> {
  const out: Array<{ prefix: string; obj: Json }> = [{ prefix: '', obj: body }];
  const isObj = (v: Json | undefined): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v);
  const inner = (o: Obj, prefix: string, depth: number) => {
    const keys = Object.keys(o);
    const names = keys.length === 1 && depth === 0 ? [...ENVELOPES, keys[0]!] : ENVELOPES;
    for (const e of new Set(names)) {
      const v = o[e];
      if (!isObj(v)) continue;
      out.push({ prefix: `${prefix}${e}.`, obj: v });
      if (depth < 1) inner(v, `${prefix}${e}.`, depth + 1);
    }
  };
  inner(body, '', 0);
  return out;
}

/** The first non-empty value at any of `paths`, with where it was found. */
function first(body: Obj, paths: readonly string[], max?: number): { from: string; value: string } | null {
  for (const { prefix, obj } of roots(body))
    for (const p of paths) {
      const value = scalar(at(obj, p), max);
      if (value) return { from: `${prefix}${p}`, value };
    }
  return null;
}

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}/;
const PRINTABLE_ID = /^[\x21-\x7e]{1,256}$/;
const ZERO = /^0+$/;

/** A correlation id as stored: printable ASCII without spaces, hex ids lower-cased, all-zero ids refused. */
function correlationId(v: string): string {
  if (!PRINTABLE_ID.test(v)) return '';
  const lower = /^[0-9A-Fa-f]+$/.test(v) && (v.length === 32 || v.length === 16) ? v.toLowerCase() : v;
  return ZERO.test(lower) ? '' : lower;
}

export interface Correlation {
  /** The first hit of each key. */
  keys: Record<CorrelationKey, string>;
  /** Every hit, per key: where it came from and its value. */
  hits: Partial<Record<CorrelationKey, Array<{ from: string; value: string }>>>;
}

/** The correlation keys of a delivery, from its headers (traceparent first) and the body's known paths. */
export function correlate(body: Obj, headers: Readonly<Record<string, string | undefined>>): Correlation {
  const hits: Correlation['hits'] = {};
  const add = (key: CorrelationKey, from: string, raw: string) => {
    const value = correlationId(raw);
    if (!value) return;
    const list = (hits[key] ??= []);
    if (!list.some((h) => h.value === value && h.from === from)) list.push({ from, value });
  };
  const tp = TRACEPARENT.exec(headers.traceparent ?? '');
  if (tp) {
    add('trace_id', 'header:traceparent', tp[1]!);
    add('span_id', 'header:traceparent', tp[2]!);
  }
  for (const [h, key] of HEADER_KEYS) if (headers[h]) add(key, `header:${h}`, headers[h]!);
  for (const { prefix, obj } of roots(body)) {
    const inner = scalar(at(obj, 'traceparent'), 512);
    const m = TRACEPARENT.exec(inner);
    if (m) {
      add('trace_id', `${prefix}traceparent`, m[1]!);
      add('span_id', `${prefix}traceparent`, m[2]!);
    }
    for (const [key, paths] of Object.entries(CORRELATION_PATHS) as Array<[CorrelationKey, readonly string[]]>)
      for (const p of paths) {
        const v = scalar(at(obj, p), 512);
        if (v) add(key, `${prefix}${p}`, v);
      }
  }
  const keys = {} as Record<CorrelationKey, string>;
  for (const k of Object.keys(CORRELATION_PATHS) as CorrelationKey[]) keys[k] = hits[k]?.[0]?.value ?? '';
  return { keys, hits };
}

const WORDS: ReadonlyArray<[RegExp, Severity]> = [
  [/^(critical|crit|fatal|emergency|emerg|blocker|p0|sev0|sev-0|s0)$/, 'critical'],
  [/^(high|error|err|severe|major|alert|p1|sev1|sev-1|s1|danger)$/, 'high'],
  [/^(medium|moderate|med|warn|warning|p2|sev2|sev-2|s2)$/, 'medium'],
  [/^(low|info|informational|information|note|notice|minor|debug|none|unknown|p3|p4|sev3|sev4|s3|s4)$/, 'low'],
];

/** A scanner's severity in tracegate's four levels: words and levels as scanners write them, scores 0-10 (or 0-1). */
export function normalizeSeverity(raw: string): Severity | null {
  const s = raw.trim().toLowerCase();
  if (!s) return null;
  for (const [re, level] of WORDS) if (re.test(s)) return level;
  if (/^\d+(\.\d+)?$/.test(s)) {
    const n = Number(s);
    const score = n <= 1 && s.includes('.') ? n * 10 : n;
    if (score >= 9) return 'critical';
    if (score >= 7) return 'high';
    if (score >= 4) return 'medium';
    return 'low';
  }
  return null;
}

const LATEST_MS = Number(LATEST_STORABLE_NS / 1_000_000n);

/** A detection time: ISO 8601, or epoch seconds or milliseconds; null when it is neither or out of range. */
function timeOf(raw: string): number | null {
  if (/^\d{9,10}(\.\d+)?$/.test(raw)) return Math.round(Number(raw) * 1000);
  if (/^\d{12,13}$/.test(raw)) return Number(raw);
  if (!/^\d{4}-\d{2}-\d{2}/.test(raw)) return null;
  const ms = Date.parse(raw);
  return Number.isFinite(ms) && ms >= 0 && ms <= LATEST_MS ? ms : null;
}

/** What the receiver knows of a delivery besides its body. */
export interface Delivery {
  workspaceId: string;
  /** The body's bytes as received (the record keeps them as text; the id follows from them). */
  raw: Buffer;
  body: Obj;
  /** Lower-case header names. */
  headers: Readonly<Record<string, string | undefined>>;
  receivedAtMs: number;
  signature: AlertSignature;
  secretId: string;
  /** Trace ids of response ids the proxy recorded (the receiver looks them up before mapping). */
  responseTraces: ReadonlyMap<string, string>;
  /** A source named by the sender in the query string (?source=), when the body names none. */
  source?: string;
}

/** The alert's id: from the workspace and the body, so a redelivery (signed again or not) is the same record. */
export function alertIdOf(workspaceId: string, raw: Buffer): string {
  return createHash('sha256').update(`security_alert\n${workspaceId}\n`).update(raw).digest('hex').slice(0, 32);
}

export function mapSecurityAlert(d: Delivery): SecurityAlertRecord {
  const b = d.body;
  const corr = correlate(b, d.headers);
  const rawSeverity = first(b, FIELD_PATHS.severity, 64)?.value ?? '';
  const detected = first(b, FIELD_PATHS.detectedAt, 64);
  const headerSource = SOURCE_HEADERS.find(([h]) => d.headers[h])?.[1];
  const linked =
    corr.keys.trace_id || (corr.keys.response_id ? (d.responseTraces.get(corr.keys.response_id) ?? '') : '');
  return {
    recordType: 'security_alert',
    workspaceId: d.workspaceId,
    alertId: alertIdOf(d.workspaceId, d.raw),
    source: first(b, FIELD_PATHS.source, 128)?.value || d.source || headerSource || 'unknown',
    severity: normalizeSeverity(rawSeverity) ?? 'medium',
    rawSeverity,
    title: first(b, FIELD_PATHS.title, 512)?.value ?? '',
    category: first(b, FIELD_PATHS.category, 128)?.value ?? '',
    externalId:
      first(b, FIELD_PATHS.externalId, 256)?.value || d.headers['x-github-delivery'] || d.headers['webhook-id'] || '',
    detectedAtMs: (detected && timeOf(detected.value)) ?? d.receivedAtMs,
    receivedAtMs: d.receivedAtMs,
    traceId: linked,
    spanId: corr.keys.span_id,
    requestId: corr.keys.request_id,
    responseId: corr.keys.response_id,
    sessionId: corr.keys.session_id,
    userId: corr.keys.user_id,
    signature: d.signature,
    secretId: d.secretId,
    correlation: JSON.stringify(corr.hits),
    body: d.raw.toString('utf8'),
  };
}

export type { Json, Obj };
