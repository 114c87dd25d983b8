// Webhook signatures (header grammar, verification against several secrets), the sealed secrets, the
// security_alert alert rule and votes in usage rows: the pure parts.
import { expect } from 'chai';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpError } from '../../../collector/http/errors.ts';
import {
  deliveryKey,
  signedDelivery,
  skewSeconds,
  verifyingSecret,
} from '../../../collector/receivers/webhook-signature.ts';
import type { SecurityAlertRecord } from '../../../core/enrichment-records.ts';
import type { TracegateError } from '../../../core/errors.ts';
import type { UsageRow } from '../../../core/ports/storage.ts';
import { AlertEvaluator, alertRuleSchema } from '../../../processors/alerts.ts';
import { loadSecretsKey, secretBox } from '../../../processors/secret-box.ts';
import { mergeFeedback } from '../../../storage/signals.ts';

const hex = (key: string, ts: string, body: string) => createHmac('sha256', key).update(`${ts}.${body}`).digest('hex');

function refusal(fn: () => unknown): HttpError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HttpError) return err;
    throw err;
  }
  throw new Error('not refused');
}

describe('webhook signature headers', () => {
  it('reads none as unsigned, one or more v1 values, other schemes ignored', () => {
    expect(signedDelivery(undefined, undefined)).to.equal(null);
    const a = 'a'.repeat(64);
    const b = 'B'.repeat(64);
    const d = signedDelivery(' 1787392800 ', `v1=${a}, v0=xyz v1=${b},`);
    expect(d!.timestamp).to.equal('1787392800');
    expect(d!.signatures.map((x) => x.toString('hex'))).to.deep.equal([a, b.toLowerCase()]);
  });

  it('refuses malformed headers with 400 malformed_signature naming the header', () => {
    const cases: Array<[string | undefined, string | undefined, string]> = [
      ['1', undefined, 'X-Service-Signature'],
      [undefined, `v1=${'a'.repeat(64)}`, 'X-Service-Delivery-Timestamp'],
      ['1.5', `v1=${'a'.repeat(64)}`, 'X-Service-Delivery-Timestamp'],
      ['12345678901', `v1=${'a'.repeat(64)}`, 'X-Service-Delivery-Timestamp'],
      ['1', 'v1=abc', 'X-Service-Signature'],
      ['1', `v2=${'a'.repeat(64)}`, 'X-Service-Signature'],
      ['1', 'sha256', 'X-Service-Signature'],
      ['1', Array.from({ length: 17 }, () => `v1=${'a'.repeat(64)}`).join(','), 'X-Service-Signature'],
    ];
    for (const [ts, sig, header] of cases) {
      const e = refusal(() => signedDelivery(ts, sig));
      expect([e.status, e.code], `${ts} ${sig}`).to.deep.equal([400, 'malformed_signature']);
      expect(e.details).to.deep.equal({ header });
    }
  });

  it('verifies the raw bytes against any active secret; rotation and tampering', () => {
    const raw = Buffer.from('{"a": 1}');
    const ts = '1787392800';
    const old = { secretId: 'whs_old', key: Buffer.from('whsec_old') };
    const fresh = { secretId: 'whs_new', key: Buffer.from('whsec_new') };
    const d = (...keys: string[]) => signedDelivery(ts, keys.map((k) => `v1=${hex(k, ts, raw.toString())}`).join(','))!;
    expect(verifyingSecret(d('whsec_old'), raw, [old, fresh])).to.equal('whs_old');
    expect(verifyingSecret(d('whsec_new'), raw, [old, fresh])).to.equal('whs_new');
    expect(verifyingSecret(d('whsec_other', 'whsec_new'), raw, [old, fresh])).to.equal('whs_new');
    expect(verifyingSecret(d('whsec_old'), raw, [fresh])).to.equal(null);
    expect(verifyingSecret(d('whsec_old'), Buffer.from('{"a":1}'), [old])).to.equal(null); // re-serialized: not the bytes signed
    const other = signedDelivery('1787392801', `v1=${hex('whsec_old', ts, raw.toString())}`)!;
    expect(verifyingSecret(other, raw, [old])).to.equal(null); // the timestamp is signed too
    expect(deliveryKey(d('whsec_old'), raw)).to.equal(deliveryKey(d('whsec_new'), raw));
    expect(deliveryKey(other, raw)).to.not.equal(deliveryKey(d('whsec_old'), raw));
    expect(skewSeconds(d('whsec_old'), 1_787_392_500_000)).to.equal(300);
  });
});

describe('sealed secrets', () => {
  it('open only with the same key and the same row', () => {
    const box = secretBox(randomBytes(32));
    const sealed = box.seal('whsec_x', 'row-1');
    expect(sealed).to.not.include('whsec_x');
    expect(box.seal('whsec_x', 'row-1')).to.not.equal(sealed); // a fresh nonce each time
    expect(box.open(sealed, 'row-1')).to.equal('whsec_x');
    const fail = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return err as TracegateError;
      }
      throw new Error('opened');
    };
    expect(fail(() => box.open(sealed, 'row-2')).code).to.equal('secret_unreadable');
    expect(fail(() => secretBox(randomBytes(32)).open(sealed, 'row-1')).code).to.equal('secrets_key_mismatch');
    const parts = sealed.split('.');
    parts[4] = Buffer.from('tampered').toString('base64url');
    expect(fail(() => box.open(parts.join('.'), 'row-1')).code).to.equal('secret_unreadable');
    expect(fail(() => box.open('nonsense', 'row-1')).kind).to.equal('unavailable');
  });

  it('make the key file once, owner-only, or take TRACEGATE_SECRETS_KEY', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tracegate-secrets-'));
    try {
      const k = loadSecretsKey(join(dir, 'keys'));
      expect(k).to.have.length(32);
      expect(loadSecretsKey(join(dir, 'keys')).equals(k)).to.equal(true);
      expect(statSync(join(dir, 'keys', 'secrets.key')).mode & 0o077).to.equal(0);
      expect(readFileSync(join(dir, 'keys', 'secrets.key'), 'utf8')).to.match(/^[0-9a-f]{64}$/);
      const configured = 'ab'.repeat(32);
      expect(loadSecretsKey(join(dir, 'keys'), configured).toString('hex')).to.equal(configured);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('security_alert alert rule', () => {
  const alert = (id: string, severity: SecurityAlertRecord['severity'], ws = 'ws'): SecurityAlertRecord => ({
    recordType: 'security_alert',
    workspaceId: ws,
    alertId: id,
    source: 'scanner',
    severity,
    rawSeverity: severity,
    title: `alert ${id}`,
    category: '',
    externalId: '',
    detectedAtMs: 0,
    receivedAtMs: 0,
    traceId: `t-${id}`,
    spanId: '',
    requestId: '',
    responseId: '',
    sessionId: '',
    userId: '',
    signature: 'unsigned',
    secretId: '',
    correlation: '{}',
    body: '{}',
  });

  it('fires on alerts at or above its severity, counting a redelivered alert once', () => {
    const rule = alertRuleSchema.parse({ id: 'sec', kind: 'security_alert', severity: 'high', cooldownSeconds: 0 });
    const ev = new AlertEvaluator();
    expect(ev.evaluate('ws', [rule], [], [], 1_000, undefined, [alert('a', 'medium')])).to.deep.equal([]);
    const fired = ev.evaluate('ws', [rule], [], [], 2_000, undefined, [alert('b', 'high'), alert('c', 'critical')]);
    expect(fired).to.have.length(1);
    expect(fired[0]).to.include({ kind: 'security_alert', traceId: 't-c', value: 2, severity: 'high' });
    expect(fired[0]!.message).to.match(/critical security alert from scanner: alert c/);
    expect(ev.evaluate('ws', [rule], [], [], 3_000, undefined, [alert('c', 'critical')])).to.deep.equal([]);
    expect(ev.evaluate('ws', [rule], [], [], 3_000, undefined, [alert('d', 'critical', 'other-ws')])).to.deep.equal([]);
  });

  it('with a threshold, fires once the window holds more alerts than it', () => {
    const rule = alertRuleSchema.parse({ id: 'sec', kind: 'security_alert', severity: 'low', threshold: 2 });
    const ev = new AlertEvaluator();
    expect(ev.evaluate('ws', [rule], [], [], 1_000, undefined, [alert('a', 'low'), alert('b', 'low')])).to.have.length(
      0,
    );
    expect(ev.evaluate('ws', [rule], [], [], 2_000, undefined, [alert('c', 'low')])).to.have.length(1);
  });
});

describe('votes in usage rows', () => {
  const row = (bucket: string, key: string, requests: number): UsageRow => ({
    bucketStart: bucket,
    key,
    requests,
    errors: 0,
    errorRate: 0,
    promptTokens: 0,
    completionTokens: 0,
    totalTokens: 0,
    costUsd: 0,
    p50Ms: 0,
    p95Ms: 0,
    p99Ms: 0,
    feedbackUp: 0,
    feedbackDown: 0,
  });
  it('adds each trace’s votes under its group, rows of their own where no call is, in (bucket, key) order', () => {
    const h0 = '2026-01-01T00:00:00.000Z';
    const h1 = '2026-01-01T01:00:00.000Z';
    const rows = [row(h0, 'a', 3), row(h1, 'b', 1)];
    const merged = mergeFeedback(
      rows,
      [
        { bucketSec: Date.parse(h0) / 1000, traceId: 't-a', up: 2, down: 1 },
        { bucketSec: Date.parse(h0) / 1000, traceId: 't-b', up: 1, down: 0 },
        { bucketSec: Date.parse(h1) / 1000, traceId: 'unknown', up: 0, down: 4 },
      ],
      new Map([
        ['t-a', 'a'],
        ['t-b', 'b'],
      ]),
    );
    expect(merged.map((r) => [r.bucketStart, r.key, r.requests, r.feedbackUp, r.feedbackDown])).to.deep.equal([
      [h0, 'a', 3, 2, 1],
      [h0, 'b', 0, 1, 0],
      [h1, '', 0, 0, 4],
      [h1, 'b', 1, 0, 0],
    ]);
  });
});
