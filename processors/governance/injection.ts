// Prompt-injection detector: invisible-character findings plus phrase-family scoring over normalised text.
import { entropy } from './checksums.ts';
import { INJECTION_FAMILIES, type InjectionFamily, type InjectionPattern } from './injection-rules.ts';
import { excerpt } from './mask.ts';
import { normalizeForInjection, originalSpan, type Normalized, type InvisibleRun } from './normalize.ts';
import { detectPii } from './pii.ts';
import { redact } from './redact.ts';
import { detectSecrets } from './secrets.ts';
import type { Finding, Severity } from './types.ts';

export interface InjectionOptions {
  /** Phrase findings are emitted only when the text's score reaches this (default 0.35). */
  threshold?: number;
  /** At most this many findings per family and this many invisible-text runs (default 16 / 64). */
  maxPerFamily?: number;
  maxInvisibleRuns?: number;
}

export interface InjectionResult {
  score: number;
  /** Matched phrase families (and invisible text) with the weight each contributed to the score. */
  families: Array<{ rule: string; weight: number }>;
  findings: Finding[];
}

export const DEFAULT_INJECTION_THRESHOLD = 0.35;

export function severityForScore(score: number): Severity {
  if (score >= 0.85) return 'critical';
  if (score >= 0.6) return 'high';
  if (score >= 0.4) return 'medium';
  return 'low';
}

interface Hit {
  family: InjectionFamily;
  weight: number;
  start: number;
  end: number;
  phrase: string;
  /** Found in text spelled by tag characters: the original span is invisible, the phrase is what it says. */
  hidden?: boolean;
}

interface Trigger {
  word: string;
  third: number;
  wholeWord: boolean;
  patterns: Array<{ family: number; pattern: InjectionPattern }>;
}

// Triggers bucketed by their first two characters (ASCII), so the scan does one array lookup per word start.
// A trigger ending in a letter must end a word, so at most one alphabetic trigger fires per position.
const BUCKETS: Array<Trigger[] | undefined> = new Array(128 * 128);
const PUNCT_STARTS = new Set<number>();
INJECTION_FAMILIES.forEach((family, fi) => {
  for (const pattern of family.patterns) {
    for (const word of pattern.triggers) {
      const k = (word.charCodeAt(0) & 127) * 128 + (word.charCodeAt(1) & 127);
      const bucket = (BUCKETS[k] ??= []);
      let t = bucket.find((x) => x.word === word);
      if (!t) {
        t = { word, third: word.length > 2 ? word.charCodeAt(2) : -1, wholeWord: /[a-z]$/.test(word), patterns: [] };
        bucket.push(t);
      }
      t.patterns.push({ family: fi, pattern });
      if (!/[a-z]/.test(word[0]!)) PUNCT_STARTS.add(word.charCodeAt(0));
    }
  }
});

// ASCII character classes for the trigger scan: 1 letter (a-z), 2 other word char, 3 punctuation trigger start.
// Non-ASCII code units count as separators (so a word after a curly quote or an ellipsis is still a word start).
const CLS = new Uint8Array(128);
for (let c = 97; c <= 122; c++) CLS[c] = 1;
for (let c = 65; c <= 90; c++) CLS[c] = 2;
for (let c = 48; c <= 57; c++) CLS[c] = 2;
CLS[95] = 2;
for (const c of PUNCT_STARTS) CLS[c] = 3;

/** The segment's code units as a typed array: indexing one is about twice as fast as charCodeAt in V8. */
function codeUnits(segment: string, ascii: boolean): Uint8Array | Uint16Array {
  if (ascii) return Buffer.from(segment, 'latin1');
  const u = new Uint16Array(segment.length);
  for (let i = 0; i < segment.length; i++) u[i] = segment.charCodeAt(i);
  return u;
}

function atLineStart(text: string, i: number): boolean {
  for (let j = i - 1; j >= 0; j--) {
    const c = text.charCodeAt(j);
    if (c === 10) return true;
    if (c !== 32 && c !== 9 && c !== 13) return false;
  }
  return true;
}

/** Separators of letter-spaced text ('i g n o r e', 'i.g.n.o.r.e', 'i-g-n-o-r-e'). */
function isSpacer(c: number): boolean {
  return c === 32 || c === 46 || c === 45 || c === 42;
}

/**
 * One pass over `segment`: at each word start (or punctuation trigger) run the patterns its trigger selects.
 * With `spaced`, also collect where six or more one-letter words follow each other closely (letter-spaced text).
 */
function matchFamilies(
  segment: string,
  ascii: boolean,
  spanOf: (s: number, e: number) => [number, number],
  maxPerFamily: number,
  hits: Hit[],
  hidden = false,
  spaced: number[] | null = null,
  counts = new Array<number>(INJECTION_FAMILIES.length).fill(0),
): void {
  const codes = codeUnits(segment, ascii);
  const n = codes.length;
  let prevWord = false;
  let singles = 0;
  let lastSingle = -8;
  let singlesFrom = 0;
  for (let i = 0; i < n - 1; i++) {
    const c = codes[i]!;
    const cls = c < 128 ? CLS[c]! : 0;
    if (cls !== 1) {
      prevWord = cls === 2;
      if (cls !== 3) continue;
    } else {
      if (prevWord) continue;
      prevWord = true;
      if (spaced !== null && isSpacer(codes[i + 1]!)) {
        let apart = i - lastSingle > 4;
        for (let k = lastSingle + 1; !apart && k < i; k++) apart = codes[k] === 10; // a line break ends a run
        if (apart) {
          singles = 0;
          singlesFrom = i;
        }
        lastSingle = i;
        if (++singles === 6) spaced.push(singlesFrom);
      }
    }
    const bucket = BUCKETS[c * 128 + (codes[i + 1]! & 127)];
    if (bucket === undefined) continue;
    for (let b = 0; b < bucket.length; b++) {
      const t = bucket[b]!;
      if ((t.third !== -1 && codes[i + 2] !== t.third) || !segment.startsWith(t.word, i)) continue;
      if (t.wholeWord && i + t.word.length < n) {
        const after = codes[i + t.word.length]!;
        if (after < 128 && (CLS[after] === 1 || CLS[after] === 2)) continue;
      }
      for (let k = 0; k < t.patterns.length; k++) {
        const { family, pattern } = t.patterns[k]!;
        if (counts[family]! >= maxPerFamily) continue;
        if (pattern.lineStart && !atLineStart(segment, i)) continue;
        pattern.re.lastIndex = i;
        const m = pattern.re.exec(segment);
        if (m === null) continue;
        const [start, end] = spanOf(i, i + m[0].length);
        hits.push({ family: INJECTION_FAMILIES[family]!, weight: pattern.weight, start, end, phrase: m[0], hidden });
        counts[family]!++;
      }
    }
  }
}

/**
 * One finding per phrase: overlapping hits of one family ('you are now DAN' matches a strong and a weak
 * role-override pattern) keep the strongest (the longest on a tie). The family's weight is unchanged.
 */
function dedupeHits(hits: Hit[]): Hit[] {
  if (hits.length < 2) return hits;
  const order = new Map(INJECTION_FAMILIES.map((f, i) => [f.rule, i]));
  hits.sort((a, b) => order.get(a.family.rule)! - order.get(b.family.rule)! || a.start - b.start || b.end - a.end);
  const out: Hit[] = [];
  for (const h of hits) {
    const last = out[out.length - 1];
    if (last && last.family === h.family && h.start < last.end) {
      if (h.weight > last.weight || (h.weight === last.weight && h.end - h.start > last.end - last.start))
        out[out.length - 1] = h;
      continue;
    }
    out.push(h);
  }
  return out.sort((a, b) => a.start - b.start || b.end - a.end);
}

// Letter-spaced words ('I g n o r e  p r e v i o u s'): six or more single letters one separator apart. Found on
// the normalised text, closed up (the run's separator joins letters; two separators, or another one, part words:
// 'a b  c', 'a.b c') and matched with up to 40 characters of their line before and 80 after, so a spaced word
// next to plain ones still reads as a phrase.
// The main pass reports where such runs start (see matchFamilies), so clean text pays nothing here.
const SPACED = /[a-z](?:[ .\-*]{1,3}[a-z]){5,}(?![a-z0-9])/y;
/** ' ', '.', '-', '*': the separators SPACED allows. */
const isSpacedSep = (c: number) => c === 32 || c === 46 || c === 45 || c === 42;

function matchSpaced(n: Normalized, starts: number[], maxPerFamily: number, hits: Hit[], counts: number[]): void {
  const t = n.text;
  // The runs, each with its context window (bounded, within its line); windows that touch are matched as one
  // segment, so a line of many short runs costs one pass over it, not one per run.
  const runs: Array<{ s: number; e: number }> = [];
  let done = 0;
  for (const s of starts) {
    if (s < done) continue;
    SPACED.lastIndex = s;
    const m = SPACED.exec(t);
    if (m === null) continue;
    done = s + m[0].length;
    runs.push({ s, e: done });
  }
  let i = 0;
  while (i < runs.length) {
    let from = runs[i]!.s;
    while (from > 0 && runs[i]!.s - from < 40 && t[from - 1] !== '\n') from--;
    let j = i;
    let to = contextEnd(t, runs[j]!.e);
    while (j + 1 < runs.length && runs[j + 1]!.s <= to && !t.slice(runs[j]!.e, runs[j + 1]!.s).includes('\n'))
      to = contextEnd(t, runs[++j]!.e);
    // Closed-up text built from slices, with an index map into the normalised text (segment index → index).
    let text = '';
    const at = new Int32Array(to - from);
    let len = 0;
    let k = from;
    const copy = (a: number, b: number) => {
      text += t.slice(a, b);
      for (let x = a; x < b; x++) at[len++] = x;
    };
    for (let r = i; r <= j; r++) {
      const { s, e } = runs[r]!;
      copy(k, s);
      k = s;
      // The run's first separator joins letters ('i.g.n.o.r.e'); any other gap parts words ('i.g.n.o.r.e a.l.l').
      const joiner = t[s + 1];
      while (k < e) {
        if (!isSpacedSep(t.charCodeAt(k))) {
          text += t[k];
          at[len++] = k;
          k++;
          continue;
        }
        let g = k;
        while (g < e && isSpacedSep(t.charCodeAt(g))) g++;
        if (g - k >= 2 || t[k] !== joiner) {
          text += ' ';
          at[len++] = k;
        }
        k = g;
      }
    }
    copy(k, to);
    matchFamilies(
      text,
      n.ascii,
      (a, b) => originalSpan(n, at[a]!, at[b - 1]! + 1),
      maxPerFamily,
      hits,
      false,
      null,
      counts,
    );
    i = j + 1;
  }
}

/** Up to 80 characters after a run, within its line. */
function contextEnd(t: string, e: number): number {
  let to = e;
  while (to < t.length && to - e < 80 && t[to] !== '\n') to++;
  return to;
}

// ---- previews: the matched phrase as written (invisible characters dropped), with every PII and secret match in it
// masked as redaction would ('[REDACTED:api_key]'), and any other long run of mixed letters and digits (a key from
// a provider no rule knows, one spelled in tag characters and lower-cased) masked as '[REDACTED:token]'.
const INVISIBLE_ALL = /[\p{Cf}\p{Default_Ignorable_Code_Point}\p{Co}]/gu;
const TOKEN_LIKE = /[A-Za-z0-9_\-+/=]{20,}/g;

function maskToken(t: string): string {
  let digits = 0;
  let letters = 0;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i) | 32;
    if (c >= 48 && c <= 57) digits++;
    else if (c >= 97 && c <= 122) letters++;
  }
  return digits >= 4 && letters >= 4 && entropy(t) >= 3 ? '[REDACTED:token]' : t;
}

/**
 * The preview of `raw`, or of `raw.slice(start, end)` read in its context: a value the phrase cuts through (the
 * phrase ends inside an e-mail address, say) is still recognised, and masked whole.
 */
export function maskedPhrase(raw: string, start = 0, end = raw.length): string {
  const clean = (a: number, b: number) => raw.slice(a, b).replace(INVISIBLE_ALL, '');
  const before = clean(Math.max(0, start - PREVIEW_CONTEXT), start);
  const phrase = clean(start, end);
  const win = before + phrase + clean(end, Math.min(raw.length, end + PREVIEW_CONTEXT));
  let from = before.length;
  let to = from + phrase.length;
  const found = detectPii(win)
    .concat(detectSecrets(win))
    .filter((f) => f.end > from && f.start < to);
  for (const f of found) {
    from = Math.min(from, f.start);
    to = Math.max(to, f.end);
  }
  const s =
    found.length > 0
      ? redact(
          win.slice(from, to),
          found.map((f) => ({ ...f, start: f.start - from, end: f.end - from })),
        )
      : phrase;
  return excerpt(s.replace(TOKEN_LIKE, maskToken));
}
/** Characters read on each side of a phrase for its preview's masking: longer than any value a phrase cuts (an
 * e-mail address is at most 254). */
const PREVIEW_CONTEXT = 320;

function invisibleWeight(run: InvisibleRun, text: string): number {
  if (run.kinds.has('tag')) return 0.6;
  if (run.kinds.has('bidi')) return 0.35;
  if (run.kinds.has('zero_width') || run.kinds.has('format') || run.kinds.has('private_use')) {
    // Inside a word ("ig\u200Bnore") it is obfuscation; between words it is more often copy/paste residue.
    const before = text[run.start - 1] ?? ' ';
    const after = text[run.end] ?? ' ';
    return /\w/.test(before) && /\w/.test(after) ? 0.35 : 0.15;
  }
  return 0.05;
}

function describeRun(run: InvisibleRun): string {
  if (run.kinds.has('tag')) return `${run.codePoints.length} invisible tag characters (hidden text)`;
  const counts = new Map<number, number>();
  for (const cp of run.codePoints) counts.set(cp, (counts.get(cp) ?? 0) + 1);
  const parts = [...counts].slice(0, 3).map(([cp, c]) => `${c}×U+${cp.toString(16).toUpperCase().padStart(4, '0')}`);
  return `${run.codePoints.length} invisible: ${parts.join(', ')}${counts.size > 3 ? ', …' : ''}`;
}

/** Score a text and return its injection findings (invisible-text runs always; phrase families at ≥ threshold). */
export function analyzeInjection(text: string, options: InjectionOptions = {}): InjectionResult {
  const threshold = options.threshold ?? DEFAULT_INJECTION_THRESHOLD;
  const maxPerFamily = options.maxPerFamily ?? 16;
  const maxRuns = options.maxInvisibleRuns ?? 64;
  const n = normalizeForInjection(text);
  const hits: Hit[] = [];
  const spaced: number[] = [];
  const counts = new Array<number>(INJECTION_FAMILIES.length).fill(0);
  matchFamilies(n.text, n.ascii, (s, e) => originalSpan(n, s, e), maxPerFamily, hits, false, spaced, counts);
  for (const h of n.hidden) matchFamilies(h.text, true, () => [h.start, h.end], maxPerFamily, hits, true);
  if (spaced.length > 0) matchSpaced(n, spaced, maxPerFamily, hits, counts);

  const familyWeight = new Map<string, number>();
  for (const h of hits) familyWeight.set(h.family.rule, Math.max(familyWeight.get(h.family.rule) ?? 0, h.weight));
  let invisibleW = 0;
  for (const run of n.invisible) invisibleW = Math.max(invisibleW, invisibleWeight(run, text));
  if (n.invisibleCount >= 8) invisibleW = Math.max(invisibleW, 0.35);

  let keep = 1;
  for (const w of familyWeight.values()) keep *= 1 - w;
  keep *= 1 - invisibleW;
  const score = Math.round((1 - keep) * 1000) / 1000;
  const severity = severityForScore(score);

  const findings: Finding[] = [];
  for (const run of n.invisible.slice(0, maxRuns)) {
    const w = invisibleWeight(run, text);
    findings.push({
      detector: 'injection',
      rule: 'injection.invisible_text',
      category: 'invisible_text',
      severity: severityForScore(Math.max(w, run.kinds.has('tag') ? 0.6 : 0, score)),
      start: run.start,
      end: run.end,
      preview: describeRun(run),
      score,
    });
  }
  if (score >= threshold) {
    for (const h of dedupeHits(hits)) {
      const phrase = h.hidden ? maskedPhrase(h.phrase) : maskedPhrase(text, h.start, h.end);
      findings.push({
        detector: 'injection',
        rule: h.family.rule,
        category: 'prompt_injection',
        severity,
        start: h.start,
        end: h.end,
        preview: `${h.family.label}: "${phrase}"`,
        score,
      });
    }
  }
  const families = [...familyWeight].map(([rule, weight]) => ({ rule, weight }));
  if (invisibleW > 0) families.push({ rule: 'injection.invisible_text', weight: invisibleW });
  return { score, families, findings };
}

/**
 * The preview stored for an injection finding the policy redacts or blocks: the phrase is what was redacted, so
 * only its family and length are kept.
 */
export function withheldPreview(f: Pick<Finding, 'rule' | 'start' | 'end' | 'preview'>): string {
  if (f.rule === 'injection.invisible_text') return f.preview; // a description of the characters, not their text
  const family = INJECTION_FAMILIES.find((x) => x.rule === f.rule);
  return `${family?.label ?? f.rule}: (${f.end - f.start} chars withheld)`;
}

export function detectInjection(text: string, options?: InjectionOptions): Finding[] {
  return analyzeInjection(text, options).findings;
}

export function injectionScore(text: string): number {
  return analyzeInjection(text).score;
}
