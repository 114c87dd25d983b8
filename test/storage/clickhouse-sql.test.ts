// The literal helpers are the only thing between input and ClickHouse SQL (18.16 has no query
// parameters), so check them against the real server: every string must come back unchanged.
import { expect } from 'chai';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { ident, str, strList, strSet, u64 } from '../../storage/clickhouse-sql.ts';
import { clickhouseUrl, useSharedClickHouse } from '../support/shared.ts';

describe('clickhouse-sql literals', function () {
  useSharedClickHouse();
  let client: ClickHouseClient;
  before(function () {
    client = createClient({
      url: clickhouseUrl(),
      compression: { request: false, response: false },
      log: { level: ClickHouseLogLevel.OFF },
    });
  });
  after(async function () {
    await client.close();
  });

  const echo = async (sql: string) =>
    (await (await client.query({ query: `SELECT ${sql} AS v`, format: 'JSONEachRow' })).json<{ v: unknown }>())[0]?.v;

  it('round-trips hostile strings through str()', async function () {
    const ascii = Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join('');
    const cases = [
      '',
      "'",
      '\\',
      "\\'",
      "'\\",
      'a\'b"c`d',
      "x'; DROP TABLE t; --",
      '\\x41',
      '\\0',
      '\\N',
      'trailing\\',
      ascii,
      'é 世界 😀 🏳️‍🌈 \u2028\u2029 \ufeff',
      '{name:String}',
      '?',
      '$1',
      '%s',
    ];
    for (const s of cases) expect(await echo(str(s)), JSON.stringify(s)).to.equal(s);
  });

  it('builds IN lists and uint64 literals', async function () {
    expect(await echo(`'b' IN ${strList(['a', "b'", 'b'])}`)).to.equal(1);
    expect(await echo(`toString(${u64('18446744073709551615')})`)).to.equal('18446744073709551615');
    expect(() => u64('1 OR 1=1')).to.throw(RangeError);
    expect(() => u64('-1')).to.throw(RangeError);
    expect(() => strList([])).to.throw(RangeError);
  });

  it('builds IN sets as one array literal: hostile strings match themselves only', async function () {
    const hostile = ["'", '\\', "x'; DROP TABLE t; --", '\u0000', 'é 世界 😀', "a'b"];
    expect(await echo(`'b' IN ${strSet(['a', "b'", 'b'])}`)).to.equal(1);
    expect(await echo(`'c' IN ${strSet(['a', "b'", 'b'])}`)).to.equal(0);
    for (const h of hostile) expect(await echo(`${str(h)} IN ${strSet(hostile)}`), JSON.stringify(h)).to.equal(1);
    expect(await echo(`'a' IN ${strSet(hostile)}`)).to.equal(0);
    expect(() => strSet([])).to.throw(RangeError);
  });

  it('accepts only plain identifiers', function () {
    expect(ident('tracegate_1')).to.equal('tracegate_1');
    for (const bad of ['', '1abc', 'a.b', 'a-b', 'a b', 'a;drop', '`a`']) expect(() => ident(bad)).to.throw(RangeError);
  });
});
