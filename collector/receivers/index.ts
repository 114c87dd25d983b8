// Every ingest source the server receives, as declarations the route host compiles (collector/host/receiver.ts).
// A new source is its declaration module, its mapper (mappers/) and fixtures, plus one line here.
import type { RouteContext } from '../host/context.ts';
import type { ReceiverDeclaration } from '../host/receiver.ts';
import { feedbackReceiver } from './feedback.ts';
import { agentsReceiver } from './agents.ts';
import { guardrailsReceiver } from './guardrails.ts';
import { nativeReceiver } from './native.ts';
import { otlpLogsReceiver, otlpTracesReceiver } from './otlp.ts';
import { toolCallsReceiver } from './tool-calls.ts';
import { webhooksReceiver } from './webhooks.ts';

// biome-ignore lint/suspicious/noExplicitAny: each declaration has payload and reply types of its own.
type AnyReceiver = (r: RouteContext) => ReceiverDeclaration<any, any>;

export const receivers: readonly AnyReceiver[] = [
  nativeReceiver,
  otlpTracesReceiver,
  otlpLogsReceiver,
  toolCallsReceiver,
  feedbackReceiver,
  webhooksReceiver,
  agentsReceiver,
  guardrailsReceiver,
];
