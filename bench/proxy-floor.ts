// The floor under the proxy's added latency: the least a durable proxy can do, as its own process. Plain node:http
// in, the same undici pool out to the fake provider, and the exchange appended to a file before the answer goes
// out (a stream: passed through chunk by chunk, appended at its end) (O_DSYNC, so the write returns once it is on disk, as tracegate's spool does). No auth, no governance, no
// parsing beyond what it forwards. FSYNC=0 leaves the append in the page cache, to show what the disk costs.
import { createServer } from 'node:http';
import { constants, mkdtempSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';

const upstream = new URL(process.env.UPSTREAM!);
const pool = new Pool(upstream.origin, { connections: 256 });
const dir = mkdtempSync(join(tmpdir(), 'tracegate-proxy-floor-'));
const sync = process.env.FSYNC !== '0' ? constants.O_DSYNC : 0;
const log = await open(
  join(dir, 'exchanges'),
  constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | sync,
  0o600,
);

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on(
    'end',
    () =>
      void (async () => {
        const body = Buffer.concat(chunks);
        const up = await pool.request({
          method: 'POST',
          path: `${upstream.pathname.replace(/\/$/, '')}/responses`,
          body,
          headers: { 'content-type': 'application/json' },
        });
        const type = String(up.headers['content-type'] ?? 'application/json');
        if (type.startsWith('text/event-stream')) {
          // A stream: each chunk written as it arrives, the exchange appended once it ended.
          res.writeHead(up.statusCode, { 'content-type': type, 'cache-control': 'no-cache' });
          const chunks: Buffer[] = [];
          for await (const chunk of up.body) {
            res.write(chunk);
            chunks.push(chunk as Buffer);
          }
          await log.write(Buffer.concat([body, ...chunks, Buffer.from('\n')]));
          res.end();
          return;
        }
        const answer = Buffer.from(await up.body.arrayBuffer());
        await log.write(Buffer.concat([body, answer, Buffer.from('\n')]));
        res.writeHead(up.statusCode, { 'content-type': type });
        res.end(answer);
      })().catch(() => {
        res.statusCode = 502;
        res.end();
      }),
  );
});
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  process.send?.({ url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}` });
});
process.on('SIGTERM', () => {
  server.close();
  void Promise.all([log.close(), pool.close()]).finally(() => {
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  });
});
