// Secret detectors: provider API keys and tokens, private key blocks, JWTs.
//
// Why not secretlint as a library: its programmatic entry point (`lintSource` in @secretlint/core) is async and
// builds a rule context, translator and message list per call, meant for linting files. These detectors run
// synchronously on every ingested string and in the proxy's preflight, so the rules are re-expressed here as
// plain regular expressions. They are informed by secretlint's rule packages (openai, anthropic, aws, github,
// slack, privatekey) and gitleaks' config (key prefixes, the AWS id alphabet, the `…EXAMPLE` allowlist), and
// add an entropy floor so placeholders such as `sk-xxxxxxxx…` are not reported.
import { execAll } from './regex.ts';
import { entropy } from './checksums.ts';
import { maskToken } from './mask.ts';
import type { Finding, Severity } from './types.ts';

interface SecretRule {
  rule: string;
  category: string;
  severity: Severity;
  /** Cheap gate: the rule's regex runs only when one of these substrings occurs in the text. */
  hints: readonly string[];
  /** Global regex; group 1, when present, is the secret itself (the rest is context). */
  re: RegExp;
  minEntropy?: number;
  validate?: (secret: string) => boolean;
  preview?: (secret: string) => string;
}

const notExample = (s: string) => !/EXAMPLE/.test(s);
const mixed = (s: string) => /\d/.test(s) && /[a-z]/.test(s) && /[A-Z]/.test(s);

export const SECRET_RULES: readonly SecretRule[] = [
  {
    rule: 'secret.anthropic_key',
    category: 'api_key',
    severity: 'critical',
    hints: ['sk-ant-'],
    re: /(?<![\w-])sk-ant-(?:api|admin|oat|sid)\d{2}-[A-Za-z0-9_-]{32,200}(?![\w-])/g,
    minEntropy: 3.5,
  },
  {
    rule: 'secret.openai_key',
    category: 'api_key',
    severity: 'critical',
    hints: ['sk-'],
    re: /(?<![\w-])sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,250}(?![\w-])|(?<![\w-])sk-[A-Za-z0-9]{32,64}(?![\w-])/g,
    minEntropy: 3.5,
    validate: mixed,
  },
  {
    rule: 'secret.aws_access_key_id',
    category: 'api_key',
    severity: 'high',
    hints: ['AKIA', 'ASIA', 'ABIA', 'ACCA', 'A3T'],
    re: /(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])/g,
    minEntropy: 3,
    validate: notExample,
  },
  {
    rule: 'secret.aws_secret_key',
    category: 'api_key',
    severity: 'critical',
    hints: ['ecret', 'ECRET'],
    re: /(?:aws_?)?secret_?access_?key["']?\s{0,4}(?::|=>|=)\s{0,4}["']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])/gi,
    minEntropy: 3.5,
    validate: notExample,
  },
  {
    rule: 'secret.github_token',
    category: 'api_key',
    severity: 'critical',
    hints: ['ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_', 'github_pat_'],
    re: /(?<![\w])(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,251}(?![\w])|(?<![\w])github_pat_[A-Za-z0-9_]{60,251}(?![\w])/g,
    minEntropy: 3,
  },
  // secretlint's slack rule covers xox[abposr]-; gitleaks adds the xoxe- forms: rotating user tokens (numeric
  // groups like xoxp-), configuration refresh tokens (xoxe-1-<146>) and configuration access tokens
  // (xoxe.xoxp-1-<163–166>).
  {
    rule: 'secret.slack_token',
    category: 'api_key',
    severity: 'critical',
    hints: ['xox', 'xapp-'],
    re: /(?<![\w-])xox[abposre]-(?:\d{1,40}-){1,4}[A-Za-z0-9]{8,64}(?![\w-])|(?<![\w-])xoxe-\d-[A-Za-z0-9]{140,200}(?![\w-])|(?<![\w-])xoxe\.xox[bp]-\d-[A-Za-z0-9]{150,200}(?![\w-])|(?<![\w-])xapp-\d-[A-Za-z0-9-]{20,200}(?![\w-])/g,
    minEntropy: 3,
  },
  {
    rule: 'secret.slack_webhook',
    category: 'webhook_url',
    severity: 'high',
    hints: ['hooks.slack.com'],
    re: /https:\/\/hooks\.slack\.com\/(?:services|workflows|triggers)\/[A-Za-z0-9_-]{6,40}\/[A-Za-z0-9_-]{6,40}\/[A-Za-z0-9_-]{8,80}/g,
    preview: (s) => `hooks.slack.com/…(${s.length})`,
  },
  {
    rule: 'secret.stripe_key',
    category: 'api_key',
    severity: 'critical',
    hints: ['k_live_', 'k_test_', 'k_prod_'],
    re: /(?<![\w])(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,247}(?![\w])/g,
    minEntropy: 3,
  },
  {
    rule: 'secret.google_api_key',
    category: 'api_key',
    severity: 'high',
    hints: ['AIza'],
    re: /(?<![\w-])AIza[0-9A-Za-z_-]{35}(?![\w-])/g,
    minEntropy: 3,
  },
  {
    rule: 'secret.huggingface_token',
    category: 'api_key',
    severity: 'high',
    hints: ['hf_'],
    re: /(?<![\w])hf_[A-Za-z]{34}(?![\w])/g,
    minEntropy: 3.5,
  },
];

// One pass for every rule's hints: most strings hold none, and then no rule runs.
const ANY_HINT = new RegExp(
  SECRET_RULES.flatMap((r) => r.hints)
    .map((h) => h.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&'))
    .join('|'),
);

function runRule(text: string, r: SecretRule, out: Finding[]): void {
  let hinted = false;
  for (const h of r.hints)
    if (text.includes(h)) {
      hinted = true;
      break;
    }
  if (!hinted) return;
  for (const m of execAll(r.re, text)) {
    const secret = m[1] ?? m[0];
    const start = m[1] !== undefined ? m.index + m[0].lastIndexOf(secret) : m.index;
    if (r.minEntropy !== undefined && entropy(secret) < r.minEntropy) continue;
    if (r.validate && !r.validate(secret)) continue;
    out.push({
      detector: 'secret',
      rule: r.rule,
      category: r.category,
      severity: r.severity,
      start,
      end: start + secret.length,
      preview: r.preview ? r.preview(secret) : maskToken(secret),
    });
  }
}

// ---- private key blocks: BEGIN … PRIVATE KEY header, through the matching END line (or the base64 run after it).
const PK_BEGIN = /-----BEGIN ([A-Z0-9 _-]{0,60}?)PRIVATE KEY( BLOCK)?-----/g;
// Base64 lines plus PEM headers ("Proc-Type: 4,ENCRYPTED"); stops at the next "--" so bodies never run into another block.
const PK_BODY = /(?:[A-Za-z0-9+/=\s:,]|-(?!-)){0,16384}/y;
const MAX_PK_SPAN = 32768;

export function detectPrivateKeys(text: string): Finding[] {
  const out: Finding[] = [];
  if (!text.includes('PRIVATE KEY')) return out;
  let endAt = -2; // next '-----END ' at or after the current header (-1: none), found once and reused
  for (const m of execAll(PK_BEGIN, text)) {
    const start = m.index;
    const headerEnd = start + m[0].length;
    let end = headerEnd;
    if (endAt !== -1 && endAt < headerEnd) endAt = text.indexOf('-----END ', headerEnd);
    if (endAt !== -1 && endAt - start < MAX_PK_SPAN) {
      const close = text.indexOf('-----', endAt + 9);
      end = close !== -1 && close - endAt < 100 ? close + 5 : endAt + 9;
    } else {
      PK_BODY.lastIndex = headerEnd;
      const body = PK_BODY.exec(text);
      end = headerEnd + (body ? body[0].trimEnd().length : 0);
    }
    const kind = `${m[1] ?? ''}PRIVATE KEY`.trim();
    out.push({
      detector: 'secret',
      rule: 'secret.private_key',
      category: 'private_key',
      severity: 'critical',
      start,
      end,
      preview: `${kind} block (${end - start} chars)`,
    });
  }
  return out;
}

// ---- JWT: three base64url parts; the header must decode to a JSON object with a string `alg`.
const JWT = /(?<![\w\-.])eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{2,16384}\.[A-Za-z0-9_-]{0,4096}(?![\w\-.])/g;

/** The header's `alg`, or null when it does not decode to a JSON object with a string `alg`. */
function jwtAlg(header: string): string | null {
  const json = Buffer.from(header, 'base64url').toString('utf8');
  // Text shaped like a JWT is cheap to write, and each failed JSON.parse costs a thrown error (~17 µs with its
  // stack trace): only text that is a JSON object naming an alg, checked without throwing, is parsed.
  if (!json.includes('"alg"') || !isJsonObject(json)) return null;
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return null; // the check above should make this unreachable; a scan must never fail on text
  }
  const alg = parsed.alg;
  return typeof alg === 'string' && alg.length > 0 && alg.length < 32 ? alg : null;
}

// JSON's whitespace only (JS's \s also takes NBSP, U+2028, U+3000…, which JSON.parse refuses).
const JSON_TOKEN =
  /[ \t\n\r]*(?:("(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*")|(-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)|([{}[\]:,]))/y;

/** Whether `text` is one JSON object (RFC 8259), checked token by token without throwing. */
function isJsonObject(text: string): boolean {
  const stack: string[] = []; // '{' or '['
  // What may come next: a value, an object key (or '}'), ':' , ',' or the closer, or the end.
  let expect: 'value' | 'key' | 'keyOrClose' | 'valueOrClose' | 'colon' | 'commaOrClose' | 'end' = 'value';
  JSON_TOKEN.lastIndex = 0;
  let first = true;
  while (JSON_TOKEN.lastIndex < text.length) {
    const at = JSON_TOKEN.lastIndex;
    const m = JSON_TOKEN.exec(text);
    if (!m) return /^[ \t\n\r]*$/.test(text.slice(at)) && expect === 'end';
    const [, str, scalar, punct] = m;
    if (first && punct !== '{') return false;
    first = false;
    const top = stack[stack.length - 1];
    if (str !== undefined && (expect === 'key' || expect === 'keyOrClose')) expect = 'colon';
    else if ((str !== undefined || scalar !== undefined) && (expect === 'value' || expect === 'valueOrClose'))
      expect = stack.length ? 'commaOrClose' : 'end';
    else if (punct === ':' && expect === 'colon') expect = 'value';
    else if (punct === ',' && expect === 'commaOrClose') expect = top === '{' ? 'key' : 'value';
    else if ((punct === '{' || punct === '[') && (expect === 'value' || expect === 'valueOrClose')) {
      if (stack.length >= 64) return false;
      stack.push(punct);
      expect = punct === '{' ? 'keyOrClose' : 'valueOrClose';
    } else if (
      (punct === '}' && top === '{' && (expect === 'keyOrClose' || expect === 'commaOrClose')) ||
      (punct === ']' && top === '[' && (expect === 'valueOrClose' || expect === 'commaOrClose'))
    ) {
      stack.pop();
      expect = stack.length ? 'commaOrClose' : 'end';
    } else return false;
  }
  return expect === 'end';
}

export function detectJwts(text: string): Finding[] {
  const out: Finding[] = [];
  if (!text.includes('eyJ')) return out;
  const algs = new Map<string, string | null>(); // a header repeated in the text is decoded once
  for (const m of execAll(JWT, text)) {
    const [header, , signature] = m[0].split('.') as [string, string, string];
    let alg = algs.get(header);
    if (alg === undefined) algs.set(header, (alg = jwtAlg(header)));
    if (alg === null) continue;
    const unsecured = alg.toLowerCase() === 'none';
    if (!unsecured && signature.length < 16) continue;
    out.push({
      detector: 'secret',
      rule: 'secret.jwt',
      category: 'jwt',
      severity: unsecured ? 'medium' : 'high',
      start: m.index,
      end: m.index + m[0].length,
      preview: `${maskToken(m[0])} alg=${alg.replace(/[^\w-]/g, '')}`,
    });
  }
  return out;
}

/** All secret detectors. */
export function detectSecrets(text: string): Finding[] {
  const out: Finding[] = [];
  if (ANY_HINT.test(text)) for (const r of SECRET_RULES) runRule(text, r, out);
  return out.concat(detectPrivateKeys(text), detectJwts(text));
}
