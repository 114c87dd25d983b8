// Guardrail results: every accepted shape normalized (on results of the real @openai/guardrails checks, run here
// in-process, and a wrapped response captured from its client), mapped to spans, and their text masked per policy.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { type GuardrailResult, runGuardrails } from '@openai/guardrails';
import { type GuardrailLink, mapGuardrails, ownTraceId } from '../../../mappers/guardrails.ts';
import { normalizeGuardrails, type Normalized } from '../../../mappers/guardrails-schema.ts';
import { governedTraceMeta } from '../../../processors/governance-processor.ts';
import { DEFAULT_POLICY, parsePolicy } from '../../../processors/governance/policy.ts';
import {
  guardrailProcessor,
  guardrailRule,
  guardrailText,
  maskedPreview,
  PREVIEW_CHARS,
} from '../../../processors/guardrails.ts';
import type { SpanRecord } from '../../../core/record.ts';

const WRAPPED = JSON.parse(
  readFileSync(new URL('../../fixtures/guardrails/wrapped-response.json', import.meta.url), 'utf8'),
);
const TEXT = 'Mail jane.doe@corp.io or call 555-123-4567 about the refund; see https://evil.test/x';
const ctx = {
  workspaceId: 'ws',
  receivedAtMs: 1_800_000_000_000,
  limits: { maxStringBytes: 1 << 20, maxAttributeValueBytes: 1 << 16 },
};
const NONE: GuardrailLink = { traceId: 'tr', parentSpanId: '', linkedBy: 'none' };

const ok = (n: Normalized) => {
  if (!n.ok) throw new Error(JSON.stringify(n.issues));
  return n;
};

describe('guardrail results: shapes', () => {
  let results: GuardrailResult[];
  before(async () => {
    results = await runGuardrails(
      TEXT,
      {
        version: 1,
        guardrails: [
          {
            name: 'Contains PII',
            config: { entities: ['EMAIL_ADDRESS', 'PHONE_NUMBER'], block: true, detect_encoded_pii: false },
          },
          {
            name: 'URL Filter',
            config: { url_allow_list: [], allowed_schemes: ['https'], block_userinfo: true, allow_subdomains: false },
          },
          { name: 'Keyword Filter', config: { keywords: ['refund'] } },
        ],
      },
      {},
    );
  });

  it('JS results (an array): names from info, the checked text, the info less what moved into fields', () => {
    const n = ok(normalizeGuardrails(results, 100));
    expect(n.results.map((r) => [r.guardrailName, r.stage, r.tripwireTriggered, r.index])).to.deep.equal([
      ['Contains PII', 'unspecified', true, 0],
      ['URL Filter', 'unspecified', true, 1],
      ['unnamed', 'unspecified', true, 2],
    ]);
    expect(n.results[0]!.checkedText).to.equal(
      'Mail <EMAIL_ADDRESS> or call <PHONE_NUMBER> about the refund; see https://evil.test/x',
    );
    expect(n.results[0]!.info).to.not.have.property('checked_text');
    expect(n.results[0]!.info).to.not.have.property('guardrail_name');
  });

  it('Python results (snake_case), in { results } with a stage and links', () => {
    const py = results.map((r) => ({
      tripwire_triggered: r.tripwireTriggered,
      execution_failed: false,
      original_exception: null,
      info: r.info,
    }));
    const n = ok(normalizeGuardrails({ trace_id: 'trace_1', span_id: 'span_1', stage: 'input', results: py }, 100));
    expect(n.envelope).to.include({ traceId: 'trace_1', spanId: 'span_1', stage: 'input' });
    expect(n.results.map((r) => r.stage)).to.deep.equal(['input', 'input', 'input']);
  });

  it('the guardrail_results bundle of a wrapped response: stages by key, the response id as the link', () => {
    const n = ok(normalizeGuardrails(WRAPPED.response, 100));
    expect(n.envelope.responseId).to.equal(WRAPPED.response.id);
    expect(n.results.map((r) => [r.guardrailName, r.stage])).to.deep.equal([
      ['Contains PII', 'pre_flight'],
      ['Keyword Filter', 'input'],
      ['URL Filter', 'output'],
    ]);
    // The bundle alone, and under guardrail_results with a request id.
    expect(ok(normalizeGuardrails(WRAPPED.response.guardrail_results, 100)).results).to.have.length(3);
    const withId = ok(
      normalizeGuardrails({ requestId: 'req_1', guardrail_results: WRAPPED.response.guardrail_results }, 100),
    );
    expect(withId.envelope).to.deep.equal({ requestId: 'req_1' });
  });

  it('the Agents SDK result shape, and a failed execution (a serialized Error)', () => {
    const n = ok(
      normalizeGuardrails(
        [
          {
            guardrail: { type: 'output', name: 'Tone' },
            output: { tripwireTriggered: true, outputInfo: { tone: 'rude' } },
          },
          {
            tripwireTriggered: false,
            executionFailed: true,
            originalException: { message: 'timeout' },
            info: { guardrail_name: 'Jailbreak' },
          },
        ],
        100,
      ),
    );
    expect(n.results[0]).to.deep.include({
      guardrailName: 'Tone',
      stage: 'output',
      tripwireTriggered: true,
      info: { tone: 'rude' },
    });
    expect(n.results[1]).to.deep.include({
      guardrailName: 'Jailbreak',
      executionFailed: true,
      errorMessage: 'timeout',
    });
  });

  it('issues name the field as the body has it', () => {
    const n = normalizeGuardrails(
      { results: [{ tripwire_triggered: 'no' }, { tripwireTriggered: true, stage: 'a b' }] },
      100,
    );
    expect(n.ok).to.equal(false);
    if (n.ok) return;
    expect(n.issues.map((i) => i.field)).to.deep.equal(['results.0.tripwire_triggered', 'results.1.stage']);
    const big = normalizeGuardrails(Array(3).fill({ tripwireTriggered: true }), 2);
    expect(!big.ok && big.issues[0]!.code).to.equal('too_big');
  });
});

describe('guardrail results: spans', () => {
  it('one guardrail span per result, stable ids, an llm child for token usage', () => {
    const n = ok(
      normalizeGuardrails(
        {
          occurredAt: '2026-01-01T00:00:00Z',
          results: [
            {
              guardrailName: 'Jailbreak',
              tripwireTriggered: false,
              model: 'gpt-4.1-mini',
              tokenUsage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
            },
          ],
        },
        100,
      ),
    );
    const spans = mapGuardrails(n.envelope, n.results, NONE, ctx);
    expect(spans.map((s) => [s.kind, s.name, s.totalTokens])).to.deep.equal([
      ['guardrail', 'Jailbreak', 0],
      ['llm', 'Jailbreak check', 12],
    ]);
    expect(spans[1]!.parentSpanId).to.equal(spans[0]!.spanId);
    expect(spans[0]!.startTimeNs).to.equal('1767225600000000000');
    expect(mapGuardrails(n.envelope, n.results, NONE, ctx).map((s) => s.spanId)).to.deep.equal(
      spans.map((s) => s.spanId),
    );
  });

  it('a trace of their own: the same for the same results in the same workspace, keyed', () => {
    const n = ok(normalizeGuardrails([{ tripwireTriggered: true }], 100));
    const key = Buffer.from('k'.repeat(64));
    const id = ownTraceId('ws', n.envelope, n.results, key);
    expect(id).to.match(/^[0-9a-f]{32}$/);
    expect(ownTraceId('ws', n.envelope, n.results, key)).to.equal(id);
    expect(ownTraceId('ws2', n.envelope, n.results, key)).to.not.equal(id);
    expect(ownTraceId('ws', n.envelope, n.results, Buffer.from('x'.repeat(64)))).to.not.equal(id);
  });
});

describe('guardrail text at ingestion (processors/guardrails.ts)', () => {
  const span = (): SpanRecord => {
    const n = ok(
      normalizeGuardrails(
        [
          {
            guardrailName: 'Contains PII',
            stage: 'input',
            tripwireTriggered: true,
            checkedText: TEXT,
            info: {
              detected_entities: { EMAIL_ADDRESS: ['jane.doe@corp.io'], PHONE_NUMBER: ['555-123-4567'] },
              pii_detected: true,
            },
          },
        ],
        100,
      ),
    );
    return mapGuardrails(n.envelope, n.results, NONE, ctx)[0]!;
  };

  it('preview (default): findings and detected values masked, cut short', () => {
    const s = guardrailText(span(), 'preview');
    // The phone number no detector of tracegate's takes (a 555 number) is masked as the value the guardrail found.
    expect(s.prompt).to.equal(
      'Mail [REDACTED:email] or call [REDACTED:guardrail] about the refund; see https://evil.test/x',
    );
    expect((s.attributes['guardrail.info'] as any).detected_entities).to.deep.equal({
      EMAIL_ADDRESS: ['j***@c***.io'],
      PHONE_NUMBER: ['55…(12)'],
    });
    expect((s.attributes['guardrail.info'] as any).pii_detected).to.equal(true);
    expect(s.attributes['guardrail.checked_text_length']).to.equal(TEXT.length);
    expect(maskedPreview('a '.repeat(200), [])).to.have.length(PREVIEW_CHARS);
  });

  it('clear keeps the text; omit keeps its length only', () => {
    expect(guardrailText(span(), 'clear').prompt).to.equal(TEXT);
    const o = guardrailText(span(), 'omit');
    expect(o.prompt).to.equal('');
    expect((o.attributes['guardrail.info'] as any).detected_entities.PHONE_NUMBER).to.deep.equal(['[omitted](12)']);
  });

  it('the processor masks by the workspace policy and raises a finding per tripped guardrail', async () => {
    const policies = { policyFor: async () => parsePolicy({ version: 3 }) };
    const out = await guardrailProcessor(policies)({ spans: [span()], extra: [] }, null);
    expect(out.spans[0]!.prompt).to.not.contain('jane.doe');
    expect(out.extra).to.have.length(1);
    expect(out.extra[0]).to.include({
      recordType: 'finding',
      detector: 'guardrail',
      rule: 'guardrail.contains_pii',
      field: 'attribute:guardrail.tripwire_triggered',
      preview: 'Contains PII (input) tripped',
    });
    const off = await guardrailProcessor(policies, false)({ spans: [span()], extra: [] }, null);
    expect(off.extra).to.deep.equal([]);
    expect(off.spans[0]!.prompt).to.not.contain('jane.doe');
    expect(guardrailRule('  Off Topic Prompts!! ')).to.equal('guardrail.off_topic_prompts');
  });

  it('trace metadata is redacted as the policy redacts span text', () => {
    const meta = {
      recordType: 'trace_meta' as const,
      workspaceId: 'ws',
      traceId: 't',
      workflowName: 'ask jane.doe@corp.io',
      groupId: 'g',
      metadata: JSON.stringify({ user: 'jane.doe@corp.io', 'jane.doe@corp.io': 1 }),
      organization: '',
      project: '',
      source: 'agents',
      updatedAtMs: 1,
    };
    expect(governedTraceMeta(meta, DEFAULT_POLICY)).to.equal(meta); // flag only: nothing rewritten
    const redacted = governedTraceMeta(meta, parsePolicy({ version: 2, defaultAction: 'redact' }));
    expect(redacted.workflowName).to.equal('ask [REDACTED:email]');
    expect(JSON.parse(redacted.metadata)).to.deep.equal({ user: '[REDACTED:email]', '[REDACTED:email]': 1 });
  });
});
