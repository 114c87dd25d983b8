// scanText: every detector over one string; scanRecordSlots / scanRecordFields: every string a record holds.
import type { AttrValue, Attributes, SpanRecord } from '../../core/record.ts';
import { detectInjection, type InjectionOptions } from './injection.ts';
import { detectPii } from './pii.ts';
import { detectSecrets } from './secrets.ts';
import type { FieldFinding, FieldName } from '../../core/governance.ts';
import { SEVERITY_RANK, type DetectorKind, type Finding } from './types.ts';
import { redact } from './redact.ts';

export interface ScanOptions {
  /** Which detectors to run (default all three). */
  detectors?: readonly DetectorKind[];
  injection?: InjectionOptions;
}

const ALL: readonly DetectorKind[] = ['pii', 'secret', 'injection'];

/**
 * Drop a PII/secret finding that lies entirely inside another PII/secret finding that is longer (or as long and
 * at least as severe): a phone number inside a card, an IPv4 inside an IPv6. The outer one is what a redaction
 * needs. Injection findings describe phrases rather than values and only exact duplicates are dropped.
 * Linear after the sort: with starts ascending and, on ties, ends descending then severity descending, an
 * earlier kept finding contains this one exactly when the largest end kept so far reaches this one's end.
 */
function resolveOverlaps(findings: Finding[]): Finding[] {
  findings.sort((a, b) => a.start - b.start || b.end - a.end || SEVERITY_RANK[b.severity] - SEVERITY_RANK[a.severity]);
  const out: Finding[] = [];
  let maxEnd = -1;
  const seen = new Set<string>();
  for (const f of findings) {
    if (f.detector === 'injection') {
      const key = `${f.rule}:${f.start}:${f.end}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(f);
      continue;
    }
    if (f.end <= maxEnd) continue;
    maxEnd = f.end;
    out.push(f);
  }
  return out;
}

/** Run the detectors on one string. Findings are sorted by start offset; the text is scanned whole. */
export function scanText(text: string, options: ScanOptions = {}): Finding[] {
  if (text.length === 0) return [];
  const use = options.detectors ?? ALL;
  // concat, not push(...): an adversarial text can yield more findings than a call may take arguments.
  let found: Finding[] = [];
  if (use.includes('pii')) found = found.concat(detectPii(text));
  if (use.includes('secret')) found = found.concat(detectSecrets(text));
  if (use.includes('injection')) found = found.concat(detectInjection(text, options.injection));
  return found.length > 1 ? resolveOverlaps(found) : found;
}

// ---- records

/** Where a scanned string sits in a span record (what redaction needs to write it back). */
export type Path = Array<string | number>;
/** Short free-text fields of a record that a client fills in (and may paste anything into). */
export const LABEL_FIELDS = [
  'actionName',
  'environment',
  'requestId',
  'finishReason',
  'status',
  'model',
  'provider',
] as const;
export type LabelField = (typeof LABEL_FIELDS)[number];

export type TextLocation =
  | { kind: 'prompt' }
  | { kind: 'response' }
  | { kind: 'name' }
  | { kind: 'statusMessage' }
  | { kind: 'label'; field: LabelField }
  | { kind: 'attribute'; path: Path; key?: true }
  | { kind: 'resource'; path: Path; key?: true }
  | { kind: 'eventName'; event: number }
  | { kind: 'eventAttribute'; event: number; path: Path; key?: true };

export type { FieldFinding, FieldName } from '../../core/governance.ts';

/**
 * Every string a record holds is scanned, whole: prompt, response, span name, status message, the labels
 * (action, environment, request id, finish reason, status, model, provider), attribute and resource-attribute keys
 * and values (nested objects and arrays walked), event names, event attribute keys and values.
 * Nothing is skipped for size: a value longer than SCAN_WINDOW is scanned in overlapping windows, so cost is
 * linear in the request, which the route's body limit bounds. Attribute keys and strings shorter than 6
 * characters cannot hold anything a detector reports and are skipped.
 */
export const SCAN_WINDOW = 512 * 1024;
/** Longer than any single match a detector reports (a private key block is capped at 32 Ki). */
export const SCAN_OVERLAP = 64 * 1024;
const MIN_ATTR_LEN = 6;

/** Every detector over the whole of `text`, in overlapping windows when it is long; offsets into `text`. */
export function scanFull(text: string, options?: ScanOptions): Finding[] {
  if (text.length <= SCAN_WINDOW) return scanText(text, options);
  const step = SCAN_WINDOW - SCAN_OVERLAP;
  let out: Finding[] = [];
  for (let at = 0; ; at += step) {
    const last = at + SCAN_WINDOW >= text.length;
    // A match shorter than the overlap that starts in [at, at + step) lies wholly inside this window. A finding
    // may report less than its match (a key after its `secret_key =` context): windows after the first begin
    // LEAD characters early, and each window keeps findings starting in [its start, next window's start).
    const from = at === 0 ? 0 : at - LEAD;
    const kept = scanText(text.slice(from, at + SCAN_WINDOW), options).filter(
      (f) => (at === 0 || f.start >= LEAD) && (last || f.start + from < at + step),
    );
    out = out.concat(from === 0 ? kept : kept.map((f) => ({ ...f, start: f.start + from, end: f.end + from })));
    if (last) return out.length > 1 ? resolveOverlaps(out) : out;
  }
}

/** Longer than any context a detector matches before the part it reports. */
const LEAD = 1024;

export interface TextSlot {
  /** The field's name; attribute slots have `base` and `path` instead (see slotField: built only when needed). */
  field?: FieldName;
  value: string;
  at: TextLocation;
  /** In attributes: the field name's prefix (`attribute:`, `resource:`, `event[i]:`) and the value's path, so a
   * key with a finding can be named masked in every field name that contains it. */
  base?: string;
  path?: Path;
  /** The value is an object key (at.path ends with it), not a string value. */
  key?: true;
  /** A span attribute or a gen_ai.* event attribute: where instrumentations put the conversation that the
   * prompt and response are derived from (gen_ai.input.messages, llm.input_messages.N.*, gen_ai.prompt.N.*, …). */
  conversation?: true;
}

function pathKey(path: Path): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : s.length === 0 ? p : `.${p}`;
  return s;
}

/** A slot's field name: `prompt`, `actionName`, …, or `attribute:a.b[0]` (with ` (key)` for a key). */
export function slotField(slot: TextSlot): FieldName {
  return slot.field ?? maskedFieldName(slot.base!, slot.path!, NO_MASKS, slot.key);
}

const NO_MASKS: ReadonlyMap<string, string> = new Map();

/**
 * The field name of `path` under `base` (`attribute:`, `request:`), ` (key)` appended for a key. Field names are
 * stored and shown: a key segment with a finding appears as `masked` has it (keyed by base + JSON of its path).
 */
export function maskedFieldName(base: string, path: Path, masked: ReadonlyMap<string, string>, key = false): FieldName {
  const segs =
    masked.size === 0
      ? path
      : path.map((seg, j) =>
          typeof seg === 'string' ? (masked.get(base + JSON.stringify(path.slice(0, j + 1))) ?? seg) : seg,
        );
  return `${base}${pathKey(segs)}${key ? ' (key)' : ''}`;
}

// Attribute keys that every detector found clean: most repeat on every span ('gen_ai.usage.input_tokens'), so
// they are not made slots again (process-wide, bounded like shortMemo). Scan results are pure, so this is safe.
const cleanKeys = new Set<string>();
function rememberCleanKey(k: string): void {
  if (cleanKeys.size >= MEMO_MAX) cleanKeys.clear();
  cleanKeys.add(k);
}

function attributeSlots(
  attrs: Attributes,
  base: string,
  at: (path: Path) => TextLocation,
  out: TextSlot[],
  conversation: boolean,
  skipClean: boolean,
): void {
  // Keys too: a client names attributes and map entries as it likes (an e-mail address as a metadata key, say).
  // Every span repeats most keys: no strings are built here (slotField names a slot only when it is reported).
  const key = (k: string, path: Path) => {
    if (k.length < MIN_ATTR_LEN || (skipClean && cleanKeys.has(k))) return;
    const loc = at(path) as TextLocation & { key?: true };
    loc.key = true;
    out.push({ value: k, at: loc, base, path, key: true });
  };
  const walk = (v: AttrValue, path: Path): void => {
    if (typeof v === 'string') {
      if (v.length < MIN_ATTR_LEN) return;
      const value = unescapedJson(v);
      out.push(conversation ? { value, at: at(path), base, path, conversation } : { value, at: at(path), base, path });
      return;
    }
    // A card or phone number sent as a number (`{"card": 4111111111111111}`); redacted, it becomes a string.
    if (typeof v === 'number') {
      if (Number.isSafeInteger(v) && Math.abs(v) >= 1_000_000) out.push({ value: String(v), at: at(path), base, path });
      return;
    }
    if (v === null || typeof v !== 'object') return;
    if (Array.isArray(v))
      v.forEach((x, i) => {
        walk(x, [...path, i]);
      });
    else
      for (const k of Object.keys(v)) {
        const p = [...path, k];
        key(k, p);
        walk(v[k]!, p);
      }
  };
  for (const k of Object.keys(attrs)) {
    const p = [k];
    key(k, p);
    walk(attrs[k]!, p);
  }
}

/**
 * A JSON document held as a string (gen_ai.input.messages and its kind) written with \u escapes, as Python's
 * json.dumps writes any non-ASCII text by default: `tcz@\u4f8b\u5b50.\u516c\u53f8` hides an address from every
 * detector. Such a value is scanned (and, when redacted, stored) as the same JSON without the escapes.
 */
function unescapedJson(v: string): string {
  if (!v.includes('\\u')) return v;
  const c = v.trimStart()[0];
  if (c !== '[' && c !== '{' && c !== '"') return v;
  try {
    return JSON.stringify(JSON.parse(v));
  } catch {
    // Not whole (cut at a length limit, say): the escapes alone are undone.
    return v.replace(/\\u([0-9a-fA-F]{4})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
}

export type RecordFields = Pick<SpanRecord, 'prompt' | 'response' | 'attributes'> &
  Partial<Pick<SpanRecord, 'name' | 'statusMessage' | 'resourceAttributes' | 'events' | LabelField>>;

/** Every string of a record, prompt and response first (a value repeated later is attributed to them). */
export function textSlots(record: RecordFields, skipCleanKeys = false): TextSlot[] {
  const out: TextSlot[] = [];
  if (record.prompt) out.push({ field: 'prompt', value: record.prompt, at: { kind: 'prompt' } });
  if (record.response) out.push({ field: 'response', value: record.response, at: { kind: 'response' } });
  if (record.name && record.name.length >= MIN_ATTR_LEN)
    out.push({ field: 'name', value: record.name, at: { kind: 'name' } });
  if (record.statusMessage)
    out.push({ field: 'status_message', value: record.statusMessage, at: { kind: 'statusMessage' } });
  for (const field of LABEL_FIELDS) {
    const v = record[field];
    if (typeof v === 'string' && v.length >= MIN_ATTR_LEN) out.push({ field, value: v, at: { kind: 'label', field } });
  }
  attributeSlots(record.attributes, 'attribute:', (path) => ({ kind: 'attribute', path }), out, true, skipCleanKeys);
  if (record.resourceAttributes)
    attributeSlots(
      record.resourceAttributes,
      'resource:',
      (path) => ({ kind: 'resource', path }),
      out,
      false,
      skipCleanKeys,
    );
  record.events?.forEach((e, event) => {
    if (e.name.length >= MIN_ATTR_LEN)
      out.push({ field: `event[${event}].name`, value: e.name, at: { kind: 'eventName', event } });
    attributeSlots(
      e.attributes,
      `event[${event}]:`,
      (path) => ({ kind: 'eventAttribute', event, path }),
      out,
      e.name.startsWith('gen_ai.'),
      skipCleanKeys,
    );
  });
  return out;
}

/**
 * A slot with what the detectors found in it. `repeat`: the same string occurred in an earlier slot (an
 * instrumentation copying the prompt into `input.value`, say); it is scanned once and its findings are reported
 * once, but redaction applies to every copy.
 */
export interface SlotFindings {
  slot: TextSlot;
  findings: Finding[];
  repeat: boolean;
}

/**
 * Shared by the records of one batch: a string is scanned once per batch, and the resource and scope
 * attributes every span of a request repeats are reported for the first span only (scanning them per span
 * would make a request's cost its resource size times its span count).
 */
export interface ScanCache {
  findings: Map<string, Finding[]>;
  reportedShared: Set<string>;
}
export const newScanCache = (): ScanCache => ({ findings: new Map(), reportedShared: new Set() });

const sharedSlot = (at: TextLocation) =>
  at.kind === 'resource' || (at.kind === 'attribute' && at.path[0] === 'otel.scope.attributes');

// Labels and short attribute values repeat across requests ('production', the model, an action name): their
// (pure) scan result is remembered process-wide, in a bounded map cleared when full. Not prompts, responses or
// request ids: those rarely repeat, and user text should not outlive its request in memory.
const memoizable = (at: TextLocation) =>
  (at.kind === 'label' && at.field !== 'requestId') ||
  at.kind === 'attribute' ||
  at.kind === 'resource' ||
  at.kind === 'name';
const SHORT = 128;
const MEMO_MAX = 20_000;
const shortMemo = new Map<string, Finding[]>();
function scanShortMemo(value: string): Finding[] {
  if (value.length > SHORT) return scanFull(value);
  let f = shortMemo.get(value);
  if (f === undefined) {
    if (shortMemo.size >= MEMO_MAX) shortMemo.clear();
    shortMemo.set(value, (f = scanFull(value)));
  }
  return f;
}

/** The slots of a record that have findings. */
export function scanRecordSlots(
  record: RecordFields,
  options?: ScanOptions,
  cache: ScanCache = newScanCache(),
): SlotFindings[] {
  const seen = new Set<string>();
  const out: SlotFindings[] = [];
  for (const slot of textSlots(record, !options)) {
    let findings = cache.findings.get(slot.value);
    if (!findings)
      cache.findings.set(
        slot.value,
        (findings = options || !memoizable(slot.at) ? scanFull(slot.value, options) : scanShortMemo(slot.value)),
      );
    if (slot.key && !options && findings.length === 0 && slot.value.length <= SHORT) rememberCleanKey(slot.value);
    let repeat = seen.has(slot.value);
    seen.add(slot.value);
    if (sharedSlot(slot.at)) {
      const key = `${slotField(slot)}\u0000${slot.value}`;
      if (cache.reportedShared.has(key)) repeat = true;
      else cache.reportedShared.add(key);
    }
    if (findings.length) out.push({ slot, findings, repeat });
  }
  return out;
}

/**
 * The findings to report from scanned slots, each naming its field. A repeated value's are reported once, and so
 * is a match in a conversation attribute that the prompt or response already has (same rule, same matched text):
 * a GenAI span carries its messages both as the prompt and response and in their source attributes, often in
 * two conventions, and one e-mail address in one message is one finding, not three. Redaction still covers
 * every copy; only the report is deduplicated.
 */
export function reportedFindings(scans: readonly SlotFindings[]): FieldFinding[] {
  const out: FieldFinding[] = [];
  const inText = new Set<string>();
  // Field names are stored and shown: a key with findings is named masked, also in the names of values under it.
  const masked = new Map<string, string>();
  for (const s of scans)
    if (s.slot.key) masked.set(s.slot.base + JSON.stringify(s.slot.path), redact(s.slot.value, s.findings));
  const fieldOf = (slot: TextSlot): FieldName =>
    slot.path ? maskedFieldName(slot.base!, slot.path, masked, slot.key) : slotField(slot);
  for (const s of scans) {
    if (s.repeat) continue;
    const text = s.slot.at.kind === 'prompt' || s.slot.at.kind === 'response';
    for (const f of s.findings) {
      if (text || s.slot.conversation) {
        const key = `${f.rule}\u0000${s.slot.value.slice(f.start, f.end)}`;
        if (text) inText.add(key);
        else if (inText.has(key)) continue;
      }
      out.push({ ...f, field: fieldOf(s.slot) });
    }
  }
  return out;
}

/** Findings of a record, each naming its field; a repeated value's findings are reported once. */
export function scanRecordFields(record: RecordFields, options?: ScanOptions): FieldFinding[] {
  return reportedFindings(scanRecordSlots(record, options));
}
