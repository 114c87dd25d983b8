// Masked previews: enough to recognise a finding in a UI, never enough to reuse it.

/** 'sk-p…(164)': the first `keep` characters, an ellipsis and the full length. */
export function maskToken(raw: string, keep = 4): string {
  const k = Math.min(keep, Math.max(0, Math.floor(raw.length / 4)));
  return `${raw.slice(0, k)}…(${raw.length})`;
}

/** 'j***@e***.com' */
export function maskEmail(raw: string): string {
  const at = raw.lastIndexOf('@');
  if (at < 0) return maskToken(raw, 1);
  const local = raw.slice(0, at);
  const domain = raw.slice(at + 1);
  const dot = domain.lastIndexOf('.');
  const host = dot > 0 ? domain.slice(0, dot) : domain;
  const tld = dot > 0 ? domain.slice(dot) : '';
  return `${local.slice(0, 1)}***@${host.slice(0, 1)}***${tld}`;
}

/** Digits only, all but the last `keepLast` replaced: '•••• •••• •••• 1111' style without keeping layout: '****1111 (16 digits)'. */
export function maskDigits(raw: string, keepLast = 4): string {
  const digits = raw.replace(/\D/g, '');
  const tail = keepLast > 0 ? digits.slice(-keepLast) : '';
  return `${'*'.repeat(4)}${tail} (${digits.length} digits)`;
}

/** 'DE**…(22)': country code and length. */
export function maskIban(compact: string): string {
  return `${compact.slice(0, 2)}**…(${compact.length})`;
}

/** "203.*.*.*" / "2001:…(19)" */
export function maskIp(raw: string): string {
  if (raw.includes(':')) {
    const parts = raw.split(':');
    return `${parts[0]}:…(${raw.length})`;
  }
  const o = raw.split('.');
  return `${o[0]}.*.*.*`;
}

/** A short, single-line excerpt of an injection phrase (PII and secrets in it are masked first: injection.ts maskedPhrase). */
export function excerpt(raw: string, max = 48): string {
  const flat = raw.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}
