export { defaultTracegate, Tracegate, type TracegateOptions, wrapOpenAI } from './client.ts';
export { TracegateError, type TracegateErrorCode } from './errors.ts';
export type { Stats } from './exporter.ts';
export type { WrapOptions } from './openai.ts';
export type {
  FeedbackInput,
  FeedbackValue,
  Timestamp,
  ToolCallError,
  ToolCallInput,
  TraceMetrics,
  TraceOptions,
} from './payloads.ts';
