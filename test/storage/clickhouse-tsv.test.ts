// Rows written as TabSeparated (storage/clickhouse-tsv.ts) read back exactly, on ClickHouse 18.16 and 26 (chDB):
// every character that needs escaping, in fields and in array elements, and bodies of several chunks.
import { expect } from 'chai';
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { insertTsv, tsvChunks, tsvLine, TsvWriter } from '../../storage/clickhouse-tsv.ts';
import { clickhouseUrl, uniqueDatabase, useSharedClickHouse } from '../support/shared.ts';
import { chdbConnection } from './harness.ts';

const ALL_ASCII = Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join('');
const HARD = [
  '',
  ALL_ASCII,
  "it's",
  'back\\slash',
  '\\N',
  '\\t literally',
  'tab\there',
  'line\nbreak',
  'cr\r\n',
  'nul\u0000end',
  "['not', 'an array']",
  '« é – 漢字 🙂 »',
  '\u2028\u2029',
  'x'.repeat(3 * 1024 * 1024), // longer than a chunk
];

describe('TabSeparated rows (clickhouse-tsv)', function () {
  it('escapes a field only where ClickHouse needs it, and quotes array strings', function () {
    expect(tsvLine(['a', 'b', 'c', 'd'], { a: 'x\ty\\z\n', b: 12.5, c: ["o'k", 'p\tq'], d: [1, 2] })).to.equal(
      "x\\ty\\\\z\\n\t12.5\t['o\\'k','p\\tq']\t[1,2]\n",
    );
    expect(tsvLine(['a'], { a: [] })).to.equal('[]\n');
  });

  it('refuses what it cannot write, naming the column', function () {
    expect(() => tsvLine(['a'], {})).to.throw('a: value of type undefined');
    expect(() => tsvLine(['n'], { n: Number.NaN })).to.throw('n: not a finite number');
    expect(() => tsvLine(['b'], { b: true })).to.throw('b: value of type boolean');
    expect(() => tsvLine(['l'], { l: [null] })).to.throw('l: array element of type object');
  });

  it('makes the body in chunks of about 1 MB, larger for a longer row, every line whole and in order', function () {
    const rows = Array.from({ length: 3000 }, (_, i) => ({ s: `${i}`.padEnd(1000, '.') }));
    rows.splice(1500, 0, { s: 'y'.repeat(2 * 1024 * 1024) });
    const chunks = tsvChunks(['s'], rows);
    expect(chunks.length).to.be.at.least(3);
    expect(chunks[0]!.length).to.be.within(1000 * 1000, 1024 * 1024);
    for (const c of chunks) expect(c.length).to.be.at.most(6 * 1024 * 1024 + 3);
    const text = Buffer.concat(chunks).toString('utf8');
    expect(
      text
        .split('\n')
        .slice(0, -1)
        .map((l) => l.length),
    ).to.deep.equal(rows.map((r) => r.s.length));
  });

  it('a writer sets a byte of a line written earlier and leaves lines out of the body, in any chunk', function () {
    const w = new TsvWriter();
    const at: number[] = [];
    const bytes: number[] = [];
    for (let i = 0; i < 2500; i++) {
      at.push(w.line(`1\t${i}`.padEnd(999, 'é') + '\n'));
      bytes.push(w.lastBytes);
    }
    for (const i of [0, 1200, 2499]) w.patch(at[i]!, '2');
    const lines = Buffer.concat(
      w.body([
        [at[1]!, bytes[1]!],
        [at[1500]!, bytes[1500]!],
      ]),
    )
      .toString('utf8')
      .split('\n')
      .slice(0, -1);
    expect(w.body().length).to.be.at.least(3); // the lines cross chunks
    expect(lines.length).to.equal(2498);
    expect(lines.filter((l) => l.startsWith('2\t')).map((l) => l.split('\t')[1]!.replace(/é+$/, ''))).to.deep.equal([
      '0',
      '1200',
      '2499',
    ]);
    expect(lines.some((l) => /^1\t1(500)?é/.test(l))).to.equal(false);
  });

  for (const [name, connect] of [
    [
      'ClickHouse 18.16',
      () => createClient({ url: clickhouseUrl(), compression: { request: false, response: false } }),
    ],
    ['ClickHouse 26 (chDB)', () => createClient({ connection: chdbConnection() as never })],
  ] as Array<[string, () => ClickHouseClient]>) {
    describe(name, function () {
      this.timeout(60_000);
      if (name === 'ClickHouse 18.16') useSharedClickHouse();
      const db = uniqueDatabase('tg_tsv');
      let ch: ClickHouseClient;
      before(async () => {
        ch = connect();
        await ch.command({ query: `CREATE DATABASE IF NOT EXISTS ${db}` });
        await ch.command({
          query: `CREATE TABLE ${db}.t (id UInt32, s String, a Array(String), n Array(UInt64), f Float64, i Int64, u UInt64) ENGINE = MergeTree ORDER BY id`,
        });
      });
      after(async () => {
        await ch?.command({ query: `DROP DATABASE IF EXISTS ${db}` });
        await ch?.close();
      });

      it('reads back every string, array and number as written', async () => {
        const rows = HARD.map((s, id) => ({
          id,
          s,
          a: [s, ...HARD.slice(0, 11)],
          n: [0, id, 2 ** 53 - 1],
          f: id === 0 ? 1e-7 : -id / 3,
          i: -id,
          u: '18446744073709551615',
        }));
        rows.push({ id: 99, s: 'lone \ud800 surrogate', a: ['\udc00'], n: [], f: 0, i: 0, u: '0' });
        await insertTsv(ch, `${db}.t`, rows);
        const back = await (
          await ch.query({
            query: `SELECT id, s, a, n, f, i, toString(u) AS u FROM ${db}.t ORDER BY id`,
            format: 'JSONEachRow',
          })
        ).json<{
          id: number;
          s: string;
          a: string[];
          n: Array<string | number>;
          f: number;
          i: string | number;
          u: string;
        }>();
        expect(back.length).to.equal(rows.length);
        for (let k = 0; k < HARD.length; k++) {
          const r = rows[k]!;
          const b = back[k]!;
          expect(b.s, `row ${k}`).to.equal(r.s);
          expect(b.a, `row ${k}`).to.deep.equal(r.a);
          expect(b.n.map(Number)).to.deep.equal(r.n);
          expect(b.f).to.equal(r.f);
          expect(Number(b.i)).to.equal(r.i);
          expect(b.u).to.equal(r.u);
        }
        // Not valid UTF-16: written as U+FFFD, the row kept.
        expect(back[HARD.length]).to.include({ s: 'lone \ufffd surrogate' });
        expect(back[HARD.length]!.a).to.deep.equal(['\ufffd']);
      });

      it('a row that cannot be written fails the insert with nothing of it stored, even after a chunk of good rows', async () => {
        const count = async () =>
          Number(
            (
              await (
                await ch.query({ query: `SELECT count() AS n FROM ${db}.t`, format: 'JSONEachRow' })
              ).json<{ n: string }>()
            )[0]!.n,
          );
        const before = await count();
        const good = Array.from({ length: 3000 }, (_, i) => ({
          id: 1000 + i,
          s: 'z'.repeat(1000),
          a: [],
          n: [],
          f: 0,
          i: 0,
          u: '1',
        }));
        const rows: Array<Record<string, unknown>> = [
          ...good,
          { id: 5000, s: 'late', a: [], n: [], f: Number.NaN, i: 0, u: '1' },
        ];
        let err: unknown = null;
        await insertTsv(ch, `${db}.t`, rows).catch((e: unknown) => {
          err = e;
        });
        expect(String(err)).to.include('f: not a finite number');
        expect(await count()).to.equal(before);
      });
    });
  }
});
