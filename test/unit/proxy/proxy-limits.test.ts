// mapProxy cuts the stored prompt and response to maxStringBytes and marks them in tracegate.truncated. The proxy
// route's limits, through a server: test/proxy/proxy-limits.test.ts.
import { expect } from 'chai';
import { mapProxy, type ProxyExchange } from '../../../mappers/proxy.ts';

describe('mapProxy string limit', () => {
  const exchange = (prompt: string, text: string): ProxyExchange => ({
    workspaceId: 'w',
    traceId: 't'.repeat(32),
    spanId: 's'.repeat(16),
    parentSpanId: '',
    startMs: 1000,
    endMs: 2000,
    request: { model: 'm' },
    prompt,
    provider: 'openai',
    environment: '',
    actionName: '',
    stream: false,
    attributes: { 'tracegate.truncated': ['earlier'] },
    outcome: {
      kind: 'upstream',
      httpStatus: 200,
      requestId: '',
      stream: null,
      body: { status: 'completed', output: [{ type: 'message', content: [{ type: 'output_text', text }] }] },
    },
  });

  it('appends its marks to any already there, and without limits keeps everything', () => {
    const r = mapProxy(exchange('p'.repeat(100), 'r'.repeat(10)), { maxStringBytes: 32 });
    expect(r.prompt).to.equal('p'.repeat(32));
    expect(r.response).to.equal('r'.repeat(10));
    expect(r.attributes['tracegate.truncated']).to.deep.equal(['earlier', 'tracegate.prompt']);
    const whole = mapProxy(exchange('p'.repeat(100), 'r'.repeat(100)));
    expect(whole.prompt.length).to.equal(100);
    expect(whole.attributes['tracegate.truncated']).to.deep.equal(['earlier']);
  });
});
