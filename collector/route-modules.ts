// The routes the app serves, in registration order: the ops routes, every receiver (collector/receivers/index.ts),
// the read routes, the training export, sessions, the local workbench, the proxy and the web UI.
import type { RouteContext } from './host/context.ts';
import { serveReceiver } from './host/receiver.ts';
import { proxyRoutes } from './proxy/route.ts';
import { receivers } from './receivers/index.ts';
import { analyticsRoutes } from './routes/analytics.ts';
import { enrichmentRoutes } from './routes/enrichment.ts';
import { exportRoutes } from './routes/export.ts';
import { localRunRoutes } from './routes/local-run.ts';
import { opsRoutes } from './routes/ops.ts';
import { readRoutes } from './routes/read.ts';
import { signalRoutes } from './routes/signals.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { uiRoutes } from './ui/routes.ts';

const receiverRoutes = (r: RouteContext) => {
  for (const declare of receivers) serveReceiver(r, declare(r));
};

export const routeModules: Array<(r: RouteContext) => void> = [
  opsRoutes,
  receiverRoutes,
  readRoutes,
  enrichmentRoutes,
  analyticsRoutes,
  signalRoutes,
  exportRoutes,
  sessionRoutes,
  localRunRoutes,
  proxyRoutes,
  uiRoutes,
];
