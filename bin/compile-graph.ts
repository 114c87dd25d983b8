// Every module `serve` loads, in one graph for bin/compile-cache.ts to compile without running it: the first import
// throws when evaluated, and evaluation goes in import order, so nothing after it runs (all of it is compiled by then).
import './compile-graph-stop.ts';
import './tracegate.ts';
import './commands/serve.ts';
import '../collector/server.ts';
import '../pipeline/processor-thread.ts';
import '../storage/worker-host.ts';
import '../collector/proxy/preflight-host.ts';
