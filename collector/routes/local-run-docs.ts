// The OpenAPI entries of the local workbench routes (collector/routes/local-run.ts), from the schema the run route
// validates with.
import { z } from 'zod';
import type { RouteDoc } from '../http/openapi.ts';
import { errorSchema } from '../http/openapi.ts';
import { runRequestSchema } from './local-run-request.ts';

const usage = z.object({ promptTokens: z.number(), completionTokens: z.number(), totalTokens: z.number() });
const runAnswer = z.object({
  output: z.string().describe("The model's answer"),
  model: z.string().describe('The model as the local server named it'),
  usage,
  latencyMs: z.number().describe('From asking the model to its last token'),
  finishReason: z.string().describe('stop, length, … as the local server said it'),
  traceId: z.string().optional().describe('The recorded trace, when recordTrace was true and it was stored'),
});
const modelsAnswer = z.object({
  api: z.enum(['ollama', 'openai']),
  defaultModel: z.string().nullable().describe('TRACEGATE_LOCAL_MODEL'),
  models: z.array(z.object({ id: z.string(), sizeBytes: z.number().optional(), modifiedAt: z.string().optional() })),
});

const modelErrors = {
  502: {
    description: 'The local model server answered an error or something its protocol does not allow',
    schema: errorSchema,
  },
  503: {
    description:
      'The local model server cannot be reached (local_model_unavailable, Retry-After), or storage cannot check the session',
    schema: errorSchema,
  },
  504: { description: 'The local model server was silent too long, or the run took too long', schema: errorSchema },
};

export function localRunDocs(): RouteDoc[] {
  return [
    {
      method: 'post',
      path: '/api/local/run',
      tag: 'workbench',
      auth: 'session',
      summary:
        'Run the locally hosted model: a prompt (agent run) or chat turns (agent chat), or coach (a draft, then its curated answer). stream: true answers text/event-stream: `delta` events ({text}), then `done` (the answer below) or `error` ({error}). A trace only when recordTrace is true',
      request: { contentTypes: ['application/json'], schema: runRequestSchema },
      responses: {
        200: { description: 'The answer (stream: false)', schema: runAnswer },
        404: { description: 'curate: no such coach draft in the workspace', schema: errorSchema },
        409: {
          description: 'curate: the draft belongs to another coach session, or did not complete',
          schema: errorSchema,
        },
        ...modelErrors,
      },
    },
    {
      method: 'get',
      path: '/api/local/models',
      tag: 'workbench',
      auth: 'session',
      summary: 'The models the local model server offers',
      responses: { 200: { description: 'The models', schema: modelsAnswer }, ...modelErrors },
    },
  ];
}
