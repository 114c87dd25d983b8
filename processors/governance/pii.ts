// PII detectors: e-mail, phone, payment card, IBAN, US SSN, IPv4/IPv6. Each is a pure `(text) => Finding[]`.
// Patterns are anchored with look-behinds and bounded quantifiers (no nested unbounded repeats), and every
// numeric match is confirmed by a checksum or range check before it is reported.
import { execAll } from './regex.ts';
import { isIPv6 } from 'node:net';
import { cardBrand, ibanValid, IBAN_LENGTHS, luhnValid, ssnValid } from './checksums.ts';
import { maskDigits, maskEmail, maskIban, maskIp } from './mask.ts';
import type { Finding, Severity } from './types.ts';

/** True when the character before `index` is not in `forbidden` (done in code: a leading look-behind slows V8's scan). */
function clearBefore(text: string, index: number, forbidden: RegExp): boolean {
  return index === 0 || !forbidden.test(text[index - 1]!);
}
const NOT_BEFORE_NUMBER = /[\w.\-+/]/;

function pii(rule: string, category: string, severity: Severity, start: number, end: number, preview: string): Finding {
  return { detector: 'pii', rule, category, severity, start, end, preview };
}

// ---- e-mail: found from each '@' outwards, so text without '@' costs one indexOf.
// Internationalized addresses (RFC 6531: `zoë.smith@example.com`, `张伟@例子.公司`) have letters of any script in the
// local part and the domain labels, and IDN top-level domains (`.公司`, `.рф`). Scripts written without spaces
// (CJK, Thai) run straight into an address (`アドレスはtanaka@example.comです`): the local part stops where the
// text changes between such a script and another, and an ASCII top-level domain may be followed by one.
const LOCAL_CHAR = /[\p{L}\p{M}\p{N}._%+-]/u;
const LOCAL_PUNCT = /[._%+-]/;
const SPACELESS = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}\u30FC]/u;
const EMAIL_DOMAIN =
  /(?:[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}-]{0,61}[\p{L}\p{M}\p{N}])?\.){1,8}([A-Za-z]{2,24}(?![A-Za-z0-9\-\p{Script=Latin}\p{M}]|\.[\p{L}\p{N}])|\p{L}[\p{L}\p{M}]{1,23}(?![\p{L}\p{M}\p{N}-]|\.[\p{L}\p{N}]))/uy;
// `icon@2x.png`, `worker@1.2.js`: asset and module names, not addresses.
const FILE_TLDS = new Set([
  'png',
  'jpg',
  'jpeg',
  'gif',
  'svg',
  'webp',
  'ico',
  'js',
  'mjs',
  'cjs',
  'ts',
  'tsx',
  'jsx',
  'css',
  'html',
  'htm',
  'json',
  'yaml',
  'yml',
  'md',
  'txt',
  'py',
  'rb',
  'go',
  'rs',
  'java',
  'kt',
  'php',
  'lock',
  'zip',
  'gz',
  'tar',
  'pdf',
  'exe',
  'dll',
  'so',
  'wasm',
  'map',
  'vue',
  'scss',
]);

export function detectEmails(text: string): Finding[] {
  const out: Finding[] = [];
  let at = text.indexOf('@');
  while (at !== -1) {
    let s = at;
    let spaceless: boolean | null = null; // the script kind of the local part's letters, once one is seen
    const inLocal = (ch: string) => {
      if (!LOCAL_CHAR.test(ch)) return false;
      if (LOCAL_PUNCT.test(ch)) return true;
      const kind = SPACELESS.test(ch);
      return (spaceless ??= kind) === kind;
    };
    while (s > 0 && at - s < 64 && inLocal(text[s - 1]!)) s--;
    const local = text.slice(s, at);
    const okLocal =
      local.length > 0 &&
      !(s > 0 && at - s >= 64 && inLocal(text[s - 1]!)) &&
      local[0] !== '.' &&
      !local.endsWith('.') &&
      !local.includes('..') &&
      !text.endsWith('://', s);
    if (okLocal) {
      const window = text.slice(at + 1, at + 256);
      EMAIL_DOMAIN.lastIndex = 0;
      const m = EMAIL_DOMAIN.exec(window);
      if (m && !FILE_TLDS.has(m[1]!.toLowerCase())) {
        const end = at + 1 + m[0].length;
        out.push(pii('pii.email', 'email', 'medium', s, end, maskEmail(text.slice(s, end))));
        at = text.indexOf('@', end);
        continue;
      }
    }
    at = text.indexOf('@', at + 1);
  }
  return out;
}

// ---- phone numbers
// North American: (415) 555-0132, 415-555-0132, 415.555.0132, +1 415 555 0132. Area and exchange start 2–9.
const NANP = /(?:\+?1[ .-]?)?(?:\(([2-9]\d\d)\)[ .-]?|([2-9]\d\d)([ .-]))([2-9]\d\d)([ .-])\d{4}(?![\w]|[.-]\d)/g;
// International with a leading '+': groups separated by single spaces, dots or dashes, optional "(0)" trunk part.
const E164 =
  /\+[1-9]\d{0,3}(?:[ .\-\u00A0\u2007\u2009\u202F]?\(\d{1,4}\)[ .\-\u00A0\u2007\u2009\u202F]?\d{1,8}|[ .\-\u00A0\u2007\u2009\u202F]\d{1,8}){1,6}(?![\w]|[.-]\d)|\+[1-9]\d{7,14}(?![\w]|[.-]\d)/g;
// National formats with a trunk '0' or the '00' international prefix: 020 7946 0958, 07700 900123, 030 12345678,
// 0049 30 12345678, (030) 1234 5678, 0171/1234567, 06-12345678. Counted only after a phone word (PHONE_CONTEXT):
// on its own the shape is any zero-led number. Separators are mandatory between groups (no ambiguous splits).
const NATIONAL =
  /(?:\(0\d{1,4}\)[ -]?\d{2,8}(?:[ \-./]\d{2,8}){0,3}|\b0(?:\d{1,4}(?:[ \-./]\d{2,8}){1,4}|\d{8,13}))(?![\w]|[.\-/]\d)/g;
// Bare digit runs count only right after a phone keyword. Runs are found first (rare in text), then the
// keyword is looked for just before them.
const DIGIT_RUN = /\d{9,}/g;

/** Digit runs of 9+ (the candidates for keyword-introduced phone numbers and SSNs), with a leading '+' kept. */
function digitRuns(text: string): Array<{ index: number; run: string }> {
  const out: Array<{ index: number; run: string }> = [];
  for (const m of execAll(DIGIT_RUN, text)) {
    const plus = m.index > 0 && text[m.index - 1] === '+';
    out.push({ index: plus ? m.index - 1 : m.index, run: plus ? `+${m[0]}` : m[0] });
  }
  return out;
}
const PHONE_KEYWORD_BEFORE = /\b(?:phone|tel|telephone|mobile|cell|whatsapp|sms|fax)\b[^\n\d]{0,16}$/i;
// A word that introduces a number to dial, on the same line with no digits in between. It gates national formats
// and '+' followed by bare digits ('+14155550123'), which is otherwise a signed integer ('balance +12500000').
const PHONE_WORDS = String.raw`phones?|t[eé]l|t[eé]l[eé]phone|telefon[oe]?|tel[eé]fono|mobile?|mobil|cell(?:phone)?|handy|whatsapp|signal|telegram|viber|sms|text me|fax|call(?:s|ed|ing)?|ring|dial|contact|reach|hotline|landline`;
const PHONE_CONTEXT = new RegExp(String.raw`\b(?:${PHONE_WORDS})\b[^\n\d]{0,24}$`, 'i');
// '+digits' also after 'number' ('my number is +4915112345678'); a national-format number after 'number' is too
// often an account or order number.
const PLUS_CONTEXT = new RegExp(String.raw`\b(?:${PHONE_WORDS}|number)\b[^\n\d]{0,24}$`, 'i');

function phoneContextBefore(text: string, index: number, re: RegExp): boolean {
  return re.test(text.slice(Math.max(0, index - 40), index));
}

/** '"+14155550123"': a quoted value (JSON cannot hold a signed number as a string by accident). */
function quoted(text: string, start: number, end: number): boolean {
  const q = text[start - 1];
  return (q === '"' || q === "'") && text[end] === q;
}

// 'SKU 883-555-2190', 'order #312-555-0187': a label right before the number makes it an identifier.
const ID_CONTEXT =
  /\b(?:sku|part(?: no\.?| number)?|model|item|order|ref|reference|serial|invoice|ticket|case(?: id)?|tracking|batch|lot|id)\s*(?:#|no\.?|number)?\s*[:#=]?\s*$/i;

export function idContextBefore(text: string, index: number): boolean {
  return ID_CONTEXT.test(text.slice(Math.max(0, index - 24), index));
}

function digitCount(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 48 && c <= 57) n++;
  }
  return n;
}

export function detectPhones(text: string, runs = digitRuns(text)): Finding[] {
  const spans: Array<[number, number]> = [];
  const push = (start: number, end: number) => {
    spans.push([start, end]);
  };
  if (text.includes('+'))
    for (const m of execAll(E164, text)) {
      const raw = m[0];
      if (!clearBefore(text, m.index, /[\w+]/)) continue;
      const digits = digitCount(raw.replace('(0)', ''));
      if (digits < 8 || digits > 15) continue;
      // '+3.14159265' is a signed decimal, '+12.500.000' a signed amount grouped in thousands, not numbers to dial.
      if (/^\+\d+\.\d+$/.test(raw) || /^\+\d{1,3}(?:\.\d{3})+$/.test(raw)) continue;
      // '+' and bare digits is a signed integer ('delta +459699178 bytes') unless a phone word comes before it or
      // it is a quoted value ('"to": "+14155550123"'). Grouped forms ('+44 20 7946 0958') need neither.
      if (
        /^\+\d+$/.test(raw) &&
        !quoted(text, m.index, m.index + raw.length) &&
        !phoneContextBefore(text, m.index, PLUS_CONTEXT)
      )
        continue;
      push(m.index, m.index + raw.length);
    }
  for (const m of execAll(NATIONAL, text)) {
    if (!clearBefore(text, m.index, NOT_BEFORE_NUMBER)) continue;
    const digits = digitCount(m[0]);
    if (digits < 9 || digits > 16) continue;
    if (!phoneContextBefore(text, m.index, PHONE_CONTEXT) || idContextBefore(text, m.index)) continue;
    push(m.index, m.index + m[0].length);
  }
  for (const m of execAll(NANP, text)) {
    if (!clearBefore(text, m.index, NOT_BEFORE_NUMBER)) continue;
    if (m[2] !== undefined && m[3] !== m[5]) continue; // 415-555.0132: mixed separators
    if (idContextBefore(text, m.index)) continue;
    push(m.index, m.index + m[0].length);
  }
  for (const { index, run: num } of runs) {
    const d = num.replace('+', '');
    if (d.length < 10 || d.length > 13) continue;
    if (!PHONE_KEYWORD_BEFORE.test(text.slice(Math.max(0, index - 40), index))) continue;
    const national = d.length === 11 && d[0] === '1' ? d.slice(1) : d;
    const nanp = national.length === 10 && national[0]! >= '2' && national[3]! >= '2';
    if (!nanp && !num.startsWith('+')) continue;
    push(index, index + num.length);
  }
  // The three passes can find the same number (E.164 and NANP both match "+1 415 555 0132"): keep the first
  // (longest) of overlapping spans.
  spans.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  const out: Finding[] = [];
  let lastEnd = -1;
  for (const [start, end] of spans) {
    if (start < lastEnd) continue;
    lastEnd = end;
    out.push(pii('pii.phone', 'phone', 'medium', start, end, maskDigits(text.slice(start, end), 2)));
  }
  return out;
}

// ---- payment cards: 13–19 digits, contiguous or in 4-4-4-4 / 4-6-5 / 4-6-4 groups, Luhn + issuer prefix/length.
// Group separators include dots and the no-break and thin spaces word processors and locales put between groups.
const CARD = /(?:\d{13,19}|\d{4}([ .\-\u00A0\u2007\u2009\u202F])\d{4,6}\1\d{4,5}(?:\1\d{1,4}){0,2})(?![\w]|[.\-/]\d)/g;
const CARD_SEPARATORS = /[ .\-\u00A0\u2007\u2009\u202F]/g;

// 'Order #4339131860443826', 'tracking 6682 4759 9094 9360': about one number in ten passes Luhn and most
// pass the issuer check, so a label right before it makes it an identifier (as for phones and SSNs). A bare
// '#' does too, unless a card word comes before it ('Card #: 4111 …').
const CARD_ID_LABEL =
  /\b(?:order|tracking|invoice|inv|ref|reference|receipt|confirmation|booking|reservation|shipment|parcel|package|consignment|waybill|awb|txn|transaction|po|sku|part|model|item|serial|ticket|case|batch|lot|id)\s*(?:#|no\.?|number|id)?\s*[:#=]?\s*$/i;
const HASH_BEFORE = /#\s*[:=]?\s*$/;
const CARD_WORD_HASH = /\b(?:card|visa|mastercard|amex|cc|credit|debit)\s*#\s*[:=]?\s*$/i;

function cardIdContextBefore(text: string, index: number): boolean {
  const before = text.slice(Math.max(0, index - 32), index);
  return CARD_ID_LABEL.test(before) || (HASH_BEFORE.test(before) && !CARD_WORD_HASH.test(before));
}

export function detectCards(text: string): Finding[] {
  const out: Finding[] = [];
  for (const m of execAll(CARD, text)) {
    if (!clearBefore(text, m.index, NOT_BEFORE_NUMBER)) continue;
    const digits = m[0].replace(CARD_SEPARATORS, '');
    if (digits.length < 13 || digits.length > 19) continue;
    if (!luhnValid(digits) || cardBrand(digits) === null || cardIdContextBefore(text, m.index)) continue;
    out.push(pii('pii.payment_card', 'payment_card', 'high', m.index, m.index + m[0].length, maskDigits(digits)));
  }
  return out;
}

// ---- IBAN: country code + 2 check digits, compact or grouped by four, checked against country length and mod-97.
// Upper or lower case ('de89 3704 …' as typed), not mixed: letters of one IBAN share a case.
const IBAN_START = /(?<![A-Za-z0-9])([A-Za-z]{2})\d{2}(?=[ A-Za-z0-9])/g;

function isAlnum(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}

export function detectIbans(text: string): Finding[] {
  const out: Finding[] = [];
  IBAN_START.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = IBAN_START.exec(text)) !== null) {
    const len = IBAN_LENGTHS[m[1]!.toUpperCase()];
    if (len === undefined) continue;
    let compact = '';
    let i = m.index;
    let spaced = false;
    let ok = true;
    let upper = false;
    let lower = false;
    while (compact.length < len && i < text.length) {
      const c = text.charCodeAt(i);
      if (isAlnum(c)) {
        if (c >= 97) lower = true;
        else if (c >= 65) upper = true;
        compact += text[i];
        i++;
        continue;
      }
      // A single space is allowed only between groups of four.
      if (c === 32 && compact.length % 4 === 0 && i + 1 < text.length && isAlnum(text.charCodeAt(i + 1))) {
        spaced = true;
        i++;
        continue;
      }
      ok = false;
      break;
    }
    if (!ok || compact.length !== len || (upper && lower)) continue;
    if (i < text.length && isAlnum(text.charCodeAt(i))) continue;
    compact = compact.toUpperCase();
    if (
      spaced &&
      text
        .slice(m.index, i)
        .split(' ')
        .slice(0, -1)
        .some((g) => g.length !== 4)
    )
      continue;
    if (!ibanValid(compact)) continue;
    out.push(pii('pii.iban', 'iban', 'high', m.index, i, maskIban(compact)));
    IBAN_START.lastIndex = i;
  }
  return out;
}

// ---- US SSN: 3-2-4 with a consistent dash or space, or 9 bare digits after an SSN keyword.
const SSN = /(\d{3})([- ])(\d{2})\2(\d{4})(?![\w]|-\d)/g;
const SSN_KEYWORD_BEFORE = /\b(?:ssn|social security(?: number| no\.?| #)?)\b\D{0,12}$/i;

export function detectSsns(text: string, runs = digitRuns(text)): Finding[] {
  const out: Finding[] = [];
  for (const m of execAll(SSN, text)) {
    if (!clearBefore(text, m.index, /[\w-]/) || !ssnValid(m[1]!, m[3]!, m[4]!) || idContextBefore(text, m.index))
      continue;
    out.push(pii('pii.ssn', 'ssn', 'high', m.index, m.index + m[0].length, `***-**-****`));
  }
  for (const { index, run: d } of runs) {
    if (d.length !== 9 || !SSN_KEYWORD_BEFORE.test(text.slice(Math.max(0, index - 32), index))) continue;
    if (!ssnValid(d.slice(0, 3), d.slice(3, 5), d.slice(5))) continue;
    out.push(pii('pii.ssn', 'ssn', 'high', index, index + 9, `*********`));
  }
  return out;
}

// ---- IP addresses
const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const IPV4 = new RegExp(`(?:${OCTET}\\.){3}${OCTET}(?![\\w]|\\.\\d)`, 'g');
// '1.2.3.4' right after 'version', 'v', 'build', 'pkg', '==', … is a version string.
const VERSION_CONTEXT =
  /(?:\bv|\bversion|\bver\.?|\brelease|\bbuild|\bfirmware|\brev\.?|\bsdk|\bapi|\bpkg|\bpackage|\bpatch|\bkernel|==|[<>~]=|\^|~)\s*[:=]?\s*$/i;
// …and after a package verb with a name: 'installed pkg ', 'upgraded openssl to ', 'bump lodash ' (not a network
// word: 'installed on 203.0.113.7' is an address).
const VERSION_VERB =
  /\b(?:install(?:ed|ing|s)?|upgrad(?:e|ed|es|ing)|downgrad(?:e|ed|es|ing)|bump(?:ed|s|ing)?|pin(?:ned|s)?) (?!(?:on|at|to|from|in|into|onto|via|for|by|host|server|node|ip|address|machine|vm|instance|box)\b)[\w@./+-]{1,40} (?:to |version |v)?$|\b(?:upgrad|downgrad|bump)\w* to $/i;
// A runtime, browser, OS or tool name and a space ('node 18.19.0.1', 'Chrome 120.0.61.109') is version context
// for public-looking numbers only: 'node 10.0.0.12' in a cluster is an address, and private ranges are rare as
// versions. A public address written right after one of these names is missed.
const SOFTWARE_BEFORE =
  /\b(?:node(?:js)?|python[23]?|java|jdk|jre|openjdk|chrome|chromium|firefox|safari|opera|windows|macos|osx|ios|ipados|android|ubuntu|debian|centos|rhel|fedora|alpine|linux|openssl|openssh|nginx|apache|httpd|tomcat|postgres(?:ql)?|mysql|mariadb|redis|mongodb|elasticsearch|kafka|docker|kubernetes|k8s|kubectl|helm|terraform|npm|pnpm|yarn|pip|golang|rustc?|cargo|gcc|clang|llvm|dotnet|electron|php|ruby|rails|perl|gradle|maven|cuda|pytorch|torch|tensorflow|numpy|pandas|bios|lib|library|module|plugin|extension)[ /]$/i;

function versionContextBefore(text: string, index: number, sev: Severity): boolean {
  const before = text.slice(Math.max(0, index - 64), index);
  if (VERSION_CONTEXT.test(before.slice(-12)) || (sev === 'medium' && SOFTWARE_BEFORE.test(before.slice(-16))))
    return true;
  const lower = before.toLowerCase(); // the verb regex only when a verb can be there (it scans the whole slice)
  return (
    (lower.includes('install') || lower.includes('grad') || lower.includes('bump') || lower.includes('pin')) &&
    VERSION_VERB.test(before)
  );
}

// IPv6 candidates: from each ':' expand over hex digits, ':' and '.'; confirmed with node:net.
function isIpv6Char(c: number): boolean {
  return (c >= 48 && c <= 58) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102) || c === 46;
}
const WORD_CHAR = /\w/;

function ipv6Candidates(text: string): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let i = text.indexOf(':');
  while (i !== -1) {
    let s = i;
    while (s > 0 && i - s < 45 && isIpv6Char(text.charCodeAt(s - 1))) s--;
    let e = i + 1;
    while (e < text.length && e - s < 46 && isIpv6Char(text.charCodeAt(e))) e++;
    while (text.charCodeAt(s) === 46) s++;
    while (e > s && text.charCodeAt(e - 1) === 46) e--;
    let colons = 0;
    for (let k = s; k < e && colons < 2; k++) if (text.charCodeAt(k) === 58) colons++;
    const before = s > 0 ? text[s - 1]! : ' ';
    const after = e < text.length ? text[e]! : ' ';
    if (colons >= 2 && e - s <= 45 && !WORD_CHAR.test(before) && before !== '.' && !WORD_CHAR.test(after))
      out.push([s, e]);
    i = text.indexOf(':', Math.max(e, i + 1));
  }
  return out;
}

function ipv4Severity(o: number[]): Severity | null {
  const [a, b] = o as [number, number];
  if (a === 0 || a === 127 || a === 255) return null; // unspecified, loopback, broadcast/netmask: identify no one
  if (
    a === 10 ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 169 && b === 254) ||
    (a === 100 && b >= 64 && b <= 127)
  )
    return 'low';
  return 'medium';
}

export function detectIps(text: string, digits = Infinity): Finding[] {
  const out: Finding[] = [];
  if (digits >= 4 && text.includes('.')) {
    for (const m of execAll(IPV4, text)) {
      if (!clearBefore(text, m.index, /[\w.]/)) continue;
      const sev = ipv4Severity(m[0].split('.').map(Number));
      if (sev === null) continue;
      if (versionContextBefore(text, m.index, sev)) continue;
      out.push(pii('pii.ip_address', 'ip_address', sev, m.index, m.index + m[0].length, maskIp(m[0])));
    }
  }
  if (text.includes(':')) {
    for (const [s, e] of ipv6Candidates(text)) {
      const raw = text.slice(s, e);
      if (!/\d/.test(raw) || !isIPv6(raw)) continue;
      const groups = raw.split(':').filter((g) => g.length > 0);
      const hex = raw.replace(/[^0-9A-Fa-f]/g, '');
      if (groups.length < 2 || hex.length < 3) continue;
      const lower = raw.toLowerCase();
      const sev: Severity =
        lower.startsWith('fe80:') || lower.startsWith('fc') || lower.startsWith('fd') ? 'low' : 'medium';
      out.push(pii('pii.ip_address', 'ip_address', sev, s, e, maskIp(raw)));
    }
  }
  return out;
}

/** Digits in the text and its longest run of digits: each numeric detector needs at least so many. */
function digitStats(text: string): { count: number; maxRun: number } {
  let count = 0;
  let run = 0;
  let maxRun = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      count++;
      if (++run > maxRun) maxRun = run;
    } else {
      run = 0;
    }
  }
  return { count, maxRun };
}

// Full-width forms (U+FF01–U+FF5E) and the ideographic space, as CJK input methods type digits, @ and letters.
const FULLWIDTH = /[\uFF01-\uFF5E\u3000]/;
const FULLWIDTH_ALL = /[\uFF01-\uFF5E\u3000]/g;

/**
 * Their NFKC forms (ASCII and a space). Each is one UTF-16 unit for one, so offsets into the result are offsets
 * into the text: findings in "０９０－１２３４－５６７８" point at the original, and redaction replaces it there.
 */
export function foldFullwidth(text: string): string {
  if (!FULLWIDTH.test(text)) return text;
  return text.replace(FULLWIDTH_ALL, (c) => (c === '\u3000' ? ' ' : String.fromCharCode(c.charCodeAt(0) - 0xfee0)));
}

/** All PII detectors, on the text with full-width forms folded (see foldFullwidth). */
export function detectPii(original: string): Finding[] {
  const text = foldFullwidth(original);
  const parts: Finding[][] = [];
  if (text.includes('@')) parts.push(detectEmails(text));
  // Each numeric detector is skipped when the text has fewer digits than anything it reports: a card has 13 or
  // more, an SSN 9, a phone number 8 (E.164) or 10, an IBAN 2 (check digits) in 15 or more characters, an IPv4
  // address 4; IPv6 needs one (checked in detectIps). Most strings of a span rule out most of them in one pass.
  const { count, maxRun } = digitStats(text);
  if (count === 0) return parts.flat();
  const runs = maxRun >= 9 ? digitRuns(text) : [];
  if (count >= 13) parts.push(detectCards(text));
  if (count >= 2 && text.length >= 15) parts.push(detectIbans(text));
  if (count >= 9) parts.push(detectSsns(text, runs));
  if (count >= 8) parts.push(detectPhones(text, runs));
  parts.push(detectIps(text, count));
  return parts.flat();
}
