// TRACEGATE_MAX_JSON_VALUES in the byte prescan and parseJson, and the native validator, without a server. The
// routes' answers (native and proxy) are in test/native/json-values.test.ts.
import { expect } from 'chai';
import { jsonPrescan } from '../../../platform/json-prescan.ts';
import { parseJson } from '../../../collector/http/body.ts';
import { TracegateError } from '../../../core/errors.ts';
import { countValues, withValues } from '../../support/json-values.ts';

describe('JSON value count limit', () => {
  describe('prescan', () => {
    it('counts every value once (a member once, not key and value), and refuses past the limit', () => {
      for (const text of [
        '1',
        '"s"',
        '[1,2,3]',
        '{"a":1,"b":[true,null,{"c":"d"}]}',
        '[[1],[2,[3]]]',
        withValues(50),
      ]) {
        const n = countValues(JSON.parse(text));
        expect(jsonPrescan(Buffer.from(text), 64, Infinity, n), text).to.equal('ok');
        if (n > 1) expect(jsonPrescan(Buffer.from(text), 64, Infinity, n - 1), text).to.equal('many');
      }
    });

    it('does not count commas or brackets inside strings (escaped quotes included)', () => {
      const text = JSON.stringify({ a: ',,,,[[{{', b: 'x\\",,,"\\\\', c: '\u00e9,\u{1F600},' });
      expect(countValues(JSON.parse(text))).to.equal(4);
      expect(jsonPrescan(Buffer.from(text), 64, Infinity, 4)).to.equal('ok');
    });

    it('a bracket over both limits is reported as too deep', () => {
      expect(jsonPrescan(Buffer.from('[[[[1]]]]'), 3, Infinity, 4)).to.equal('deep');
      expect(jsonPrescan(Buffer.from('[[[[1]]]]'), 4, Infinity, 4)).to.equal('many');
    });

    it('parseJson answers 413 too_many_values with the limit in details, and the shared default applies without one', () => {
      const err = (() => {
        try {
          parseJson(Buffer.from(withValues(1001)), 64, 1000);
        } catch (e) {
          return e;
        }
        return null;
      })();
      expect(err).to.be.instanceOf(TracegateError);
      expect(err).to.include({ status: 413, code: 'too_many_values' });
      expect((err as TracegateError).details).to.deep.equal({ limit: 1000 });
      expect(parseJson(Buffer.from(withValues(1000)), 64, 1000)).to.be.an('object');
      expect(() => parseJson(Buffer.from(withValues(250_001)), 64)).to.throw(/more than 250000 JSON values/);
    });
  });
});

describe('native validation without zod copying every field', () => {
  it('accepts and rejects what the schema does: metadata keys up to 256 characters (code points), nulls of known fields', async () => {
    const { nativeTraceSchema, nativeTraceValidator, withoutNulls } = await import('../../../mappers/native-schema.ts');
    const schema = nativeTraceSchema({ maxStringBytes: 1 << 20 });
    const validate = nativeTraceValidator({ maxStringBytes: 1 << 20 });
    for (const item of [
      { prompt: 'p', metadata: { ['😀'.repeat(129)]: 1 } }, // 258 UTF-16 units, 129 characters
      { prompt: 'p', metadata: { ['k'.repeat(256)]: 1 } },
      { prompt: 'p', metadata: { ['k'.repeat(257)]: 1 } },
      { prompt: 'p', metadata: [] },
      { prompt: 'p', metrics: { promptTokens: null, custom: 3 }, extra: { a: 1 } },
      { prompt: 1 },
    ]) {
      const was = schema.safeParse(withoutNulls(structuredClone(item)));
      const now = validate(structuredClone(item));
      expect(now.success, JSON.stringify(item).slice(0, 80)).to.equal(was.success);
      if (was.success && now.success) expect(now.data).to.deep.equal(was.data);
    }
  });
});
