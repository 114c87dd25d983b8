// See compile-graph.ts: stops its graph from running.
throw Object.assign(new Error('compiled, not run'), { compiledOnly: true });
