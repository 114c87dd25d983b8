// The ceiling for the native benchmark: a bare Koa app that reads and parses the same JSON body and replies.
import Koa from 'koa';
import getRawBody from 'raw-body';

const app = new Koa();
app.use(async (ctx) => {
  const body = JSON.parse((await getRawBody(ctx.req, { limit: 1 << 20 })).toString('utf8')) as { requestId?: string };
  ctx.body = { trace: { traceId: body.requestId ?? 'x', status: 'completed' } };
});
const server = app.listen(Number(process.env.PORT), '127.0.0.1', () => process.send?.('ready'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
