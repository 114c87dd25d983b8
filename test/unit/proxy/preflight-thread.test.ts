// Large bodies get the preflight on a thread of their own: the answer must equal the inline one.
import { expect } from 'chai';
import { preflight } from '../../../collector/proxy/preflight.ts';
import { OFFLOAD_BYTES, PreflightThread } from '../../../collector/proxy/preflight-thread.ts';
import { parsePolicy } from '../../../processors/governance/index.ts';

describe('proxy preflight thread', function () {
  this.timeout(90_000);
  const thread = new PreflightThread();
  after(() => thread.close());
  const filler = 'plain words for a long prompt '.repeat(Math.ceil(OFFLOAD_BYTES / 30));
  const secret = 'sk-proj-Ab3dEf7hIj9kLmN0pQrStUvWxYz12345678901234567890AbCd';

  for (const [name, policy] of [
    [
      'redact (rewritten bytes come back)',
      parsePolicy({ version: 1, actions: { email: 'redact', api_key: 'redact' } }),
    ],
    ['block', parsePolicy({ version: 1, actions: { api_key: 'block' } })],
    ["flag (the caller's bytes forwarded as sent)", parsePolicy({ version: 1 })],
  ] as const) {
    it(`answers as the inline preflight does: ${name}`, async () => {
      const body = {
        model: 'gpt-4o-mini',
        instructions: 'mail ann@example.com',
        input: `${filler} key ${secret} ${filler}`,
        metadata: { 'bob@example.com': 'x' },
      };
      const raw = Buffer.from(JSON.stringify(body));
      expect(raw.length).to.be.greaterThan(OFFLOAD_BYTES);
      const inline = preflight(policy, raw, body, 'prod');
      const offloaded = await thread.run(policy, raw, body, 'prod');
      expect(offloaded.decision).to.equal(inline.decision);
      expect(offloaded.forward.equals(inline.forward)).to.equal(true);
      expect(offloaded.request).to.deep.equal(inline.request);
      expect(offloaded.prompt).to.equal(inline.prompt);
      expect(offloaded.attributes).to.deep.equal(inline.attributes);
      expect(offloaded.result).to.deep.equal(inline.result);
      // Rewritten when redacted; otherwise the caller's own buffer (a blocked body is never sent).
      if (inline.decision === 'redact')
        expect(offloaded.forward.toString()).to.not.include(secret).and.not.include('bob@example.com');
      else expect(offloaded.forward).to.equal(raw);
    });
  }
});
