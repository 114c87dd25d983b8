// Read routes for enrichment: audit log, alerts, findings, policy, verification and usage analytics.
// Every read is scoped to the caller's workspace.
import { z } from 'zod';
import type { Context } from 'koa';
import type { RouteContext } from '../host/context.ts';
import { HttpError } from '../http/errors.ts';
import { msCeil, parseQuery, time, whole } from '../http/query.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import { listStoredFindings } from './stored-versions.ts';
import { errorSchema } from '../http/openapi.ts';
import type { AlertRecord, AuditRecord, FindingRecord, VerificationRecord } from '../../core/enrichment-records.ts';
import type { UsageQuery, UsageRow } from '../../core/ports/storage.ts';
import { policySchema } from '../../processors/governance/policy.ts';
import type { ResolvedSettings } from '../workspaces/settings.ts';
import { verificationKeys, type PublicKeyInfo } from '../../processors/signing.ts';
import type { VerifyReport } from '../../processors/verification.ts';
import { verifyTrace } from '../../processors/verify-workspace.ts';
import { checkRange, MAX_CURSOR_CHARS, READ_AUTH, READ_LIMITS, sameShape, unavailableDoc } from './read.ts';

const page = {
  from: time.optional(),
  to: time.optional(),
  limit: whole(1, 1000).default(100),
  cursor: z.string().max(MAX_CURSOR_CHARS).optional(),
};

export const auditQuery = z.object({
  action: z.string().max(64).optional(),
  actor: z.string().max(128).optional(),
  outcome: z.string().max(32).optional(),
  ...page,
});
export const alertsQuery = z.object({
  kind: z.string().max(32).optional(),
  ruleId: z.string().max(64).optional(),
  ...page,
});
export const findingsQuery = z.object({
  traceId: z.string().max(256).optional(),
  category: z.string().max(64).optional(),
  detector: z.string().max(32).optional(),
  ...page,
});
const GROUP_BY = ['model', 'actionName', 'environment', 'source'] as const;
export const usageQuery = z.object({
  groupBy: z.enum(GROUP_BY).default('model'),
  bucket: z.enum(['hour', 'day']).default('hour'),
  from: time
    .optional()
    .describe('Usage is kept per hour (UTC) of span start: the range counts every whole hour overlapping [from, to)'),
  to: time.optional().describe('Exclusive; widened to the end of its hour, as from to the start of its'),
});

// Response shapes, for the OpenAPI document. The type checks below keep them equal to what the handlers answer.
const severity = z.enum(['low', 'medium', 'high', 'critical']);
const pageOf = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    nextCursor: z.string().nullable().describe('Pass as cursor for the next page; null on the last'),
  });
const auditItem = z.object({
  workspaceId: z.string(),
  chainId: z.string().describe('One hash chain per workspace per server process start'),
  seq: z.number().int(),
  atMs: z.number(),
  actor: z.string().describe("Key id, 'cli' or 'system'"),
  action: z.string().describe('ingest, auth.rejected, key.create, key.revoke, policy.update, settings.update, …'),
  route: z.string(),
  outcome: z.string().describe('ok, partial, rejected, error or denied'),
  accepted: z.number().int(),
  rejected: z.number().int(),
  details: z.string().describe('A JSON object, as text'),
  prevHash: z.string(),
  hash: z.string().describe('sha256(prevHash + canonical JSON of the rest)'),
});
const alertItem = z.object({
  workspaceId: z.string(),
  alertId: z.string(),
  ruleId: z.string(),
  kind: z.string().describe('latency, cost, error_rate, finding, guardrail or security_alert'),
  severity,
  message: z.string(),
  traceId: z.string().describe("The trace that tipped it; '' when none did"),
  value: z.number(),
  threshold: z.number(),
  windowStartMs: z.number(),
  atMs: z.number(),
  delivered: z.string().describe("'' (no webhook), 'queued', 'sent' or 'failed'"),
});
const findingItem = z.object({
  workspaceId: z.string(),
  traceId: z.string(),
  spanId: z.string(),
  detector: z.string().describe('pii, secret, injection, or guardrail (a tripped guardrail)'),
  rule: z.string().describe('Stable rule id, e.g. pii.email'),
  category: z.string(),
  severity,
  field: z.string().describe('prompt, response or attribute:<name>'),
  start: z.number().int().describe('UTF-16 offset in the scanned text (before redaction)'),
  end: z.number().int(),
  preview: z.string().describe('Masked: the matched text is never stored'),
  score: z.number().describe('Injection score in [0,1]; 1 for deterministic detectors'),
  action: z.string().describe('What the policy did: flag, redact or block'),
  createdAtMs: z.number(),
});
const auditPage = pageOf(auditItem);
const alertPage = pageOf(alertItem);
const findingPage = pageOf(findingItem);
const policyBody = z.object({
  policy: policySchema,
  settingsVersion: z.number().int().describe('0 while the workspace has no settings of its own'),
});
const verificationBody = z.object({
  traceId: z.string(),
  ok: z.boolean(),
  recordsChecked: z.number().int(),
  tracesChecked: z.number().int(),
  checkpointsChecked: z.number().int(),
  superseded: z.number().int().describe('Records whose spans a later delivery replaced (not tampering)'),
  unsignedTail: z.number().int().describe('Records after the last checkpoint of their chain (signed within a second)'),
  problems: z.array(
    z.object({
      kind: z.enum([
        'content_hash_mismatch',
        'span_missing',
        'unverified_span',
        'chain_gap',
        'prev_hash_mismatch',
        'link_hash_mismatch',
        'bad_signature',
        'unknown_key',
        'checkpoint_mismatch',
        'unsigned_chain',
        'checkpoint_missing',
      ]),
      chainId: z.string(),
      seq: z.number().int(),
      traceId: z.string().optional(),
      message: z.string(),
    }),
  ),
  records: z.array(
    z.object({
      workspaceId: z.string(),
      traceId: z.string(),
      spanIds: z.array(z.string()),
      spanVersions: z.array(z.number()).describe('ingestedAtMs of each covered span'),
      contentHash: z.string().describe('sha256 of the RFC 8785 canonical JSON of the covered spans'),
      chainId: z.string(),
      seq: z.number().int(),
      prevHash: z.string(),
      hash: z.string().describe('sha256(prevHash + contentHash + seq + traceId)'),
      createdAtMs: z.number(),
    }),
  ),
});
const verificationKey = z.object({
  keyId: z.string(),
  algorithm: z.literal('Ed25519'),
  publicKeyPem: z.string().describe('SPKI PEM'),
  publicKeyJwk: z.object({ kty: z.literal('OKP'), crv: z.literal('Ed25519'), x: z.string() }),
});
const keysBody = z.object({ keys: z.array(verificationKey) });
const usageBody = z.object({
  groupBy: z.enum(GROUP_BY),
  bucket: z.enum(['hour', 'day']),
  source: z
    .enum(['rollup', 'spans'])
    .describe('rollup: ClickHouse materialized rollups; spans: computed from the spans'),
  rows: z.array(
    z.object({
      bucketStart: z.string().describe('ISO 8601 UTC, start of the hour or day'),
      key: z.string().describe("The group's value ('' when unset)"),
      requests: z.number(),
      errors: z.number(),
      errorRate: z.number().describe('errors / requests'),
      promptTokens: z.number(),
      completionTokens: z.number(),
      totalTokens: z.number(),
      costUsd: z.number(),
      p50Ms: z.number(),
      p95Ms: z.number(),
      p99Ms: z.number(),
      feedbackUp: z
        .number()
        .describe(
          "Standing thumbs-up votes given in the bucket on traces of the group (the group of the trace's first model call; '' while the trace is not stored)",
        ),
      feedbackDown: z.number().describe('Standing thumbs-down votes, as feedbackUp'),
    }),
  ),
});
type Stripped<T> = Omit<T, 'recordType'>;
sameShape<z.output<typeof auditItem>, Stripped<AuditRecord>>(true);
sameShape<z.output<typeof alertItem>, Stripped<AlertRecord>>(true);
sameShape<z.output<typeof findingItem>, Stripped<FindingRecord>>(true);
sameShape<z.output<typeof policyBody>['policy'], ResolvedSettings['policy']>(true);
sameShape<
  z.output<typeof verificationBody>,
  VerifyReport & { traceId: string; records: Stripped<VerificationRecord>[] }
>(true);
sameShape<Omit<z.output<typeof verificationKey>, 'publicKeyJwk'>, Omit<PublicKeyInfo, 'publicKeyJwk'>>(true);
sameShape<z.output<typeof usageBody>['rows'][number], UsageRow>(true);
sameShape<z.output<typeof usageBody>['groupBy' | 'bucket'], UsageQuery['groupBy' | 'bucket']>(true);

const ws = (ctx: Context) => (ctx.state.caller as Caller).workspaceId;
/** Enrichment records carry a tag for the spool; the API does not need it. */
const strip = <T extends { recordType: string }>(r: T) => {
  const { recordType: _t, ...rest } = r;
  return rest;
};

export function enrichmentRoutes(r: RouteContext): void {
  // Every route asks storage (the keys route for the keys other collectors published), and answers 503 when it
  // is down or too slow.
  const doc = (
    path: string,
    summary: string,
    body: z.ZodType,
    query?: z.ZodObject,
    more: Record<number, { description: string; schema: z.ZodType }> = {},
  ) =>
    r.docs.push({
      method: 'get',
      path,
      tag: 'enrichment',
      auth: READ_AUTH,
      summary,
      query,
      responses: { 200: { description: 'OK', schema: body }, ...more, 503: unavailableDoc },
    });
  doc(
    '/api/audit',
    'Audit log, newest first: ingestion requests, key/policy/settings changes, rejected authentications',
    auditPage,
    auditQuery,
  );
  doc('/api/alerts', 'Alert signals produced by the workspace alert rules, newest first', alertPage, alertsQuery);
  doc(
    '/api/findings',
    'Governance findings (masked previews only) of the stored span versions, newest first; a page may hold fewer than limit while nextCursor goes on',
    findingPage,
    findingsQuery,
  );
  doc('/api/policy', 'The workspace policy in force', policyBody);
  doc(
    '/api/traces/{traceId}/verification',
    'Re-check a trace: content hash, chain continuity, checkpoint signatures',
    verificationBody,
    undefined,
    {
      404: {
        description: 'No verification records for this trace (not ingested, not yet flushed, or enrichment off)',
        schema: errorSchema,
      },
    },
  );
  doc(
    '/api/verification/keys',
    "Public keys that sign verification checkpoints: this collector's and those the collectors sharing its storage published",
    keysBody,
  );
  doc(
    '/api/analytics/usage',
    'Requests, errors, tokens, cost and p50/p95/p99 latency of model calls (llm and embedding spans), and feedback votes, per bucket and group',
    usageBody,
    usageQuery,
  );

  r.on('get', '/api/audit', { limiter: READ_LIMITS.audit, auth: READ_AUTH }, async (ctx) => {
    const q = parseQuery(auditQuery, ctx);
    checkRange(q);
    const res = await r.read(() =>
      r.storage.listAudit(ws(ctx), {
        action: q.action,
        actor: q.actor,
        outcome: q.outcome,
        fromMs: msCeil(q.from),
        toMs: msCeil(q.to),
        limit: q.limit,
        cursor: q.cursor,
      }),
    );
    ctx.body = { items: res.items.map(strip), nextCursor: res.nextCursor } satisfies z.output<typeof auditPage>;
  });
  r.on('get', '/api/alerts', { limiter: READ_LIMITS.alerts, auth: READ_AUTH }, async (ctx) => {
    const q = parseQuery(alertsQuery, ctx);
    checkRange(q);
    const res = await r.read(() =>
      r.storage.listAlerts(ws(ctx), {
        kind: q.kind,
        ruleId: q.ruleId,
        fromMs: msCeil(q.from),
        toMs: msCeil(q.to),
        limit: q.limit,
        cursor: q.cursor,
      }),
    );
    ctx.body = { items: res.items.map(strip), nextCursor: res.nextCursor } satisfies z.output<typeof alertPage>;
  });
  r.on('get', '/api/findings', { limiter: READ_LIMITS.findings, auth: READ_AUTH }, async (ctx) => {
    const q = parseQuery(findingsQuery, ctx);
    checkRange(q);
    // Findings of the spans' stored versions only, one trace's or the workspace's (see stored-versions.ts).
    const res = await r.read(() =>
      listStoredFindings(r.storage, ws(ctx), {
        traceId: q.traceId,
        category: q.category,
        detector: q.detector,
        fromMs: msCeil(q.from),
        toMs: msCeil(q.to),
        limit: q.limit,
        cursor: q.cursor,
      }),
    );
    ctx.body = { items: res.items.map(strip), nextCursor: res.nextCursor } satisfies z.output<typeof findingPage>;
  });
  r.on('get', '/api/policy', { limiter: READ_LIMITS.policy, auth: READ_AUTH }, async (ctx) => {
    // The settings cache answers within LOOKUP_DEADLINE_MS on its own (last known settings, else a 503).
    const s = await r.settings.forWorkspace(ws(ctx));
    ctx.body = { policy: s.policy, settingsVersion: s.version } satisfies z.output<typeof policyBody>;
  });
  r.on('get', '/api/verification/keys', { limiter: READ_LIMITS.verificationKeys, auth: READ_AUTH }, async (ctx) => {
    ctx.body = { keys: await r.read(() => verificationKeys(r.storage, r.enrichment.keysDir)) };
  });
  r.on(
    'get',
    '/api/traces/:traceId/verification',
    { limiter: READ_LIMITS.verification, auth: READ_AUTH },
    async (ctx) => {
      const traceId = ctx.params.traceId!;
      if (traceId.length > 256) throw new HttpError(400, 'invalid_trace_id', 'traceId is too long');
      const report = await r.read(async () =>
        verifyTrace(r.storage, ws(ctx), traceId, await verificationKeys(r.storage, r.enrichment.keysDir)),
      );
      // A stored trace without records is a failure to report (its records were deleted, or it was written around
      // the collector), unless it is still within the settle window.
      if (report.recordsChecked === 0 && report.problems.length === 0)
        throw new HttpError(
          404,
          'not_found',
          `no verification records for trace ${traceId} (not ingested, not yet flushed, or enrichment off)`,
        );
      ctx.body = { traceId, ...report, records: report.records.map(strip) } satisfies z.output<typeof verificationBody>;
    },
  );
  r.on('get', '/api/analytics/usage', { limiter: READ_LIMITS.usage, auth: READ_AUTH }, async (ctx) => {
    const q = parseQuery(usageQuery, ctx);
    checkRange(q);
    const rows = await r.read(() =>
      r.storage.usage(ws(ctx), { groupBy: q.groupBy, bucket: q.bucket, fromMs: msCeil(q.from), toMs: msCeil(q.to) }),
    );
    ctx.body = {
      groupBy: q.groupBy,
      bucket: q.bucket,
      source: r.storage.kind === 'clickhouse' ? 'rollup' : 'spans',
      rows,
    } satisfies z.output<typeof usageBody>;
  });
}
