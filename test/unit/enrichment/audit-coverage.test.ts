// The audit log must account for the workspace's current state: a deleted newest record breaks no chain link,
// but the settings version or key it recorded still names it. Offline CLI runs: test/enrichment/audit-coverage-cli.test.ts.
import { expect } from 'chai';
import { checkAuditCoverage } from '../../../processors/audit.ts';
import type { AuditRecord } from '../../../core/enrichment-records.ts';

const rec = (action: string, details: object): AuditRecord => ({
  recordType: 'audit',
  workspaceId: 'w',
  atMs: 1,
  actor: 'cli',
  action,
  route: 'admin',
  outcome: 'ok',
  accepted: 0,
  rejected: 0,
  details: JSON.stringify(details),
  chainId: 'c',
  seq: 1,
  prevHash: '',
  hash: '',
});

describe('audit coverage', () => {
  it('names a settings version, key creation or revocation without its audit record', () => {
    const records = [
      rec('key.create', { keyId: 'k1' }),
      rec('key.create', { keyId: 'k2' }),
      rec('key.revoke', { keyId: 'k2' }),
      rec('policy.update', { version: 2 }),
      rec('ingest', {}),
    ];
    expect(
      checkAuditCoverage(records, {
        settingsVersion: 2,
        keys: [
          { keyId: 'k1', revoked: false },
          { keyId: 'k2', revoked: true },
        ],
      }),
    ).to.deep.equal([]);
    expect(checkAuditCoverage(records, { settingsVersion: 0, keys: [] })).to.deep.equal([]);
    const problems = checkAuditCoverage(records, {
      settingsVersion: 3,
      keys: [
        { keyId: 'k1', revoked: true },
        { keyId: 'k3', revoked: false },
      ],
    });
    expect(problems.map((p) => [p.kind, p.message])).to.deep.equal([
      ['missing_record', 'settings version 3 has no audit record of the change that made it'],
      ['missing_record', 'key k1 is revoked but has no key.revoke audit record'],
      ['missing_record', 'key k3 has no key.create audit record'],
    ]);
    expect(
      checkAuditCoverage([{ ...rec('policy.update', {}), details: 'not json' }], { settingsVersion: 1, keys: [] }),
    ).to.have.length(1);
  });
});
