// OTLP trace schema for protobufjs, written for this project from the OTLP
// specification (opentelemetry-proto v1.x field names and numbers; no upstream
// .proto file is copied). It is a protobufjs JSON descriptor: field names are
// already lowerCamelCase, which is what protobufjs puts on decoded messages.
//
// Messages are declared with protobuf edition "2023": the wire format is identical
// to proto3, but the edition's defaults are what we want from protobufjs:
//   - `utf8_validation = VERIFY`: string fields are decoded strictly (decode-protobuf.ts plugs
//     in a faster strict reader) and invalid UTF-8 throws instead of becoming U+FFFD;
//   - `field_presence = EXPLICIT`: a field is an own property of the decoded message
//     only when it was on the wire, so `AnyValue{boolValue:false}` is distinguishable
//     from an empty AnyValue.
// AnyValue's `oneof value` is deliberately NOT declared: protobufjs implements oneof
// members with a setter that `delete`s the sibling fields on every assignment, which
// turns each AnyValue into a dictionary-mode object and made decoding ~3× slower.
// With explicit presence the decoder simply takes the field that is present (if a
// sender wrongly sets several, the decoder takes one of them).
//
// Only what a trace receiver needs is declared; anything else on the wire
// (profiles-only `*_strindex`, `entity_refs`, the deprecated
// `instrumentation_library_spans` = 1000, …) is an unknown field and skipped.
import protobuf from 'protobufjs';

type FieldDef = { type: string; id: number; rule?: 'repeated' };
type TypeDef = { edition: '2023'; fields: Record<string, FieldDef> };

const P3 = '2023' as const; // see above
const f = (type: string, id: number): FieldDef => ({ type, id });
const rep = (type: string, id: number): FieldDef => ({ type, id, rule: 'repeated' });

// opentelemetry.proto.common.v1
const common = {
  AnyValue: {
    edition: P3,
    fields: {
      stringValue: f('string', 1),
      boolValue: f('bool', 2),
      intValue: f('int64', 3),
      doubleValue: f('double', 4),
      arrayValue: f('ArrayValue', 5),
      kvlistValue: f('KeyValueList', 6),
      bytesValue: f('bytes', 7),
    },
  },
  ArrayValue: { edition: P3, fields: { values: rep('AnyValue', 1) } },
  KeyValueList: { edition: P3, fields: { values: rep('KeyValue', 1) } },
  KeyValue: { edition: P3, fields: { key: f('string', 1), value: f('AnyValue', 2) } },
  InstrumentationScope: {
    edition: P3,
    fields: {
      name: f('string', 1),
      version: f('string', 2),
      attributes: rep('KeyValue', 3),
      droppedAttributesCount: f('uint32', 4),
    },
  },
} satisfies Record<string, TypeDef>;

// opentelemetry.proto.resource.v1
const resource = {
  Resource: {
    edition: P3,
    fields: {
      attributes: rep('opentelemetry.proto.common.v1.KeyValue', 1),
      droppedAttributesCount: f('uint32', 2),
    },
  },
} satisfies Record<string, TypeDef>;

const C = 'opentelemetry.proto.common.v1.';

// opentelemetry.proto.trace.v1
const trace = {
  ResourceSpans: {
    edition: P3,
    fields: {
      resource: f('opentelemetry.proto.resource.v1.Resource', 1),
      scopeSpans: rep('ScopeSpans', 2),
      schemaUrl: f('string', 3),
    },
  },
  ScopeSpans: {
    edition: P3,
    fields: {
      scope: f(C + 'InstrumentationScope', 1),
      spans: rep('Span', 2),
      schemaUrl: f('string', 3),
    },
  },
  Span: {
    edition: P3,
    fields: {
      traceId: f('bytes', 1),
      spanId: f('bytes', 2),
      traceState: f('string', 3),
      parentSpanId: f('bytes', 4),
      flags: f('fixed32', 16),
      name: f('string', 5),
      kind: f('int32', 6), // enum SpanKind: 0 UNSPECIFIED, 1 INTERNAL, 2 SERVER, 3 CLIENT, 4 PRODUCER, 5 CONSUMER
      startTimeUnixNano: f('fixed64', 7),
      endTimeUnixNano: f('fixed64', 8),
      attributes: rep(C + 'KeyValue', 9),
      droppedAttributesCount: f('uint32', 10),
      events: rep('Event', 11),
      droppedEventsCount: f('uint32', 12),
      links: rep('Link', 13),
      droppedLinksCount: f('uint32', 14),
      status: f('Status', 15),
    },
  },
  Event: {
    edition: P3,
    fields: {
      timeUnixNano: f('fixed64', 1),
      name: f('string', 2),
      attributes: rep(C + 'KeyValue', 3),
      droppedAttributesCount: f('uint32', 4),
    },
  },
  Link: {
    edition: P3,
    fields: {
      traceId: f('bytes', 1),
      spanId: f('bytes', 2),
      traceState: f('string', 3),
      attributes: rep(C + 'KeyValue', 4),
      droppedAttributesCount: f('uint32', 5),
      flags: f('fixed32', 6),
    },
  },
  // Field 1 was the deprecated `deprecated_code`; it is left undeclared (unknown → skipped).
  Status: { edition: P3, fields: { message: f('string', 2), code: f('int32', 3) } }, // code: 0 UNSET, 1 OK, 2 ERROR
} satisfies Record<string, TypeDef>;

// opentelemetry.proto.logs.v1: only the wrappers differ from traces (same field numbers); a LogRecord with a span
// context is stored as an event span under that span (protocols/otlp/logs.ts).
const logs = {
  ResourceLogs: {
    edition: P3,
    fields: {
      resource: f('opentelemetry.proto.resource.v1.Resource', 1),
      scopeLogs: rep('ScopeLogs', 2),
      schemaUrl: f('string', 3),
    },
  },
  ScopeLogs: {
    edition: P3,
    fields: {
      scope: f(C + 'InstrumentationScope', 1),
      logRecords: rep('LogRecord', 2),
      schemaUrl: f('string', 3),
    },
  },
  LogRecord: {
    edition: P3,
    fields: {
      timeUnixNano: f('fixed64', 1),
      observedTimeUnixNano: f('fixed64', 11),
      severityNumber: f('int32', 2), // enum SeverityNumber: 0 UNSPECIFIED, 1–4 TRACE … 21–24 FATAL
      severityText: f('string', 3),
      body: f(C + 'AnyValue', 5),
      attributes: rep(C + 'KeyValue', 6),
      droppedAttributesCount: f('uint32', 7),
      flags: f('fixed32', 8),
      traceId: f('bytes', 9),
      spanId: f('bytes', 10),
      eventName: f('string', 12),
    },
  },
} satisfies Record<string, TypeDef>;

// opentelemetry.proto.collector.trace.v1
const collector = {
  ExportTraceServiceRequest: {
    edition: P3,
    fields: { resourceSpans: rep('opentelemetry.proto.trace.v1.ResourceSpans', 1) },
  },
  ExportTraceServiceResponse: { edition: P3, fields: { partialSuccess: f('ExportTracePartialSuccess', 1) } },
  ExportTracePartialSuccess: { edition: P3, fields: { rejectedSpans: f('int64', 1), errorMessage: f('string', 2) } },
} satisfies Record<string, TypeDef>;

// opentelemetry.proto.collector.logs.v1 (ExportLogsPartialSuccess: rejected_log_records = 1, error_message = 2)
const logsCollector = {
  ExportLogsServiceRequest: {
    edition: P3,
    fields: { resourceLogs: rep('opentelemetry.proto.logs.v1.ResourceLogs', 1) },
  },
  ExportLogsServiceResponse: { edition: P3, fields: { partialSuccess: f('ExportLogsPartialSuccess', 1) } },
  ExportLogsPartialSuccess: {
    edition: P3,
    fields: { rejectedLogRecords: f('int64', 1), errorMessage: f('string', 2) },
  },
} satisfies Record<string, TypeDef>;

// google.rpc.Status (+ google.protobuf.Any, google.rpc.BadRequest for Status.details)
const rpc = {
  Status: {
    edition: P3,
    fields: { code: f('int32', 1), message: f('string', 2), details: rep('google.protobuf.Any', 3) },
  },
  BadRequest: { edition: P3, fields: { fieldViolations: rep('FieldViolation', 1) } },
  FieldViolation: { edition: P3, fields: { field: f('string', 1), description: f('string', 2) } },
} satisfies Record<string, TypeDef>;
const protobufAny = {
  Any: { edition: P3, fields: { typeUrl: f('string', 1), value: f('bytes', 2) } },
} satisfies Record<string, TypeDef>;

export const OTLP_DESCRIPTOR = {
  nested: {
    opentelemetry: {
      nested: {
        proto: {
          nested: {
            common: { nested: { v1: { nested: common } } },
            resource: { nested: { v1: { nested: resource } } },
            trace: { nested: { v1: { nested: trace } } },
            logs: { nested: { v1: { nested: logs } } },
            collector: {
              nested: {
                trace: { nested: { v1: { nested: collector } } },
                logs: { nested: { v1: { nested: logsCollector } } },
              },
            },
          },
        },
      },
    },
    google: { nested: { rpc: { nested: rpc }, protobuf: { nested: protobufAny } } },
  },
};

export const otlpRoot = protobuf.Root.fromJSON(OTLP_DESCRIPTOR as protobuf.INamespace);

export const ExportTraceServiceRequest = otlpRoot.lookupType(
  'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest',
);
export const ExportTraceServiceResponse = otlpRoot.lookupType(
  'opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse',
);
export const ExportLogsServiceRequest = otlpRoot.lookupType(
  'opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest',
);
export const ExportLogsServiceResponse = otlpRoot.lookupType(
  'opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse',
);
export const RpcStatus = otlpRoot.lookupType('google.rpc.Status');
export const RpcBadRequest = otlpRoot.lookupType('google.rpc.BadRequest');

export const BAD_REQUEST_TYPE_URL = 'type.googleapis.com/google.rpc.BadRequest';

// ---- Shapes protobufjs produces on decode (only what decode-protobuf.ts reads) ----
// With decode-protobuf.ts's OtlpReader, fixed64 arrives as a decimal string and int64 as a number (or a
// decimal string beyond 2^53); with a stock protobufjs Reader they would be long.js `Long`s.
// bytes are Buffers (Node).

export interface PbLong {
  low: number;
  high: number;
  unsigned: boolean;
  toString(): string;
  toNumber(): number;
}
export interface PbAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: PbLong | number | string;
  doubleValue?: number;
  arrayValue?: { values: PbAnyValue[] };
  kvlistValue?: { values: PbKeyValue[] };
  bytesValue?: Uint8Array;
}
export interface PbKeyValue {
  key: string;
  value?: PbAnyValue | null;
}
export interface PbEvent {
  timeUnixNano: PbLong | number | string;
  name: string;
  attributes: PbKeyValue[];
  droppedAttributesCount: number;
}
export interface PbLink {
  traceId: Uint8Array;
  spanId: Uint8Array;
  traceState: string;
  attributes: PbKeyValue[];
  droppedAttributesCount: number;
  flags: number;
}
export interface PbSpan {
  traceId: Uint8Array;
  spanId: Uint8Array;
  traceState: string;
  parentSpanId: Uint8Array;
  flags: number;
  name: string;
  kind: number;
  startTimeUnixNano: PbLong | number | string;
  endTimeUnixNano: PbLong | number | string;
  attributes: PbKeyValue[];
  droppedAttributesCount: number;
  events: PbEvent[];
  droppedEventsCount: number;
  links: PbLink[];
  droppedLinksCount: number;
  status?: { message: string; code: number } | null;
}
export interface PbScope {
  name: string;
  version: string;
  attributes: PbKeyValue[];
  droppedAttributesCount: number;
}
export interface PbScopeSpans {
  scope?: PbScope | null;
  spans: PbSpan[];
  schemaUrl: string;
}
export interface PbResourceSpans {
  resource?: { attributes: PbKeyValue[]; droppedAttributesCount: number } | null;
  scopeSpans: PbScopeSpans[];
  schemaUrl: string;
}
export interface PbExportRequest {
  resourceSpans: PbResourceSpans[];
}
export interface PbLogRecord {
  timeUnixNano: PbLong | number | string;
  observedTimeUnixNano: PbLong | number | string;
  severityNumber: number;
  severityText: string;
  body?: PbAnyValue | null;
  attributes: PbKeyValue[];
  droppedAttributesCount: number;
  flags: number;
  traceId: Uint8Array;
  spanId: Uint8Array;
  eventName: string;
}
export interface PbScopeLogs {
  scope?: PbScope | null;
  logRecords: PbLogRecord[];
  schemaUrl: string;
}
export interface PbResourceLogs {
  resource?: { attributes: PbKeyValue[]; droppedAttributesCount: number } | null;
  scopeLogs: PbScopeLogs[];
  schemaUrl: string;
}
export interface PbExportLogsRequest {
  resourceLogs: PbResourceLogs[];
}
