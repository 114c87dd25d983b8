// Audit records of refused requests: a rejected authentication, and an authenticated request refused before its
// records were taken (a bad body, too large). Accepted requests are audited by the audit processor, atomically with
// their records. Spooled without waiting: a flood of bad keys must not queue requests behind fsyncs.
import type { Context, Next } from 'koa';
import type { Config } from '../../config/index.ts';
import type { AuditRecord } from '../../core/enrichment-records.ts';
import { TracegateError } from '../../core/errors.ts';
import type { Logger } from '../../platform/logger.ts';
import { SYSTEM_WORKSPACE } from '../../processors/audit.ts';
import type { Enrichment } from '../../processors/index.ts';
import { statusOf } from '../http/errors.ts';
import type { Metrics } from '../http/metrics.ts';
import type { Caller } from '../../core/ports/ingest.ts';

export interface RefusalDeps {
  config: Pick<Config, 'SPOOL_MAX_BYTES'>;
  pipeline: { stats(): { spoolBytes: number }; record(extra: AuditRecord[]): Promise<void> };
  enrichment: Pick<Enrichment, 'audit'>;
  metrics: Pick<Metrics, 'auditDropped'>;
  log: Pick<Logger, 'warn'>;
}

/** The route pattern, not the raw path: a caller must not write arbitrary text into a workspace's audit log. */
export const routeOf = (c: Context): string =>
  (c as unknown as { _matchedRoute?: string })._matchedRoute ?? c.path.slice(0, 200);

/** Why an authentication failed, as the audit record says it. */
export interface AuthRejection {
  /** The workspace whose credential was tried (its owners read the attempt); none: the _system log. */
  workspaceId?: string;
  /** The credential's public id (a key id, never the key); '' when it had none. */
  actor: string;
  reason: string;
  throttled?: 'too_many_failures';
}

export class RefusalAudit {
  private readonly deps: RefusalDeps;
  private lastDropLog = 0;
  constructor(deps: RefusalDeps) {
    this.deps = deps;
  }

  authRejected(c: Context, r: AuthRejection): void {
    this.spool(() => ({
      workspaceId: r.workspaceId ?? SYSTEM_WORKSPACE,
      atMs: Date.now(),
      actor: r.actor || 'anonymous',
      action: 'auth.rejected',
      route: routeOf(c),
      outcome: 'denied',
      accepted: 0,
      rejected: 0,
      details: JSON.stringify({ reason: r.reason, ip: c.ip, ...(r.throttled ? { throttled: r.throttled } : {}) }),
    }));
  }

  /** Middleware after authentication: a client error (4xx but 429) thrown below it is audited, then rethrown. */
  requestsRefused(limiter: string) {
    return async (c: Context, next: Next): Promise<void> => {
      try {
        await next();
      } catch (err) {
        if (err instanceof TracegateError && isRefusal(err)) this.requestRefused(c, err, limiter);
        throw err;
      }
    };
  }

  private requestRefused(c: Context, err: TracegateError, limiter: string): void {
    const caller = c.state.caller as Caller;
    this.spool(() => ({
      workspaceId: caller.workspaceId,
      atMs: Date.now(),
      actor: caller.keyId,
      action: 'ingest',
      route: `${c.method} ${routeOf(c)}`,
      outcome: 'rejected',
      accepted: 0,
      rejected: err.rejectedItems ?? 1,
      details: JSON.stringify({ status: statusOf(err), code: err.code, limiter }),
    }));
  }

  /** A record the spool cannot take must not advance the chain (that would leave a gap): with the spool full, skip. */
  private spool(make: () => Omit<AuditRecord, 'recordType' | 'chainId' | 'seq' | 'prevHash' | 'hash'>): void {
    if (this.deps.pipeline.stats().spoolBytes >= this.deps.config.SPOOL_MAX_BYTES) return this.dropped('spool_full');
    const rec = this.deps.enrichment.audit.append(make());
    this.deps.pipeline.record([rec]).catch((err: unknown) => this.dropped('spool_error', err));
  }

  /** Such records are written without waiting, so a lost one is counted and logged (at most every 10 s) here. */
  private dropped(reason: 'spool_full' | 'spool_error', err?: unknown): void {
    this.deps.metrics.auditDropped.inc({ reason });
    const now = Date.now();
    if (now - this.lastDropLog < 10_000) return;
    this.lastDropLog = now;
    this.deps.log.warn(
      { reason, err },
      'audit records of refused requests are not being written (tracegate_audit_records_dropped_total counts them)',
    );
  }
}

/** Client errors, but the rate limit's (a flood of 429s would flood the log): refused for what the request was. */
function isRefusal(err: TracegateError): boolean {
  const status = statusOf(err);
  return status >= 400 && status < 500 && status !== 429;
}
