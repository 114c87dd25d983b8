import { startTestServer, get } from '../test/support/server.ts';
const s = await startTestServer('duckdb');
for (const p of ['/openapi.json', '/api/openapi.json', '/docs/openapi.json']) { const r = await get(s.url + p); if (r.status === 200) { console.log(p, JSON.stringify(r.json.paths['/api/proxy/provider/responses']).slice(0, 600)); } }
await s.close();
