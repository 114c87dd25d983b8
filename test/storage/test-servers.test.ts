// The throwaway-server helpers themselves, including the stop/kill/restart cycle other suites
// rely on for "ClickHouse went away during ingestion" tests.
import { expect } from 'chai';
import { connect } from 'node:net';
import { startClickHouse } from '../support/clickhouse.ts';
import { startRedis } from '../support/redis.ts';
import { ClickHouseStorage } from '../../storage/clickhouse.ts';
import { emptySpan } from '../../core/record.ts';

const span = (spanId: string) => ({
  ...emptySpan('ws', 'native'),
  traceId: 't',
  spanId,
  startTimeNs: '1763787000123456789',
  endTimeNs: '1763787000223456789',
  ingestedAtMs: 1,
});

describe('test servers', function () {
  this.timeout(120_000);

  it('ClickHouse: data survives kill and graceful stop; the client reconnects after restart', async function () {
    const ch = await startClickHouse();
    if (ch.external) this.skip();
    const s = new ClickHouseStorage({ url: ch.url, database: 'restart_test', requestTimeoutMs: 5_000 });
    try {
      await s.init();
      await s.insertSpans([span('a')]);
      await ch.kill();
      expect(await s.ping()).to.equal(false);
      const err = await s.insertSpans([span('b')]).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(Error);
      await ch.restart();
      await s.insertSpans([span('b')]);
      await ch.stop();
      await ch.restart();
      expect(await s.ping()).to.equal(true);
      expect(await s.countSpans('ws')).to.equal(2);
    } finally {
      await s.close();
      await ch.dispose();
    }
  });

  it('Redis: starts on a loopback port and answers PING', async function () {
    const redis = await startRedis();
    try {
      const { hostname, port } = new URL(redis.url);
      const reply = await new Promise<string>((resolve, reject) => {
        const sock = connect(Number(port), hostname);
        sock.on('error', reject);
        sock.on('connect', () => sock.write('PING\r\n'));
        sock.on('data', (d) => {
          sock.destroy();
          resolve(d.toString());
        });
      });
      expect(reply).to.equal('+PONG\r\n');
    } finally {
      await redis.stop();
    }
  });
});
