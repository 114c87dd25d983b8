// Wires config → storage → pipeline → app, listens, and shuts down gracefully on SIGTERM/SIGINT.
import { chmodSync, mkdirSync, renameSync, statSync, writeFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { DataDirInUse, lockDataDir } from '../platform/data-dir-lock.ts';
import { join } from 'node:path';
import { createServer, type Server, type ServerOptions } from 'node:http';
import { answerClientErrors } from './http/client-error.ts';
import { lingeringResponse } from './http/linger.ts';
import type { Config } from '../config/index.ts';
import { WorkerStorage } from '../storage/worker-storage.ts';
import { initInBackground } from '../storage/startup.ts';
import type { Storage } from '../core/ports/storage.ts';
import { createApp } from './app.ts';
import { createLogger, type Logger } from '../platform/logger.ts';
import { createMetrics } from './http/metrics.ts';
import { KeyVerifier } from './auth/key-verifier.ts';
import { RateLimits } from './http/rate-limit.ts';
import { SettingsStore } from './workspaces/settings.ts';
import { LastKnown, lastKnownFile } from './workspaces/last-known.ts';
import { Pipeline } from '../pipeline/pipeline.ts';
import { createEnrichment, type Enrichment } from '../processors/index.ts';
import { loadSigningKey, publishKeys } from '../processors/signing.ts';
import { ProcessorWorker } from '../pipeline/processor-worker.ts';
import { ChainHeadStore, storeIdentity } from '../processors/chain-heads.ts';
import { headsOf } from '../processors/verification.ts';
import { mainAuditChain } from '../processors/audit.ts';
import { loadSecretsKey, secretBox } from '../processors/secret-box.ts';
import { WebhookSecrets } from './workspaces/webhook-secrets.ts';

export interface Running {
  server: Server;
  port: number;
  storage: Storage;
  pipeline: Pipeline;
  enrichment: Enrichment;
  settings: SettingsStore;
  log: Logger;
  close(): Promise<void>;
}

/**
 * DATA_DIR holds prompts (the spool, the embedded store), provider keys and webhook secrets (the settings): only
 * the service's user may read it. Files are created owner-only too, so a copy moved out keeps that.
 */
export function privateDataDir(dir: string, log: Pick<Logger, 'warn'>): void {
  process.umask(0o077);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    if ((statSync(dir).mode & 0o077) !== 0) chmodSync(dir, 0o700);
  } catch (err) {
    log.warn({ err, dir }, 'could not make the data directory private (chmod 700); other users may read it');
  }
}

/**
 * The DATA_DIR lock, tried again for half a second: a CLI command probes it for a moment to learn whether a server
 * runs (bin/shared/ops.ts), and a server starting just then must not take that for another server.
 */
async function lockDataDirSoon(dir: string): Promise<() => void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await lockDataDir(dir);
    } catch (err) {
      if (!(err instanceof DataDirInUse) || attempt >= 5) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

export async function startServer(config: Config, opts: { storage?: Storage; log?: Logger } = {}): Promise<Running> {
  const log = opts.log ?? createLogger(config.LOG_LEVEL);
  privateDataDir(config.DATA_DIR, log);
  const unlock = await lockDataDirSoon(config.DATA_DIR);
  try {
    return await start(config, log, opts, unlock);
  } catch (e) {
    unlock();
    throw e;
  }
}

async function start(config: Config, log: Logger, opts: { storage?: Storage }, unlock: () => void): Promise<Running> {
  // Storage runs on its own thread: inserts and queries never block request handling.
  let storage: Storage = opts.storage ?? new WorkerStorage(config);
  let stopInit = () => {};
  try {
    await storage.init();
  } catch (err) {
    // The embedded store failing to open is a real fault (a lock, a damaged file); a remote one may just be down,
    // unless it answered that it is set up wrongly.
    if (storage.kind !== 'clickhouse' || (err as Error).name === 'StorageConfigError') throw err;
    ({ storage, stop: stopInit } = initInBackground(storage, log, err));
  }
  const metrics = createMetrics();
  const lastKnown = new LastKnown(lastKnownFile(config.DATA_DIR));
  const settings = new SettingsStore(storage, config, 5_000, (o, m) => log.warn(o, m), lastKnown);
  // The processor chain (scanning, hashing: the heavy part, with enrichment on) and the spool run on their own thread
  // (pipeline/processor-thread.ts); this thread keeps an audit chain of its own for what happens outside ingestion
  // (rejected auth, admin changes), whose records it hands to that thread to spool.
  const store = storeIdentity(config);
  const auditHeads = new ChainHeadStore(join(config.DATA_DIR, 'keys'), 'audit-main', store);
  const enrichment = createEnrichment({
    dataDir: config.DATA_DIR,
    enabled: false,
    settings,
    log,
    previousAuditHeads: auditHeads.current(),
  });
  if (config.ENRICHMENT) loadSigningKey(enrichment.keysDir); // created now, so its public key is published before the first trace
  const stopPublishing = config.ENRICHMENT ? publishKeys(storage, enrichment.keysDir, log) : () => {};
  const processors = new ProcessorWorker({
    dataDir: config.DATA_DIR,
    enabled: config.ENRICHMENT,
    fsync: config.SPOOL_FSYNC,
    logLevel: config.LOG_LEVEL,
    maxFindingsPerSpan: config.MAX_FINDINGS_PER_SPAN,
    signEachTrace: config.SIGN_EACH_TRACE,
    store,
    settings,
    youngGenMb: config.WORKER_YOUNG_GEN_MB,
  });
  const pipeline = new Pipeline({
    config,
    storage,
    logger: log,
    closeTimeoutMs: config.SHUTDOWN_FLUSH_MS,
    host: processors,
    onDurable: (records) => auditHeads.durable(headsOf(records, 'audit')),
    chain: mainAuditChain(enrichment.audit, auditHeads),
    onFlush: (rows, ms) => {
      metrics.flushRows.observe(rows);
      metrics.flushSeconds.observe(ms / 1000);
    },
    onRefused: (rows) => metrics.refused.inc(rows),
  });
  await pipeline.start();
  // Batches sign their chains' heads at most once a second; this signs what an idle collector's last batches left
  // unsigned, a second later rather than at the next batch or the shutdown (or never, after a crash).
  let signing: Promise<void> | null = null;
  const signer = config.ENRICHMENT
    ? setInterval(() => {
        signing ??= processors
          .checkpoints(false)
          .then(() => {})
          .catch((err: unknown) =>
            log.warn({ err }, 'checkpoint of idle chains not spooled; the next batch or tick signs them'),
          )
          .finally(() => {
            signing = null;
          });
      }, 1000)
    : null;
  signer?.unref();
  const limits = new RateLimits({
    points: config.RATE_LIMIT_POINTS,
    durationSeconds: config.RATE_LIMIT_WINDOW_SECONDS,
    redisUrl: config.REDIS_URL,
    onRedisTrouble: (failures, err) =>
      log.warn({ err, failures }, 'rate limiting: Redis is failing; limits are per instance until it answers again'),
    authFailures: { points: config.AUTH_FAILURE_LIMIT, durationSeconds: config.AUTH_FAILURE_WINDOW_SECONDS },
  });
  const adminToken = randomBytes(24).toString('base64url');
  const closers: Array<() => Promise<void>> = [];
  const app = createApp({
    config,
    storage,
    pipeline,
    keys: new KeyVerifier(storage, 30_000, lastKnown),
    limits,
    settings,
    webhookSecrets: new WebhookSecrets(storage, () =>
      secretBox(loadSecretsKey(enrichment.keysDir, config.SECRETS_KEY)),
    ),
    enrichment,
    log,
    metrics,
    adminToken,
    closers,
  });

  // A request with no Host header is answered by the app (400 in the JSON shape), not by Node with an empty body. An
  // answer given while the request body still arrives is followed by a lingering close (http/linger.ts).
  const options = {
    requireHostHeader: false,
    ServerResponse: lingeringResponse({ maxBytes: config.LINGER_MAX_BYTES, maxMs: config.LINGER_TIMEOUT_MS }),
  };
  const server = createServer(options, app.callback()).listen(config.PORT, config.HOST);
  answerClientErrors(server);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', (err) => reject(listenError(err, config)));
  });
  server.keepAliveTimeout = 65_000; // longer than typical client/LB idle timeouts
  server.headersTimeout = 66_000;
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.PORT;
  const adminServer = await loopbackAdmin(config.HOST, app.callback(), options);
  const adminAddr = adminServer?.address();
  const adminPort = typeof adminAddr === 'object' && adminAddr ? adminAddr.port : port;
  const serverFile = join(config.DATA_DIR, 'server.json');
  // Renamed into place: a reader (the CLI, looking for a running server) never sees it half written.
  writeFileSync(`${serverFile}.tmp`, JSON.stringify({ pid: process.pid, port, adminPort, adminToken }), {
    mode: 0o600,
  });
  renameSync(`${serverFile}.tmp`, serverFile);
  log.info({ port, storage: storage.kind, dataDir: config.DATA_DIR }, 'tracegate listening');

  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      log.info('shutting down: draining requests and flushing the spool');
      if (signer) clearInterval(signer);
      await signing;
      adminServer?.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => {
          server.closeAllConnections();
          resolve();
        }, 5000).unref();
      });
      // Alert webhooks under way get a few seconds; the rest are logged as abandoned. Then the chains' last records
      // are signed, so nothing acknowledged is left outside a checkpoint, and the delivery outcomes go with them.
      await processors
        .settleDeliveries(Math.min(config.SHUTDOWN_FLUSH_MS, 3000))
        .catch((err: unknown) => log.warn({ err }, 'alert deliveries not settled'));
      // Handlers still running past closeAllConnections get 503 from here on, so the final checkpoints sign everything.
      await pipeline.stopIngesting();
      if (config.ENRICHMENT)
        await processors.checkpoints().catch((err: unknown) => log.warn({ err }, 'final checkpoint not spooled'));
      stopInit();
      stopPublishing();
      await pipeline.close(); // closes the processor thread too, once the spool is flushed
      await auditHeads.flush();
      await lastKnown.flush();
      await limits.close();
      await Promise.all(closers.map((c) => c().catch(() => {})));
      await storage.close();
      rmSync(serverFile, { force: true });
      unlock();
      log.info('stopped');
    })());
  return { server, port, storage, pipeline, enrichment, settings, log, close };
}

/** Hosts the CLI reaches as 127.0.0.1: listening on one of them, the main port serves the admin routes too. */
const REACHED_ON_LOOPBACK = new Set(['0.0.0.0', '::', '127.0.0.1']);

/**
 * The CLI talks to the admin routes over 127.0.0.1, and they answer loopback callers only. A server bound to one
 * other address (TRACEGATE_HOST=10.0.0.5, ::1, localhost) gets a second listener there, for /admin/ only.
 */
async function loopbackAdmin(
  host: string,
  handler: ReturnType<ReturnType<typeof createApp>['callback']>,
  options: ServerOptions,
): Promise<Server | null> {
  if (REACHED_ON_LOOPBACK.has(host)) return null;
  const admin = createServer(options, (req, res) => {
    if (req.url?.startsWith('/admin/')) return void handler(req, res);
    res.writeHead(404, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        error: { code: 'not_found', message: 'this listener serves the admin routes only', details: null },
      }),
    );
  });
  answerClientErrors(admin);
  admin.listen(0, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    admin.once('listening', resolve);
    admin.once('error', reject);
  });
  return admin;
}

/** Why the server cannot listen, naming the setting to change (Node's own message names neither). */
function listenError(err: NodeJS.ErrnoException, config: Config): Error {
  const where = `${config.HOST}:${config.PORT}`;
  const why: Record<string, string> = {
    EADDRINUSE: `TRACEGATE_PORT: ${where} is already in use`,
    EACCES: `TRACEGATE_PORT: not allowed to listen on ${where} (ports below 1024 need privileges)`,
    ENOTFOUND: `TRACEGATE_HOST: "${config.HOST}" is not an address of this machine or a name that resolves`,
    EAI_AGAIN: `TRACEGATE_HOST: "${config.HOST}" could not be resolved`,
    EADDRNOTAVAIL: `TRACEGATE_HOST: ${config.HOST} is not an address of this machine`,
  };
  const message = err.code ? why[err.code] : undefined;
  return message ? Object.assign(new Error(`invalid configuration\n  ${message}`), { cause: err }) : err;
}
