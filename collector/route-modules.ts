// The routes the app serves, in registration order: the ops routes, every receiver (collector/receivers/index.ts),
// the read routes, the training export, sessions, the local workbench and the proxy.
import type { RouteContext } from './host/context.ts';
import { serveReceiver } from './host/receiver.ts';
import { proxyRoutes } from './proxy/route.ts';
import { receivers } from './receivers/index.ts';
import { enrichmentRoutes } from './routes/enrichment.ts';
import { exportRoutes } from './routes/export.ts';
import { localRunRoutes } from './routes/local-run.ts';
import { opsRoutes } from './routes/ops.ts';
import { readRoutes } from './routes/read.ts';
import { signalRoutes } from './routes/signals.ts';
import { sessionRoutes } from './routes/sessions.ts';

const receiverRoutes = (r: RouteContext) => {
  for (const declare of receivers) serveReceiver(r, declare(r));
};

export const routeModules: Array<(r: RouteContext) => void> = [
  opsRoutes,
  receiverRoutes,
  readRoutes,
  enrichmentRoutes,
  signalRoutes,
  exportRoutes,
  sessionRoutes,
  localRunRoutes,
  proxyRoutes,
];
