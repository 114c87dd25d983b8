// Integer settings are decimal digits and nothing else: Number() used to read 0x10, 1e3, 0b1 and " 0x10 ".
import { expect } from 'chai';
import { configSchema, loadConfig } from '../../../config/index.ts';

/** Every setting whose value is a number (found from the schema's defaults, so a new one is covered too). */
const INTEGER_SETTINGS = Object.entries(configSchema.parse({}))
  .filter(([, v]) => typeof v === 'number')
  .map(([k]) => k);

describe('integer settings', () => {
  it('covers every numeric setting, including the new limits', () => {
    expect(INTEGER_SETTINGS).to.include.members([
      'PORT',
      'MAX_BODY_BYTES',
      'MAX_JSON_DEPTH',
      'MAX_JSON_VALUES',
      'MAX_INFLIGHT_BODY_BYTES',
      'FLUSH_INTERVAL_MS',
    ]);
    expect(INTEGER_SETTINGS.length).to.be.greaterThan(25);
  });

  it('refuse hex, binary, octal, exponents, signs, fractions, separators and surrounding spaces, naming the variable', () => {
    const bad = [
      '0x10',
      '1e3',
      ' 0x10 ',
      ' 16',
      '16 ',
      '\t16',
      '0b1',
      '0o7',
      '+16',
      '-0',
      '16.0',
      '1_000',
      '1,000',
      'Infinity',
      '16px',
      '٣',
    ];
    for (const name of INTEGER_SETTINGS) {
      for (const value of bad) {
        expect(() => loadConfig({ [`TRACEGATE_${name}`]: value }), `${name}=${JSON.stringify(value)}`).to.throw(
          new RegExp(`TRACEGATE_${name}: must be a whole number in decimal digits`),
        );
      }
    }
  });

  it('accept decimal digits (leading zeros included) within each bound, and unset or empty means the default', () => {
    expect(loadConfig({ TRACEGATE_PORT: '16' }).PORT).to.equal(16);
    expect(loadConfig({ TRACEGATE_PORT: '0016' }).PORT).to.equal(16);
    expect(loadConfig({ TRACEGATE_MAX_BODY_BYTES: '1000000' }).MAX_BODY_BYTES).to.equal(1_000_000);
    expect(loadConfig({ TRACEGATE_PORT: '' }).PORT).to.equal(4318);
    expect(loadConfig({}).MAX_JSON_DEPTH).to.equal(64);
    expect(() => loadConfig({ TRACEGATE_MAX_BODY_BYTES: '1000' })).to.throw(/TRACEGATE_MAX_BODY_BYTES/); // below its minimum of 1024
    expect(() => loadConfig({ TRACEGATE_MAX_JSON_DEPTH: '1001' })).to.throw(/TRACEGATE_MAX_JSON_DEPTH/);
  });

  it('TRACEGATE_MAX_JSON_VALUES and TRACEGATE_MAX_INFLIGHT_BODY_BYTES: defaults, bounds, and the budget holds at least one full body', () => {
    const c = loadConfig({});
    expect(c.MAX_JSON_VALUES).to.equal(250_000);
    // Unset, it holds one body at the largest limit: the agents export route's (128 MiB).
    expect(c.MAX_INFLIGHT_BODY_BYTES).to.equal(128 * 1024 * 1024);
    expect(c.AGENTS_MAX_BODY_BYTES).to.equal(128 * 1024 * 1024);
    expect(c.AGENTS_MAX_JSON_VALUES).to.equal(2_000_000);
    expect(() => loadConfig({ TRACEGATE_MAX_JSON_VALUES: '999' })).to.throw(/TRACEGATE_MAX_JSON_VALUES/);
    expect(() => loadConfig({ TRACEGATE_MAX_INFLIGHT_BODY_BYTES: String(20 * 1024 * 1024 - 1) })).to.throw(
      /TRACEGATE_MAX_INFLIGHT_BODY_BYTES: .*below TRACEGATE_MAX_BODY_BYTES/,
    );
    expect(
      loadConfig({ TRACEGATE_MAX_INFLIGHT_BODY_BYTES: '4096', TRACEGATE_MAX_BODY_BYTES: '4096' })
        .MAX_INFLIGHT_BODY_BYTES,
    ).to.equal(4096);
    // Unset, it holds at least one body at the limit.
    expect(loadConfig({ TRACEGATE_MAX_BODY_BYTES: String(200 * 1024 * 1024) }).MAX_INFLIGHT_BODY_BYTES).to.equal(
      200 * 1024 * 1024,
    );
    // Set below the agents route's default limit, it bounds that route; below an explicit one, it is refused.
    expect(loadConfig({ TRACEGATE_MAX_INFLIGHT_BODY_BYTES: String(32 * 1024 * 1024) }).AGENTS_MAX_BODY_BYTES).to.equal(
      32 * 1024 * 1024,
    );
    expect(() =>
      loadConfig({
        TRACEGATE_MAX_INFLIGHT_BODY_BYTES: String(32 * 1024 * 1024),
        TRACEGATE_AGENTS_MAX_BODY_BYTES: String(64 * 1024 * 1024),
      }),
    ).to.throw(/below TRACEGATE_AGENTS_MAX_BODY_BYTES/);
  });
});
