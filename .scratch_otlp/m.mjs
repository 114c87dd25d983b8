const keys = ['gen_ai.operation.name','gen_ai.provider.name','gen_ai.request.model','gen_ai.response.model','gen_ai.usage.input_tokens','gen_ai.usage.output_tokens','gen_ai.response.finish_reasons','gen_ai.response.id','gen_ai.input.messages','gen_ai.output.messages','server.address','server.port','gen_ai.request.temperature'];
function mk(np) { const o = np ? Object.create(null) : {}; for (const k of keys) o[k] = 'v' + k.length; return o; }
function bench(name, fn) { for (let i=0;i<1e5;i++) fn(); let best=1e9; for (let r=0;r<5;r++){ const t=performance.now(); for (let i=0;i<2e5;i++) fn(); best=Math.min(best,(performance.now()-t)/2e5*1e6);} console.log(name, best.toFixed(0),'ns'); }
const np = mk(true), pl = mk(false);
bench('build null-proto', () => mk(true));
bench('build plain', () => mk(false));
bench('spread null-proto', () => ({...np, 'otel.span_kind': 'client'}));
bench('spread plain', () => ({...pl, 'otel.span_kind': 'client'}));
bench('assign np->np', () => { const o = Object.assign(Object.create(null), np); o['otel.span_kind']='client'; return o; });
bench('forin copy np->plain', () => { const o = {}; for (const k in np) o[k] = np[k]; o['otel.span_kind']='client'; return o; });
bench('lookup 20 keys np', () => { let n=0; for (let i=0;i<20;i++) if (np['gen_ai.usage.x'+(i&3)] !== undefined) n++; return n; });
