// POST /api/ingest/webhooks: external scanners and AI firewalls post security alerts, stored for correlation with
// traces. The workspace API key is required as on every ingest route; a signature (X-Service-Delivery-Timestamp,
// X-Service-Signature) is verified on top, over the raw body before anything parses it:
//   no signature headers                    → accepted, stored as unsigned (spec rule 3)
//   headers, and the workspace has secrets  → verified: 400 malformed, 401 invalid_signature, 401 stale_delivery,
//                                             409 replayed_delivery (a delivery accepted before, by any collector)
//   headers, but no secrets                 → accepted, stored as unverified
import type { Context } from 'koa';
import { z } from 'zod';
import type { AlertSignature, SecurityAlertRecord } from '../../core/enrichment-records.ts';
import { TracegateError } from '../../core/errors.ts';
import type { Caller } from '../../core/ports/ingest.ts';
import { correlate, mapSecurityAlert, type Obj } from '../../mappers/webhooks.ts';
import type { RouteContext } from '../host/context.ts';
import type { Mapped, ReceiverDeclaration } from '../host/receiver.ts';
import { parseJson } from '../http/body.ts';
import { HttpError } from '../http/errors.ts';
import { errorSchema } from '../http/openapi.ts';
import { DeliveryClaims } from './webhook-replays.ts';
import {
  deliveryKey,
  SIGNATURE_HEADER,
  signedDelivery,
  skewSeconds,
  TIMESTAMP_HEADER,
  verifyingSecret,
} from './webhook-signature.ts';

interface Payload {
  raw: Buffer;
  body: Obj;
  signature: AlertSignature;
  secretId: string;
  /** The delivery's claim key, for a verified delivery (claimed once its record is durable). */
  claim: string | null;
}

interface Reply {
  alert: SecurityAlertRecord;
  claim: string | null;
}

const alertReply = z.object({
  alert: z.object({
    id: z.string().describe('Follows from the workspace and the body: a redelivery of the same body is the same alert'),
    signature: z.enum(['verified', 'unverified', 'unsigned']),
    secretId: z.string().nullable().describe('The signing secret that verified it'),
    traceId: z.string().nullable().describe('The trace it names (directly, or through a response the proxy recorded)'),
    severity: z.enum(['low', 'medium', 'high', 'critical']),
  }),
});

const header = (ctx: Context, name: string) => {
  const v = ctx.req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
};

export function webhooksReceiver(r: RouteContext): ReceiverDeclaration<Payload, Reply> {
  const tolerance = r.config.WEBHOOK_TOLERANCE_SECONDS;
  const claims = new DeliveryClaims(r.storage, {
    redisUrl: r.config.REDIS_URL,
    ttlSeconds: 2 * tolerance + 300,
    warn: (o, m) => r.log.warn(o, m),
    read: (work) => r.read(work),
  });
  r.onClose(() => claims.close());

  /** The signature's verdict: unsigned, unverified (no secrets), or verified (and its claim key); throws 400/401/409. */
  async function verify(raw: Buffer, ctx: Context, workspaceId: string) {
    const signed = signedDelivery(header(ctx, TIMESTAMP_HEADER), header(ctx, SIGNATURE_HEADER));
    if (!signed) return { signature: 'unsigned' as const, secretId: '', claim: null };
    const secrets = await r.webhookSecrets
      .active(workspaceId, (work) => r.read(work))
      .catch((err: unknown) => {
        // A collector that cannot open the secrets (another TRACEGATE_SECRETS_KEY) is misconfigured: say so in its log.
        if (err instanceof TracegateError && err.code !== 'unavailable')
          (ctx.state.log ?? r.log).error({ code: err.code, workspaceId }, err.message);
        throw err;
      });
    if (secrets.length === 0) return { signature: 'unverified' as const, secretId: '', claim: null };
    const secretId = verifyingSecret(signed, raw, secrets);
    // Opaque: which secret, which signature or which part of the content failed is not said.
    if (!secretId)
      throw new HttpError(401, 'invalid_signature', 'the signature does not match the body under any active secret');
    if (skewSeconds(signed, Date.now()) > tolerance)
      throw new HttpError(
        401,
        'stale_delivery',
        `the delivery timestamp is more than ${tolerance} s from the server's time`,
        { toleranceSeconds: tolerance },
      );
    const claim = deliveryKey(signed, raw);
    if (await claims.seen({ workspaceId, key: claim }))
      throw new HttpError(409, 'replayed_delivery', 'this signed delivery was accepted before');
    return { signature: 'verified' as const, secretId, claim };
  }

  return {
    paths: ['/api/ingest/webhooks'],
    limiter: 'webhooks',
    accepts: ['json'],
    maxBodyBytes: r.config.MAX_WEBHOOK_BODY_BYTES,
    doc: {
      tag: 'ingest',
      summary:
        'Ingest a security alert from an external scanner (any JSON object). Optional signed delivery: X-Service-Delivery-Timestamp (unix seconds) and X-Service-Signature (v1=<hex HMAC-SHA256 of "<timestamp>.<raw body>">, several allowed)',
      request: {
        contentTypes: ['application/json'],
        schema: z.record(z.string(), z.unknown()).describe('The scanner payload, stored whole'),
      },
      responses: {
        200: { description: 'Stored durably', schema: alertReply },
        401: {
          description: 'invalid_signature or stale_delivery (or no valid API key)',
          schema: errorSchema,
        },
        409: { description: 'replayed_delivery: this signed delivery was accepted before', schema: errorSchema },
      },
    },
    async parse(raw, _kind, ctx) {
      const caller = ctx.state.caller as Caller;
      const verdict = await verify(raw, ctx, caller.workspaceId);
      const body = parseJson(raw, r.config.MAX_JSON_DEPTH, r.config.MAX_JSON_VALUES);
      if (typeof body !== 'object' || body === null || Array.isArray(body))
        throw new HttpError(400, 'invalid_body', 'a security alert is a JSON object', {
          received: Array.isArray(body) ? 'array' : body === null ? 'null' : typeof body,
        });
      return { raw, body: body as Obj, ...verdict };
    },
    async map(p, req): Promise<Mapped<Reply>> {
      const headers = req.ctx.req.headers as Record<string, string | undefined>;
      const { keys } = correlate(p.body, headers);
      let responseTraces = new Map<string, string>();
      if (!keys.trace_id && keys.response_id) {
        // Best effort: an alert is stored whatever storage answers now; the trace read links it later anyway.
        responseTraces = await r
          .read(() => r.storage.responseTraces(req.caller.workspaceId, [keys.response_id]))
          .catch(() => new Map<string, string>());
      }
      const source = typeof req.ctx.query.source === 'string' ? req.ctx.query.source.slice(0, 128) : undefined;
      const alert = mapSecurityAlert({
        workspaceId: req.caller.workspaceId,
        raw: p.raw,
        body: p.body,
        headers,
        receivedAtMs: req.now,
        signature: p.signature,
        secretId: p.secretId,
        responseTraces,
        ...(source ? { source } : {}),
      });
      return { spans: [], records: [alert], rejected: 0, reply: { alert, claim: p.claim } };
    },
    async answer(mapped, ctx) {
      const { alert } = mapped.reply;
      // Claimed once the record is durable: a delivery that failed before is not held against its retry. Of two
      // copies racing, one is answered 409 (its record is the other's: same id, nothing stored twice).
      if (mapped.reply.claim && !(await claimed(alert.workspaceId, mapped.reply.claim, ctx)))
        throw new HttpError(409, 'replayed_delivery', 'this signed delivery was accepted before');
      ctx.body = {
        alert: {
          id: alert.alertId,
          signature: alert.signature,
          secretId: alert.secretId || null,
          traceId: alert.traceId || null,
          severity: alert.severity,
        },
      } satisfies z.output<typeof alertReply>;
    },
  };

  /** True unless another claim won; a claim storage cannot take now is logged and counts as won (the record is durable). */
  async function claimed(workspaceId: string, key: string, ctx: Context): Promise<boolean> {
    try {
      return await claims.claim({ workspaceId, key });
    } catch (err) {
      (ctx.state.log ?? r.log).warn(
        { err },
        'webhook delivery stored but not claimed: a replay of it may be taken again (its record collapses)',
      );
      return true;
    }
  }
}
