// The proxy routes' OpenAPI entries: every status they answer, in the provider's error shape.
import { z } from 'zod';
import { providerErrorSchema as providerError, type RouteDoc } from '../http/openapi.ts';

export const PATH = '/api/proxy/provider/responses';
export const ITEM = `${PATH}/:responseId`;

export const createDoc: RouteDoc = {
  method: 'post',
  path: PATH,
  tag: 'proxy',
  auth: 'apiKey',
  errors: 'provider',
  summary:
    "Governance preflight, forward to the provider's Responses API (JSON, or SSE passthrough when stream is true), persist the trace",
  request: {
    contentTypes: ['application/json'],
    schema: z.looseObject({
      model: z.string().min(1),
      input: z.unknown().optional(),
      stream: z.boolean().optional(),
    }),
  },
  responses: {
    200: {
      description:
        "The provider's answer passed through (application/json, or text/event-stream when stream is true); X-Trace-Id names the stored trace",
    },
    400: {
      description:
        "Not a JSON object with a non-empty string model, a key repeated in one object (the body is forwarded as sent, so it must read one way only), an X-Tracegate-Environment / X-Tracegate-Action header over 256 characters (code invalid_header), a previous_response_id the proxy did not give this workspace (code previous_response_not_found, as the provider answers an unknown one; checked when the request goes out with the provider key tracegate holds), a prompt_cache_options.comparison_response_id the proxy did not give this workspace (code response_not_found, the same check), either of them given as anything but a string or null (code invalid_type), or, with the server's provider key that workspaces share, a conversation, an item, container or skill reference, a file, vector store, container or MCP tunnel stored at the provider (code stored_object_not_allowed, param the path of the first one)",
      schema: providerError,
    },
    401: { description: 'Missing or invalid workspace API key', schema: providerError },
    403: {
      description:
        'Blocked by the workspace policy: the provider is not called; the attempt is stored with status blocked',
      schema: providerError,
    },
    413: {
      description:
        'The body is over TRACEGATE_MAX_BODY_BYTES after decompression (payload_too_large), or holds more than TRACEGATE_MAX_JSON_VALUES JSON values (too_many_values)',
      schema: providerError,
    },
    429: {
      description:
        "This route's own rate limit, or too many failed authentications from this address (Retry-After, X-RateLimit-Remaining); a provider 429 is passed through as is",
      schema: providerError,
    },
    502: {
      description:
        "The provider could not be reached, or refused the provider API key tracegate holds (code provider_auth_failed; a caller's own key gets the provider's 401 as is)",
      schema: providerError,
    },
    503: {
      description:
        'Retry-After: too many request bodies are being received or processed at once (code server_busy, TRACEGATE_MAX_INFLIGHT_BODY_BYTES), or storage could not be reached for the workspace settings, to verify the API key or to look up the workspace of a previous_response_id (code unavailable)',
      schema: providerError,
    },
    504: { description: 'The provider timed out', schema: providerError },
  },
};

export function relayDocs(): RouteDoc[] {
  const docs: RouteDoc[] = [];
  for (const [method, path, summary] of [
    ['get', ITEM, 'Retrieve a stored response from the provider (passed through; SSE with ?stream=true)'],
    ['delete', ITEM, 'Delete a stored response at the provider (passed through)'],
    ['post', `${ITEM}/cancel`, 'Cancel a background response at the provider (passed through)'],
    ['get', `${ITEM}/input_items`, 'List the input items of a stored response (passed through)'],
  ] as const) {
    docs.push({
      method,
      path: path.replace(':responseId', '{responseId}'),
      tag: 'proxy',
      auth: 'apiKey',
      errors: 'provider',
      summary,
      responses: {
        200: { description: "The provider's answer passed through, with its status" },
        400: { description: 'Malformed response id', schema: providerError },
        401: { description: 'Missing or invalid workspace API key', schema: providerError },
        404: {
          description:
            "With the provider key tracegate holds: the proxy did not give this response id to the caller's workspace from this provider (code response_not_found; the provider is not called). Otherwise the provider's own 404",
          schema: providerError,
        },
        502: {
          description:
            'The provider could not be reached, or refused the provider API key tracegate holds (code provider_auth_failed)',
          schema: providerError,
        },
        503: {
          description:
            "Storage could not be reached for the workspace settings, to verify the API key or to look up the response id's workspace (code unavailable; Retry-After)",
          schema: providerError,
        },
        504: { description: 'The provider timed out (code upstream_timeout)', schema: providerError },
      },
    });
  }
  return docs;
}
