// Prometheus metrics for GET /metrics. One registry per app so tests can run several servers.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export function createMetrics() {
  const registry = new Registry();
  /** What tracegate_inflight_body_bytes reports: set by whoever owns the body budget (collector/receivers/native.ts). */
  const inflight = { bytes: (): number => 0 };
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    requests: new Counter({
      name: 'tracegate_http_requests_total',
      help: 'HTTP requests by method, route and status',
      labelNames: ['method', 'route', 'status'] as const,
      registers: [registry],
    }),
    ingested: new Counter({
      name: 'tracegate_records_ingested_total',
      help: 'Span records acknowledged, by source',
      labelNames: ['source'] as const,
      registers: [registry],
    }),
    spoolBytes: new Gauge({ name: 'tracegate_spool_bytes', help: 'Bytes waiting in the spool', registers: [registry] }),
    spoolPendingRows: new Gauge({
      name: 'tracegate_spool_pending_rows',
      help: 'Records waiting to be flushed to storage',
      registers: [registry],
    }),
    // Counters (they only grow) whose value the spool keeps: set at each scrape with setCounter.
    spoolSyncs: new Counter({
      name: 'tracegate_spool_syncs_total',
      help: 'Durable (O_DSYNC) writes to the spool (one per group commit)',
      registers: [registry],
    }),
    spoolAppends: new Counter({
      name: 'tracegate_spool_appends_total',
      help: 'Batches appended to the spool',
      registers: [registry],
    }),
    flushRows: new Histogram({
      name: 'tracegate_flush_batch_rows',
      help: 'Rows per storage insert',
      buckets: [1, 10, 100, 1000, 5000, 20000, 50000, 100000],
      registers: [registry],
    }),
    redisFailures: new Counter({
      name: 'tracegate_rate_limit_redis_failures_total',
      help: 'Redis errors and rate-limit checks its in-memory insurance answered (limits were per instance)',
      registers: [registry],
    }),
    auditDropped: new Counter({
      name: 'tracegate_audit_records_dropped_total',
      help: 'Audit records of refused requests (failed authentications, rejected bodies) not written: the spool was full or failing',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    refused: new Counter({
      name: 'tracegate_refused_records_total',
      help: 'Records storage refused on their own, set aside in DATA_DIR/refused',
      registers: [registry],
    }),
    inflight,
    inflightBodyBytes: new Gauge({
      name: 'tracegate_inflight_body_bytes',
      help: 'Decompressed request body bytes being received or processed (bounded by TRACEGATE_MAX_INFLIGHT_BODY_BYTES)',
      registers: [registry],
      collect() {
        this.set(inflight.bytes());
      },
    }),
    trainingExports: new Gauge({
      name: 'tracegate_training_exports_active',
      help: 'Training-data exports streaming now (GET /api/export/training, the CLI through the admin route)',
      registers: [registry],
    }),
    trainingPages: new Counter({
      name: 'tracegate_training_export_pages_total',
      help: 'Storage pages the training-data exports read',
      registers: [registry],
    }),
    trainingFailures: new Counter({
      name: 'tracegate_training_export_failures_total',
      help: 'Training-data exports cut short by a failure after their answer began (the connection closed unfinished)',
      registers: [registry],
    }),
    trainingRetries: new Counter({
      name: 'tracegate_training_export_read_retries_total',
      help: 'Storage pages a running training-data export read again after storage was unavailable',
      registers: [registry],
    }),
    trainingLines: new Counter({
      name: 'tracegate_training_export_lines_total',
      help: 'Lines the training-data exports wrote, by format',
      labelNames: ['format'] as const,
      registers: [registry],
    }),
    flushSeconds: new Histogram({
      name: 'tracegate_flush_seconds',
      help: 'Storage insert latency',
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
      registers: [registry],
    }),
  };
}
export type Metrics = ReturnType<typeof createMetrics>;

/** A counter whose running total is kept elsewhere (the spool's): reported as that total. */
export function setCounter(c: Counter, total: number): void {
  c.reset();
  c.inc(total);
}
