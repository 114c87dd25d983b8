// OTLP logs → event spans. Instrumentations following the current GenAI conventions (the OpenTelemetry openai
// instrumentation among them) send prompts and completions as log records (`gen_ai.user.message`,
// `gen_ai.choice`, `gen_ai.client.inference.operation.details`, …) on the logs signal, tied to the model call's
// span by its trace and span ids. Each such record becomes a span record of its own under that span (kind other,
// `tracegate.signal: "logs"`), so it is durable, governed, verified and idempotent like any span, whichever signal
// arrives first; the trace view folds the events' text into the span they belong to. A log record without a span
// context has nothing to attach to and is rejected (counted in partialSuccess).
import { hash } from 'node:crypto';
import type { Attributes, AttrValue } from '../../core/record.ts';
import { checkSpanTimes, finishAttrs, SpanReject, type Ctx, type NormalizedSpan } from './normalized.ts';

/** Where a log record's body is kept on its event span. */
export const LOG_BODY = 'otel.log.body';
/** Marks an event span made from a log record. */
export const LOG_SIGNAL_ATTR = 'tracegate.signal';
/** The record's position in its export request. */
export const LOG_INDEX_ATTR = 'tracegate.log_index';

export interface LogFields {
  traceId: string;
  spanId: string;
  timeNs: string;
  observedTimeNs: string;
  severityNumber: number;
  severityText: string;
  eventName: string;
  flags: number;
  body: AttrValue | undefined;
  /** Decoded (limits applied), not yet finished (finishAttrs). */
  attributes: Attributes;
  droppedAttributesCount: number;
}

/** The event span for one log record; SpanReject when it cannot be one. */
export function logSpan(l: LogFields, ctx: Ctx): NormalizedSpan {
  const index = ctx.logIndex++;
  if (l.traceId === '' || l.spanId === '')
    throw new SpanReject('no span context (traceId and spanId): only log records of a span are stored');
  const time = l.timeNs !== '0' ? l.timeNs : l.observedTimeNs;
  if (time === '0') throw new SpanReject('missing timeUnixNano and observedTimeUnixNano');
  checkSpanTimes(time, time, l.timeNs !== '0' ? 'timeUnixNano' : 'observedTimeUnixNano');
  const eventAttr = l.attributes['event.name'];
  const name = l.eventName || (typeof eventAttr === 'string' && eventAttr) || 'log';
  const attributes = l.attributes;
  if (l.severityNumber > 0) attributes['otel.log.severity_number'] = l.severityNumber;
  if (l.severityText) attributes['otel.log.severity_text'] = l.severityText;
  if (l.eventName) attributes['otel.event.name'] = l.eventName;
  if (l.observedTimeNs !== '0' && l.observedTimeNs !== time)
    attributes['otel.log.observed_time_unix_nano'] = l.observedTimeNs;
  if (l.body !== undefined) attributes[LOG_BODY] = l.body;
  finishAttrs(attributes, ctx);
  // Instrumentations give every input message of a call one timestamp: the record's place in the request keeps
  // the conversation's order, and tells apart a message repeated word for word.
  attributes[LOG_INDEX_ATTR] = index;
  // The same request delivered again (an exporter's retry) gives the same ids, so each record is stored once.
  const id = hash('sha256', JSON.stringify([l.traceId, l.spanId, time, name, attributes]), 'hex').slice(0, 16);
  return {
    traceId: l.traceId,
    spanId: id === '0000000000000000' ? '0000000000000001' : id,
    parentSpanId: l.spanId,
    traceState: '',
    flags: l.flags,
    name,
    kind: 1,
    startTimeNs: time,
    endTimeNs: time,
    attributes,
    droppedAttributesCount: l.droppedAttributesCount,
    events: [],
    droppedEventsCount: 0,
    links: [],
    droppedLinksCount: 0,
    statusCode: 0,
    statusMessage: '',
    log: { body: l.body },
  };
}

/** SeverityNumber names (OTLP/JSON may send the enum by name). */
export const SEVERITY_NAMES: Record<string, number> = Object.fromEntries(
  ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'FATAL'].flatMap((level, i) =>
    ['', '2', '3', '4'].map((n, j) => [`SEVERITY_NUMBER_${level}${n}`, i * 4 + j + 1]),
  ),
);
SEVERITY_NAMES.SEVERITY_NUMBER_UNSPECIFIED = 0;
