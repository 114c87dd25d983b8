// Every route module registers itself here; a new source is one more line.
import type { RouteContext } from './http/context.ts';
import { opsRoutes } from './routes/ops.ts';
import { nativeRoutes } from './receivers/native.ts';
import { readRoutes } from './routes/read.ts';
import { enrichmentRoutes } from './routes/enrichment.ts';
import { proxyRoutes } from './proxy/route.ts';
import { otlpRoutes } from './receivers/otlp.ts';

export const routeModules: Array<(ctx: RouteContext) => void> = [
  opsRoutes,
  nativeRoutes,
  otlpRoutes,
  readRoutes,
  enrichmentRoutes,
  proxyRoutes,
];
