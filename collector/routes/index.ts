// Every route module registers itself here; a new source is one more line.
import type { RouteContext } from '../app.ts';
import { opsRoutes } from './ops.ts';
import { nativeRoutes } from './native.ts';
import { readRoutes } from './read.ts';
import { enrichmentRoutes } from './enrichment.ts';
import { proxyRoutes } from './proxy.ts';
import { otlpRoutes } from './otlp.ts';

export const routeModules: Array<(ctx: RouteContext) => void> = [
  opsRoutes,
  nativeRoutes,
  otlpRoutes,
  readRoutes,
  enrichmentRoutes,
  proxyRoutes,
];
