// Guardrail results at ingestion. The text a guardrail checked and the values it detected are what it may have
// blocked: by default only a masked preview of them is stored (the OpenAI Guardrails README asks integrators not to
// persist blocked content), whatever else the workspace policy does; `guardrailText` in the policy changes that. A
// tripped guardrail, from any source, is a finding (detector `guardrail`), so it is listed and feeds the alert rules.
import type { FindingRecord } from '../core/enrichment-records.ts';
import type { Processor } from '../core/ports/ingest.ts';
import type { Attributes, AttrValue, SpanRecord } from '../core/record.ts';
import { isTripwire } from './alerts.ts';
import type { PolicySource } from './governance-processor.ts';
import { maskToken } from './governance/mask.ts';
import type { Policy } from './governance/policy.ts';
import { redact } from './governance/redact.ts';
import { scanFull } from './governance/scan.ts';

/** Where a guardrail result's span keeps its `info` (mappers/guardrails.ts). */
export const GUARDRAIL_INFO = 'guardrail.info';

/**
 * Keys of a result's `info` holding values the guardrail found in the checked text: Contains PII
 * `detected_entities`, Secret Keys `detected_secrets`, URL Filter `detected`/`allowed`/`blocked`.
 */
export const VALUE_KEYS: ReadonlySet<string> = new Set([
  'detected_entities',
  'detected_secrets',
  'detected',
  'allowed',
  'blocked',
]);

/**
 * Keys of a result's `info` holding text that quotes the checked text or the conversation: `checked_text`, Secret
 * Keys `masked_text`, URL Filter `blocked_reasons`, Prompt Injection Detection `evidence`/`observation`/`user_goal`/
 * `action`/`recent_messages`(`_json`), Hallucination Detection statements, LLM checks' `reason`/`reasoning`.
 */
export const TEXT_KEYS: ReadonlySet<string> = new Set([
  'checked_text',
  'masked_text',
  'blocked_reasons',
  'evidence',
  'observation',
  'user_goal',
  'action',
  'recent_messages',
  'recent_messages_json',
  'hallucinated_statements',
  'verified_statements',
  'reason',
  'reasoning',
]);

/** Every key whose strings are masked unless the policy keeps guardrail text clear. */
export const DETECTED_KEYS: ReadonlySet<string> = new Set([...VALUE_KEYS, ...TEXT_KEYS]);

/** The longest preview kept of a checked text, in characters. */
export const PREVIEW_CHARS = 160;

export type GuardrailTextMode = NonNullable<Policy['guardrailText']>;

type Json = { [k: string]: AttrValue };
const isObj = (v: AttrValue | undefined): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Every string under the value keys of `info`: the values to mask wherever they appear. */
function detectedValues(info: Json): string[] {
  const out: string[] = [];
  const walk = (v: AttrValue) => {
    if (typeof v === 'string') {
      if (v.length >= 3) out.push(v);
    } else if (Array.isArray(v)) v.forEach(walk);
    else if (isObj(v)) Object.values(v).forEach(walk);
  };
  for (const k of Object.keys(info)) if (VALUE_KEYS.has(k)) walk(info[k]!);
  return [...new Set(out)].sort((a, b) => b.length - a.length);
}

/** `text` with every detector finding and every detected value masked, cut to `max` characters. */
export function maskedPreview(text: string, values: readonly string[], max = PREVIEW_CHARS): string {
  const spans = scanFull(text).map((f) => ({ start: f.start, end: f.end, category: f.category, severity: f.severity }));
  for (const v of values) {
    for (let at = text.indexOf(v); at >= 0; at = text.indexOf(v, at + v.length))
      spans.push({ start: at, end: at + v.length, category: 'guardrail', severity: 'low' }); // a detector's category wins
  }
  const masked = redact(text, spans).replace(/\s+/g, ' ').trim();
  return masked.length <= max ? masked : `${masked.slice(0, max - 1)}…`;
}

/**
 * A string under a detected key as stored: a detected value masked as a finding's preview is ('j***@c***.io'), or
 * as a token ('ht…(19)') when no detector knows it; a longer text (a reason quoting it) as a masked preview.
 */
function maskValue(v: string, values: readonly string[]): string {
  if (!values.includes(v)) return maskedPreview(v, values);
  const f = scanFull(v).find((x) => x.start === 0 && x.end === v.length);
  return f ? f.preview : maskToken(v, 2);
}

function maskInfo(v: AttrValue, values: readonly string[], mode: GuardrailTextMode): AttrValue {
  if (typeof v === 'string') return mode === 'omit' ? `[omitted](${v.length})` : maskValue(v, values);
  if (Array.isArray(v)) return v.map((x) => maskInfo(x, values, mode));
  if (isObj(v)) {
    const out: Json = {};
    for (const k of Object.keys(v)) out[k] = maskInfo(v[k]!, values, mode);
    return out;
  }
  return v;
}

const isResult = (span: SpanRecord) => span.source === 'guardrails' && span.kind === 'guardrail';

/** The values a guardrail result detected (its info's value keys), longest first. */
export function resultValues(span: SpanRecord): string[] {
  const info = span.attributes[GUARDRAIL_INFO];
  return isResult(span) && isObj(info) ? detectedValues(info) : [];
}

/**
 * A guardrail result's span as stored under `mode`: its checked text and detected values masked or left out.
 * `values`: what to mask wherever it appears (default its own detected values; the processor passes those of every
 * result of the same trace in the batch, so a URL one check blocked is masked in another's preview too).
 */
export function guardrailText(span: SpanRecord, mode: GuardrailTextMode, values = resultValues(span)): SpanRecord {
  if (mode === 'clear' || !isResult(span)) return span;
  const info = span.attributes[GUARDRAIL_INFO];
  const attributes: Attributes = { ...span.attributes, 'guardrail.text': mode };
  if (span.prompt) attributes['guardrail.checked_text_length'] = span.prompt.length;
  if (isObj(info)) {
    const kept: Json = {};
    for (const k of Object.keys(info)) kept[k] = DETECTED_KEYS.has(k) ? maskInfo(info[k]!, values, mode) : info[k]!;
    attributes[GUARDRAIL_INFO] = kept;
  }
  const prompt = mode === 'omit' || !span.prompt ? '' : maskedPreview(span.prompt, values);
  return { ...span, prompt, trainable: false, attributes };
}

/** The slug of a guardrail name in a finding's rule: `guardrail.contains_pii`. */
export function guardrailRule(name: string): string {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 64);
  return `guardrail.${slug || 'unnamed'}`;
}

function tripwireFinding(span: SpanRecord): FindingRecord {
  const a = span.attributes;
  const name = typeof a['guardrail.name'] === 'string' ? a['guardrail.name'] : span.name;
  const stage = typeof a['guardrail.stage'] === 'string' ? ` (${a['guardrail.stage']})` : '';
  return {
    recordType: 'finding',
    workspaceId: span.workspaceId,
    traceId: span.traceId,
    spanId: span.spanId,
    detector: 'guardrail',
    rule: guardrailRule(name),
    category: 'guardrail_tripwire',
    severity: 'high',
    field: 'attribute:guardrail.tripwire_triggered',
    start: 0,
    end: 0,
    preview: `${name}${stage} tripped`.slice(0, 200),
    score: 1,
    action: 'flag',
    // As governance stamps its records: with the span version's time, so reads keep those of the version stored.
    createdAtMs: span.ingestedAtMs || Date.now(),
  };
}

/**
 * After governance (which scanned the clear text: its findings hold masked previews only) and before alerts (which
 * count the tripwire findings). `findings` off (enrichment off): the text is masked all the same.
 */
export function guardrailProcessor(policies: PolicySource, findings = true): Processor {
  return async (batch) => {
    const modes = new Map<string, GuardrailTextMode>();
    const modeOf = async (ws: string) => {
      let m = modes.get(ws);
      if (!m) modes.set(ws, (m = (await policies.policyFor(ws)).guardrailText ?? 'preview'));
      return m;
    };
    const values = new Map<string, Set<string>>();
    const traceKey = (s: SpanRecord) => `${s.workspaceId}\n${s.traceId}`;
    for (const span of batch.spans) {
      const found = resultValues(span);
      if (found.length === 0) continue;
      const set = values.get(traceKey(span)) ?? values.set(traceKey(span), new Set()).get(traceKey(span))!;
      for (const v of found) set.add(v);
    }
    for (let i = 0; i < batch.spans.length; i++) {
      const span = batch.spans[i]!;
      if (span.kind !== 'guardrail') continue;
      if (isResult(span)) {
        const all = [...(values.get(traceKey(span)) ?? [])].sort((a, b) => b.length - a.length);
        batch.spans[i] = guardrailText(span, await modeOf(span.workspaceId), all);
      }
      if (findings && isTripwire(span)) batch.extra.push(tripwireFinding(span));
    }
    return batch;
  };
}
