// Requests Node's HTTP parser refuses before any route runs still get the JSON error body, and the server keeps serving.
import { expect } from 'chai';
import { connect } from 'node:net';
import { cli, get, startTestServer, type TestServer } from '../support/server.ts';

/** Send raw bytes, read until the server closes the connection. */
function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const sock = connect(port, '127.0.0.1', () => sock.write(bytes));
    sock.setEncoding('utf8');
    sock.on('data', (c: string) => (got += c));
    sock.on('end', () => resolve(got));
    sock.on('error', reject);
  });
}

function parse(answer: string): {
  status: number;
  headers: string;
  body: { error: { code: string; message: string; details: unknown } };
} {
  const [head, body] = answer.split('\r\n\r\n', 2) as [string, string];
  return {
    status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]),
    headers: head.toLowerCase(),
    body: JSON.parse(body),
  };
}

describe('requests refused by the HTTP parser', function () {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('duckdb');
  });
  after(async () => {
    await s?.close();
  });

  it('oversized headers: 431 with the JSON error body', async () => {
    const a = parse(
      await raw(
        s.running.port,
        `POST /api/traces HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\nContent-Length: 2\r\n\r\n{}`,
      ),
    );
    expect(a.status).to.equal(431);
    expect(a.headers).to.include('content-type: application/json');
    expect(a.body.error.code).to.equal('headers_too_large');
    expect(a.body.error.message).to.match(/headers/);
  });

  it('a malformed request line or header: 400 malformed_request', async () => {
    for (const bytes of [
      'GARBAGE\r\n\r\n',
      'GET / HTTP/1.1\r\nHost x\r\n\r\n',
      'POST /api/traces HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
    ]) {
      const a = parse(await raw(s.running.port, bytes));
      expect(a.status, bytes).to.equal(400);
      expect(a.body.error.code).to.equal('malformed_request');
      expect(a.body.error.details).to.have.property('parser').that.matches(/^HPE_/);
    }
  });

  it('a body refused by its declared length (413) closes the connection rather than reading the rest', async () => {
    const k = JSON.parse((await cli(s, ['keys', 'create', '--workspace', 'declared-413', '--json'])).stdout) as {
      key: string;
    };
    // `raw` returns once the server ends the connection after its answer: before, it kept it open to read the 100 GB
    // announced (now it reads at most TRACEGATE_LINGER_MAX_BYTES more of it, test/native/linger.test.ts).
    const a = parse(
      await raw(
        s.running.port,
        `POST /api/traces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${k.key}\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n{}`,
      ),
    );
    expect(a.status).to.equal(413);
    expect(a.headers).to.include('connection: close');
    expect(a.body.error.code).to.equal('payload_too_large');
  });

  it('no Host header, an Expect it cannot meet, CONNECT: the JSON error body too, and the connection closed', async () => {
    const noHost = parse(await raw(s.running.port, 'GET /healthz HTTP/1.1\r\n\r\n'));
    expect(noHost.status).to.equal(400);
    expect(noHost.body.error.code).to.equal('malformed_request');
    expect(noHost.body.error.message).to.match(/Host/);
    const expect417 = parse(await raw(s.running.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n\r\n'));
    expect(expect417.status).to.equal(417);
    expect(expect417.headers).to.include('connection: close');
    expect(expect417.body.error.code).to.equal('expectation_failed');
    const connectAnswer = parse(
      await raw(s.running.port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'),
    );
    expect(connectAnswer.status).to.equal(405);
    expect(connectAnswer.body.error.code).to.equal('method_not_allowed');
    // HTTP/1.0 needs no Host: answered as usual
    expect(await raw(s.running.port, 'GET /healthz HTTP/1.0\r\n\r\n')).to.match(/^HTTP\/1\.1 200 /);
  });

  it('the server keeps answering afterwards', async () => {
    expect((await get(`${s.url}/healthz`)).status).to.equal(200);
  });
});
