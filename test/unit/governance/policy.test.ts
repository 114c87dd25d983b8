// Policy schema, evaluation rules and redaction.
import { expect } from 'chai';
import {
  actionFor,
  DEFAULT_POLICY,
  evaluatePolicy,
  globMatch,
  parsePolicy,
  policySchema,
  redact,
  type Finding,
  type Policy,
} from '../../../processors/governance/index.ts';

const finding = (
  category: string,
  rule: string,
  start = 0,
  end = 1,
  severity: Finding['severity'] = 'high',
): Finding => ({
  detector: category === 'prompt_injection' ? 'injection' : category === 'api_key' ? 'secret' : 'pii',
  rule,
  category,
  severity,
  start,
  end,
  preview: 'x…(1)',
});
const email = finding('email', 'pii.email', 0, 5, 'medium');
const key = finding('api_key', 'secret.openai_key', 6, 10, 'critical');
const subject = (over: Partial<Parameters<typeof evaluatePolicy>[1]> = {}) => ({
  model: 'gpt-4o-mini',
  environment: 'production',
  prompt: 'hello',
  response: '',
  findings: [] as Finding[],
  ...over,
});
const policy = (over: Record<string, unknown> = {}): Policy => parsePolicy({ version: 1, ...over });

describe('governance policy schema', () => {
  it('fills defaults: flag everything, block nothing', () => {
    expect(parsePolicy({ version: 1 })).to.deep.equal(DEFAULT_POLICY);
    expect(DEFAULT_POLICY.defaultAction).to.equal('flag');
    expect(Object.isFrozen(DEFAULT_POLICY)).to.equal(true);
  });
  it('rejects unknown actions, unknown fields, negative limits and a missing version', () => {
    for (const bad of [
      { version: 1, actions: { email: 'delete' } },
      { version: 1, colour: 'red' },
      { version: 1, maxPromptChars: -1 },
      {},
      { version: 1, modelDeny: [''] },
      { version: 1.5 },
      { version: 1, minSeverity: 'severe' },
    ])
      expect(policySchema.safeParse(bad).success, JSON.stringify(bad)).to.equal(false);
  });
  it('refuses an action key that names no rule, category or detector (a typo must not leave data unredacted)', () => {
    for (const k of ['api_keys', 'secrets', 'pii.mail', 'PII']) {
      expect(policySchema.safeParse({ version: 1, actions: { [k]: 'redact' } }).success, k).to.equal(false);
    }
  });
  it('keys actions by rule, category or detector; the most specific wins', () => {
    const p = policy({ actions: { secret: 'block', api_key: 'redact', 'secret.openai_key': 'flag', pii: 'redact' } });
    expect(actionFor(p, key)).to.equal('flag');
    expect(actionFor(p, { ...key, rule: 'secret.github_token' })).to.equal('redact');
    expect(actionFor(p, { ...key, rule: 'secret.jwt', category: 'jwt' })).to.equal('block');
    expect(actionFor(p, email)).to.equal('redact');
  });
  it('accepts a full document', () => {
    const p = parsePolicy({
      version: 3,
      modelAllow: ['gpt-4o*', 'claude-*'],
      modelDeny: ['*-preview'],
      actions: { email: 'redact', 'secret.jwt': 'block' },
      defaultAction: 'flag',
      maxPromptChars: 10_000,
      requiredEnvironments: ['production'],
      minSeverity: 'medium',
    });
    expect(p.version).to.equal(3);
    expect(p.actions).to.deep.equal({ email: 'redact', 'secret.jwt': 'block' });
  });
});

describe('governance policy evaluation', () => {
  it('the default policy allows a clean request and flags findings', () => {
    expect(evaluatePolicy(DEFAULT_POLICY, subject())).to.deep.equal({ decision: 'allow', reasons: [] });
    const r = evaluatePolicy(DEFAULT_POLICY, subject({ findings: [email, key] }));
    expect(r.decision).to.equal('flag');
    expect(r.reasons.map((x) => x.code)).to.deep.equal(['finding_flagged', 'finding_flagged']);
  });
  it('glob matching is whole-string and case-insensitive; regex characters are literal', () => {
    expect(globMatch('gpt-4o*', 'GPT-4o-mini')).to.equal(true);
    expect(globMatch('gpt-4o', 'gpt-4o-mini')).to.equal(false);
    expect(globMatch('*-preview', 'o1-preview')).to.equal(true);
    expect(globMatch('gpt-4.1', 'gpt-4x1')).to.equal(false);
    expect(globMatch('*', 'anything')).to.equal(true);
    expect(globMatch('a*a', 'a')).to.equal(false);
    expect(globMatch('a*b*c', 'aXbYbZc')).to.equal(true);
    expect(globMatch('a*b*c', 'acb')).to.equal(false);
    expect(globMatch('**', '')).to.equal(true);
    expect(globMatch('*Σ', 'ΑΣ')).to.equal(true); // only ASCII is case-folded: a final sigma cannot slip a deny-list
  });
  it('glob matching agrees with a regex on random inputs', () => {
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const word = (alphabet: string, n: number) =>
      Array.from({ length: rnd(n) }, () => alphabet[rnd(alphabet.length)]).join('');
    for (let i = 0; i < 5000; i++) {
      const glob = word('ab*', 7);
      const value = word('abAB', 9);
      const re = new RegExp(`^${glob.split('*').join('.*')}$`, 'i');
      expect(globMatch(glob, value), `${glob} ~ ${value}`).to.equal(re.test(value));
    }
  });
  it('a long model id against a many-star pattern is matched in linear time (fuzzing found a 10 s regex backtrack)', () => {
    const model = '-'.repeat(60_000) + 'x';
    const t0 = performance.now();
    for (let i = 0; i < 100; i++) expect(globMatch('*-*-*-preview', model)).to.equal(false);
    expect(performance.now() - t0).to.be.below(500);
  });
  it('modelDeny blocks; it wins over modelAllow', () => {
    const p = policy({ modelAllow: ['gpt-*'], modelDeny: ['gpt-4o*'] });
    const r = evaluatePolicy(p, subject());
    expect(r.decision).to.equal('block');
    expect(r.reasons).to.deep.equal([
      { code: 'model_denied', message: 'model "gpt-4o-mini" matches deny pattern "gpt-4o*"' },
    ]);
  });
  it('modelAllow blocks any other model; an empty model is not checked', () => {
    const p = policy({ modelAllow: ['claude-*'] });
    expect(evaluatePolicy(p, subject()).reasons[0]!.code).to.equal('model_not_allowed');
    expect(evaluatePolicy(p, subject({ model: 'claude-sonnet-4' })).decision).to.equal('allow');
    expect(evaluatePolicy(p, subject({ model: '' })).decision).to.equal('allow');
  });
  it('requiredEnvironments blocks other (and empty) environments', () => {
    const p = policy({ requiredEnvironments: ['production', 'staging'] });
    expect(evaluatePolicy(p, subject()).decision).to.equal('allow');
    expect(evaluatePolicy(p, subject({ environment: 'dev' })).reasons[0]!.code).to.equal('environment_not_allowed');
    expect(evaluatePolicy(p, subject({ environment: '' })).decision).to.equal('block');
    // Reasons are stored and shown: a label holding PII or a secret is quoted masked.
    expect(evaluatePolicy(p, subject({ environment: 'bob@example.com' })).reasons[0]!.message).to.equal(
      'environment "[REDACTED:email]" is not one of production, staging',
    );
    expect(
      evaluatePolicy(policy({ modelDeny: ['*'] }), subject({ model: 'ft:bob@example.com' })).reasons[0]!.message,
    ).to.equal('model "ft:[REDACTED:email]" matches deny pattern "*"');
  });
  it('maxPromptChars blocks longer prompts; 0 means no limit', () => {
    expect(evaluatePolicy(policy({ maxPromptChars: 5 }), subject({ prompt: 'hello' })).decision).to.equal('allow');
    const r = evaluatePolicy(policy({ maxPromptChars: 5 }), subject({ prompt: 'hello!' }));
    expect(r.reasons).to.deep.equal([{ code: 'prompt_too_long', message: 'prompt is 6 chars; the limit is 5' }]);
    expect(evaluatePolicy(policy({ maxPromptChars: 0 }), subject({ prompt: 'x'.repeat(1e6) })).decision).to.equal(
      'allow',
    );
  });
  it('actions by category, rule id over category, default for the rest', () => {
    const p = policy({
      actions: { email: 'redact', api_key: 'flag', 'secret.openai_key': 'block' },
      defaultAction: 'redact',
    });
    expect(actionFor(p, email)).to.equal('redact');
    expect(actionFor(p, key)).to.equal('block');
    expect(actionFor(p, finding('api_key', 'secret.github_token'))).to.equal('flag');
    expect(actionFor(p, finding('phone', 'pii.phone'))).to.equal('redact');
  });
  it('the decision is the strongest action; reasons carry category and rule', () => {
    const p = policy({ actions: { email: 'redact', api_key: 'block' } });
    const r = evaluatePolicy(p, subject({ findings: [email, key] }));
    expect(r.decision).to.equal('block');
    expect(r.reasons).to.deep.equal([
      {
        code: 'finding_redacted',
        message: '1 email finding (pii.email): redact',
        category: 'email',
        rule: 'pii.email',
        count: 1,
      },
      {
        code: 'finding_blocked',
        message: '1 api_key finding (secret.openai_key): block',
        category: 'api_key',
        rule: 'secret.openai_key',
        count: 1,
      },
    ]);
    expect(evaluatePolicy(policy({ actions: { email: 'redact' } }), subject({ findings: [email] })).decision).to.equal(
      'redact',
    );
  });
  it('groups many findings of one rule into one reason', () => {
    const r = evaluatePolicy(DEFAULT_POLICY, subject({ findings: Array.from({ length: 500 }, () => email) }));
    expect(r.reasons).to.have.length(1);
    expect(r.reasons[0]!.count).to.equal(500);
    expect(r.reasons[0]!.message).to.equal('500 email findings (pii.email): flag');
  });
  it('minSeverity ignores weaker findings', () => {
    const p = policy({ minSeverity: 'high', defaultAction: 'block' });
    expect(actionFor(p, email)).to.equal(null);
    expect(evaluatePolicy(p, subject({ findings: [email] })).decision).to.equal('allow');
    expect(evaluatePolicy(p, subject({ findings: [email, key] })).decision).to.equal('block');
  });
  it('combines policy and finding reasons', () => {
    const p = policy({ modelDeny: ['gpt-*'], maxPromptChars: 1, actions: { email: 'redact' } });
    const r = evaluatePolicy(p, subject({ findings: [email] }));
    expect(r.decision).to.equal('block');
    expect(r.reasons.map((x) => x.code)).to.deep.equal(['model_denied', 'prompt_too_long', 'finding_redacted']);
  });
});

describe('governance redact', () => {
  const f = (start: number, end: number, category: string, severity: Finding['severity'] = 'medium') =>
    finding(category, `x.${category}`, start, end, severity);
  it('replaces spans with [REDACTED:category]', () => {
    expect(redact('mail bob@x.io now', [f(5, 13, 'email')])).to.equal('mail [REDACTED:email] now');
    expect(redact('abc', [])).to.equal('abc');
  });
  it('handles unsorted, adjacent and overlapping findings', () => {
    const text = '0123456789';
    expect(redact(text, [f(6, 8, 'b'), f(2, 4, 'a')])).to.equal('01[REDACTED:a]45[REDACTED:b]89');
    expect(redact(text, [f(2, 4, 'a'), f(4, 6, 'b')])).to.equal('01[REDACTED:a][REDACTED:b]6789');
    expect(redact(text, [f(2, 6, 'a', 'low'), f(4, 8, 'b', 'high')])).to.equal('01[REDACTED:b]89');
    expect(redact(text, [f(1, 9, 'outer'), f(3, 4, 'inner')])).to.equal('0[REDACTED:outer]9');
    // A chain of overlaps is one group, labelled by its most severe member.
    expect(redact(text, [f(1, 3, 'a'), f(2, 5, 'b', 'low'), f(4, 7, 'c', 'low')])).to.equal('0[REDACTED:a]789');
  });
  it('clamps spans outside the text and ignores empty ones', () => {
    expect(redact('abc', [f(-5, 1, 'a'), f(2, 99, 'b'), f(1, 1, 'c')])).to.equal('[REDACTED:a]b[REDACTED:b]');
  });
});
