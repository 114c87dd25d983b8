// Text normalisation for injection matching: NFKC, homoglyph folding, lower case, invisible characters removed,
// with a map back to offsets in the original text. Invisible characters are reported as runs; Unicode tag
// characters (U+E0020–E007E, "ASCII smuggling") are also decoded into the hidden text they spell.

/** tag: U+E0000 block; bidi: embedding/isolate controls; zero_width: ZWSP/ZWJ/word joiner…; mark: LRM/RLM, soft hyphen;
 * format: any other format or default-ignorable character (variation selectors, Hangul fillers, CGJ, …);
 * private_use: a private-use character inside a word. */
export type InvisibleKind = 'tag' | 'bidi' | 'zero_width' | 'mark' | 'format' | 'private_use';

export interface InvisibleRun {
  start: number;
  end: number;
  kinds: Set<InvisibleKind>;
  codePoints: number[];
}

export interface Normalized {
  /** Normalised, lower-cased text. */
  text: string;
  /** The normalised text is all ASCII. */
  ascii: boolean;
  /** norm index → original start offset; null when the text is unchanged except for case (ASCII fast path). */
  starts: Int32Array | null;
  /** norm index → original end offset. */
  ends: Int32Array | null;
  /** The first MAX_INVISIBLE_RUNS runs of invisible characters. */
  invisible: InvisibleRun[];
  /** Invisible characters in the whole text (also past the recorded runs). */
  invisibleCount: number;
  /** Text spelled by tag characters, with the original span of each run. */
  hidden: Array<{ text: string; start: number; end: number }>;
}

export const MAX_INVISIBLE_RUNS = 256;

// Unicode's own classes rather than a hand-picked list: every format (Cf) and default-ignorable character
// renders as nothing, so each can split a trigger word ("ig\u034Fnore").
const FORMAT = /^[\p{Cf}\p{Default_Ignorable_Code_Point}]$/u;
const PRIVATE_USE = /^\p{Co}$/u;
const kindCache = new Map<number, InvisibleKind | null>();

export function invisibleKind(cp: number): InvisibleKind | null {
  if (cp < 0xad) return null;
  if (cp >= 0xe0000 && cp <= 0xe007f) return 'tag';
  if ((cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) return 'bidi';
  if ((cp >= 0x200b && cp <= 0x200d) || (cp >= 0x2060 && cp <= 0x2064) || cp === 0xfeff || cp === 0x180e)
    return 'zero_width';
  if (cp === 0x200e || cp === 0x200f || cp === 0x00ad) return 'mark'; // LRM/RLM, soft hyphen
  let kind = kindCache.get(cp);
  if (kind === undefined) {
    const ch = String.fromCodePoint(cp);
    kind = FORMAT.test(ch) ? 'format' : PRIVATE_USE.test(ch) ? 'private_use' : null;
    if (kindCache.size < 65_536) kindCache.set(cp, kind);
  }
  return kind;
}

// Latin look-alikes from Cyrillic and Greek that NFKC leaves alone.
const HOMOGLYPHS: Readonly<Record<string, string>> = {
  а: 'a',
  е: 'e',
  о: 'o',
  р: 'p',
  с: 'c',
  у: 'y',
  х: 'x',
  і: 'i',
  ј: 'j',
  ѕ: 's',
  һ: 'h',
  ԁ: 'd',
  А: 'a',
  В: 'b',
  Е: 'e',
  К: 'k',
  М: 'm',
  Н: 'h',
  О: 'o',
  Р: 'p',
  С: 'c',
  Т: 't',
  Х: 'x',
  І: 'i',
  α: 'a',
  ο: 'o',
  ε: 'e',
  ι: 'i',
  ν: 'v',
  τ: 't',
  υ: 'u',
  ρ: 'p',
  κ: 'k',
  Ο: 'o',
  Α: 'a',
  Ε: 'e',
  Ι: 'i',
  Τ: 't',
  Κ: 'k',
  Μ: 'm',
  Ν: 'n',
  Ρ: 'p',
  // Latin small capitals ('ɪɢɴᴏʀᴇ ᴘʀᴇᴠɪᴏᴜs'), phonetic letters NFKC keeps as they are, and the dotless i.
  ᴀ: 'a',
  ʙ: 'b',
  ᴄ: 'c',
  ᴅ: 'd',
  ᴇ: 'e',
  ꜰ: 'f',
  ɢ: 'g',
  ʜ: 'h',
  ɪ: 'i',
  ᴊ: 'j',
  ᴋ: 'k',
  ʟ: 'l',
  ᴍ: 'm',
  ɴ: 'n',
  ᴏ: 'o',
  ᴘ: 'p',
  ꞯ: 'q',
  ʀ: 'r',
  ꜱ: 's',
  ᴛ: 't',
  ᴜ: 'u',
  ᴠ: 'v',
  ᴡ: 'w',
  ʏ: 'y',
  ᴢ: 'z',
  ı: 'i',
};

// Leetspeak digits inside a word ('ign0re', 'previ0us', 'instructi0ns') read as the letters they stand for.
// Only between two letters: '%7b', 'v1', 'sha256', '10x' keep their digits. Same length, so offsets hold.
const LEET_INSIDE = /[a-z][013457]+(?=[a-z])/g;
const LEET = 'oi?eas?t'; // by digit
const leetRun = (m: string) => {
  let out = m[0]!;
  for (let i = 1; i < m.length; i++) out += LEET[m.charCodeAt(i) - 48];
  return out;
};
export function foldLeet(text: string): string {
  return text.replace(LEET_INSIDE, leetRun);
}

// biome-ignore lint/suspicious/noMisleadingCharacterClass: U+FE0F alone is one of the characters looked for.
const EMOJI_NEIGHBOUR = /[\p{Extended_Pictographic}\p{Emoji_Modifier}\u{FE0F}]/u;
const NON_LATIN_LETTER = /[\p{L}\p{M}]/u;
const LATIN = /\p{Script=Latin}/u;

function cpBefore(text: string, i: number): string {
  if (i <= 0) return '';
  const lo = text.charCodeAt(i - 1);
  return lo >= 0xdc00 && lo <= 0xdfff && i >= 2 ? text.slice(i - 2, i) : text[i - 1]!;
}

function cpAt(text: string, i: number): string {
  const cp = text.codePointAt(i);
  return cp === undefined ? '' : String.fromCodePoint(cp);
}

const EMOJI_BASE = /[\p{Emoji}\p{Extended_Pictographic}]/u;
const IDEOGRAPH = /\p{Ideographic}/u;
const LETTER = /\p{L}/u;

/**
 * Legitimate uses: ZWJ inside emoji sequences, a variation selector after an emoji (❤️) or an ideograph, joiners
 * and other format characters next to letters of a non-Latin script with no Latin neighbour (Arabic, Indic,
 * Hangul, Mongolian), a
 * leading BOM, a private-use icon that is not inside a word. Tag runs of flag emoji are handled by the caller.
 */
function exempt(text: string, i: number, cp: number, kind: InvisibleKind): boolean {
  if (cp === 0xfeff && i === 0) return true;
  const before = cpBefore(text, i);
  const after = cpAt(text, i + (cp > 0xffff ? 2 : 1));
  if (kind === 'private_use') return !(LETTER.test(before) && LETTER.test(after));
  if (cp >= 0xfe00 && cp <= 0xfe0f && EMOJI_BASE.test(before) && !/[\p{L}]/u.test(before)) return true;
  if (cp >= 0xe0100 && cp <= 0xe01ef && IDEOGRAPH.test(before)) return true;
  if (cp === 0x200d && EMOJI_NEIGHBOUR.test(before) && EMOJI_NEIGHBOUR.test(after)) return true;
  if (cp === 0x200d || cp === 0x200c || kind === 'format') {
    // Splitting a trigger word needs a Latin neighbour; next to a non-Latin letter it is the script's own business.
    if ((NON_LATIN_LETTER.test(before) || NON_LATIN_LETTER.test(after)) && !LATIN.test(before) && !LATIN.test(after))
      return true;
  }
  return false;
}

/** Subdivision flags: U+1F3F4, 2–6 lower-case tag letters/digits, U+E007F cancel tag. */
function flagTagRunEnd(text: string, i: number): number {
  if (cpBefore(text, i) !== '\u{1F3F4}') return -1;
  let j = i;
  let n = 0;
  while (j < text.length) {
    const cp = text.codePointAt(j)!;
    if (cp === 0xe007f) return n >= 2 && n <= 6 ? j + 2 : -1;
    if (!((cp >= 0xe0061 && cp <= 0xe007a) || (cp >= 0xe0030 && cp <= 0xe0039))) return -1;
    n++;
    j += 2;
  }
  return -1;
}

// Folded form of each non-ASCII code point seen (NFKC per code point is the slow step for CJK-heavy text).
// An expansion longer than MAX_FOLD (U+FDFA is 18 characters of Arabic) becomes one space: no Latin phrase
// is spelled that way, and a prompt of them would otherwise grow 18-fold before matching (seconds per field).
const MAX_FOLD = 4;
const FOLD_CACHE = new Map<number, string>();
function fold(cp: number, ch: string): string {
  let f = FOLD_CACHE.get(cp);
  if (f === undefined) {
    f = (HOMOGLYPHS[ch] ?? ch.normalize('NFKC')).toLowerCase();
    if (f.length > MAX_FOLD) f = ' ';
    if (FOLD_CACHE.size < 65536) FOLD_CACHE.set(cp, f);
  }
  return f;
}

// eslint-disable-next-line no-control-regex
const NON_ASCII = /[^\x00-\x7f]/;

const NON_ASCII_ALL = /[^\x00-\x7f]/g;

/**
 * Text whose non-ASCII characters are all visible BMP characters folding to one code unit each (curly quotes,
 * dashes, accented letters): the normalised text keeps the original's offsets, so it needs no map. About four
 * times cheaper than the general path on such text; null when the general path is needed.
 */
function foldInPlace(text: string): Normalized | null {
  let ok = true;
  let ascii = true;
  const folded = text.replace(NON_ASCII_ALL, (ch) => {
    const cp = ch.charCodeAt(0);
    if (!ok || (cp >= 0xd800 && cp <= 0xdfff) || invisibleKind(cp) !== null) {
      ok = false;
      return ch;
    }
    const f = fold(cp, ch);
    if (f.length !== 1) {
      ok = false;
      return ch;
    }
    if (f.charCodeAt(0) >= 0x80) ascii = false;
    return f;
  });
  // Every fold is lower case already (checked for the whole BMP in the tests), so this lowers only A–Z.
  return ok
    ? {
        text: foldLeet(folded.toLowerCase()),
        ascii,
        starts: null,
        ends: null,
        invisible: [],
        invisibleCount: 0,
        hidden: [],
      }
    : null;
}

export function normalizeForInjection(text: string): Normalized {
  if (!NON_ASCII.test(text))
    return {
      text: foldLeet(text.toLowerCase()),
      ascii: true,
      starts: null,
      ends: null,
      invisible: [],
      invisibleCount: 0,
      hidden: [],
    };
  return foldInPlace(text) ?? normalizeMapped(text);
}

/** The general path: any text, with an offset map back to the original. Exported for the equivalence tests. */
export function normalizeMapped(text: string): Normalized {
  // Output code units and their original spans in typed arrays, grown when a fold expands (at most MAX_FOLD-fold).
  let cap = text.length + 64;
  let units = new Uint16Array(cap);
  let starts = new Int32Array(cap);
  let ends = new Int32Array(cap);
  let n = 0;
  const grow = () => {
    cap = Math.min(cap * 2, text.length * MAX_FOLD + 64);
    const u = new Uint16Array(cap);
    u.set(units);
    units = u;
    const s = new Int32Array(cap);
    s.set(starts);
    starts = s;
    const e = new Int32Array(cap);
    e.set(ends);
    ends = e;
  };
  const invisible: InvisibleRun[] = [];
  const hidden: Normalized['hidden'] = [];
  let invisibleCount = 0;
  let hiddenBuf = '';
  let hiddenStart = -1;
  let hiddenEnd = -1;
  const flushHidden = () => {
    if (hiddenBuf.trim().length > 0)
      hidden.push({ text: foldLeet(hiddenBuf.toLowerCase()), start: hiddenStart, end: hiddenEnd });
    hiddenBuf = '';
    hiddenStart = -1;
  };
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c < 0x80) {
      if (n === cap) grow();
      units[n] = c >= 0x41 && c <= 0x5a ? c + 32 : c;
      starts[n] = i;
      ends[n++] = i + 1;
      i += 1;
      continue;
    }
    const cp = text.codePointAt(i)!;
    const len = cp > 0xffff ? 2 : 1;
    const kind = invisibleKind(cp);
    if (kind !== null) {
      if (kind === 'tag') {
        const flagEnd = flagTagRunEnd(text, i);
        if (flagEnd !== -1) {
          i = flagEnd;
          continue;
        }
        if (cp >= 0xe0020 && cp <= 0xe007e) {
          if (hiddenStart === -1 || hiddenEnd !== i) {
            flushHidden();
            hiddenStart = i;
          }
          hiddenBuf += String.fromCharCode(cp - 0xe0000);
          hiddenEnd = i + len;
        }
      }
      if (!exempt(text, i, cp, kind)) {
        invisibleCount++;
        const last = invisible[invisible.length - 1];
        // Runs one visible character apart ('i\u200Bg\u200Bn\u200Bo…', a joiner between every letter) are one run.
        if (last && (last.end === i || oneCharApart(text, last.end, i))) {
          last.end = i + len;
          last.kinds.add(kind);
          if (last.codePoints.length < 4096) last.codePoints.push(cp);
        } else if (invisible.length < MAX_INVISIBLE_RUNS)
          invisible.push({ start: i, end: i + len, kinds: new Set([kind]), codePoints: [cp] });
      }
      i += len;
      continue;
    }
    const folded = fold(cp, len === 1 ? text[i]! : text.slice(i, i + len));
    while (n + folded.length > cap) grow();
    for (let k = 0; k < folded.length; k++) {
      units[n] = folded.charCodeAt(k);
      starts[n] = i;
      ends[n++] = i + len;
    }
    i += len;
  }
  flushHidden();
  return {
    text: foldLeet(utf16(units, n)),
    ascii: false,
    starts: starts.subarray(0, n),
    ends: ends.subarray(0, n),
    invisible,
    invisibleCount,
    hidden,
  };
}

/** [from, to) holds exactly one code point, and not a line break. */
function oneCharApart(text: string, from: number, to: number): boolean {
  if (to - from === 1) {
    const c = text.charCodeAt(from);
    return c !== 10 && c !== 13 && c !== 0x2028 && c !== 0x2029;
  }
  if (to - from !== 2) return false;
  const hi = text.charCodeAt(from);
  const lo = text.charCodeAt(from + 1);
  return hi >= 0xd800 && hi <= 0xdbff && lo >= 0xdc00 && lo <= 0xdfff;
}

/** The first n code units as a string (lone surrogates kept: the input may hold them). */
function utf16(units: Uint16Array, n: number): string {
  let out = '';
  const CHUNK = 8192;
  for (let i = 0; i < n; i += CHUNK)
    out += String.fromCharCode.apply(null, units.subarray(i, Math.min(n, i + CHUNK)) as unknown as number[]);
  return out;
}

/** Original [start, end) of the normalised span [s, e). */
export function originalSpan(n: Normalized, s: number, e: number): [number, number] {
  if (n.starts === null || n.ends === null) return [s, e];
  if (e <= s) return [n.starts[s] ?? 0, n.starts[s] ?? 0];
  return [n.starts[s]!, n.ends[e - 1]!];
}
