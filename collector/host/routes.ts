// The route host: turns guard options into middleware (error shape, authentication, rate limit, audit of refusals)
// and remembers each path's error shape, so a method a path does not serve is answered 405 in that shape.
import type Router from '@koa/router';
import type { Context, Next } from 'koa';
import type { RefusalAudit } from '../auth/refusals.ts';
import type { AuthStrategies } from '../auth/strategy.ts';
import { BodyBudget, bodyBudget } from '../http/body.ts';
import { type ErrorFamily, errorsIn } from '../http/errors.ts';
import type { RouteDoc } from '../http/openapi.ts';
import { READ_LIVENESS_AFTER_MS, ReadGate } from '../http/read-gate.ts';
import type { AppDeps, GuardOptions, Method, Middleware, RouteContext } from './context.ts';
import { ProxyCallMemory } from './proxy-calls.ts';

export class RouteHost {
  /** Route pattern → the error shape of its family, for paths not answering in the JSON envelope. */
  readonly families = new Map<string, ErrorFamily>();
  readonly docs: RouteDoc[] = [];
  private readonly deps: AppDeps;
  private readonly router: Router;
  private readonly auth: AuthStrategies;
  private readonly refusals: RefusalAudit;
  private readonly reads: ReadGate;
  private readonly proxyCalls: ProxyCallMemory;

  constructor(deps: AppDeps, router: Router, auth: AuthStrategies, refusals: RefusalAudit) {
    this.deps = deps;
    this.router = router;
    this.auth = auth;
    this.refusals = refusals;
    this.proxyCalls = new ProxyCallMemory(deps.storage);
    this.reads = new ReadGate(() => deps.storage.ping(), {
      livenessAfterMs: deps.storage.kind === 'clickhouse' ? READ_LIVENESS_AFTER_MS : undefined,
    });
    // One budget of body bytes being received or processed, shared by every route that reads a body (see body.ts).
    const budget = new BodyBudget(deps.config.MAX_INFLIGHT_BODY_BYTES, deps.config.BODY_IDLE_TIMEOUT_MS);
    deps.metrics.inflight.bytes = () => budget.inUse;
    router.use(bodyBudget(budget));
  }

  guard(opts: GuardOptions): Middleware[] {
    const chain: Middleware[] = [];
    if (opts.errors && opts.errors !== 'envelope') chain.push(errorsIn(opts.errors));
    if (opts.auth !== 'none') {
      const names = typeof opts.auth === 'string' ? [opts.auth] : (opts.auth ?? ['apiKey']);
      const strategies = names.map((name) => this.auth[name]);
      const [first] = strategies;
      if (!first) throw new Error('a guard needs at least one authentication strategy');
      chain.push(async (ctx: Context, next: Next) => {
        const strategy = strategies.length === 1 ? first : (strategies.find((s) => s.present(ctx)) ?? first);
        ctx.state.caller = await strategy.authenticate(ctx);
        await next();
      });
    }
    if (opts.limiter) chain.push(this.deps.limits.middleware(opts.limiter));
    if (opts.auditRefusals) chain.push(this.refusals.requestsRefused(opts.limiter ?? ''));
    return chain;
  }

  on(method: Method, path: string, guard: GuardOptions, ...handlers: Middleware[]): void {
    this.router[method](path, ...this.guard(guard), ...handlers);
    if (guard.errors && guard.errors !== 'envelope') this.families.set(path, guard.errors);
  }

  context(): RouteContext {
    return {
      ...this.deps,
      router: this.router,
      docs: this.docs,
      on: (method, path, guard, ...handlers) => this.on(method, path, guard, ...handlers),
      guard: (opts) => this.guard(opts),
      authenticate: (ctx, name) => this.auth[name].authenticate(ctx),
      onClose: (fn) => {
        this.deps.closers?.push(fn);
      },
      read: (work) => this.reads.run(work),
      proxyCalls: this.proxyCalls,
    };
  }
}
