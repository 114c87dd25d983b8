// The session store's contract (browser sessions and one-time sign-in links), on every backend: DuckDB directly and
// behind the storage thread, ClickHouse 18.16, current ClickHouse through chDB and the two-shard cluster.
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import type { SessionRecord, Storage } from '../../core/ports/storage.ts';
import { CONTRACT_BACKENDS, type StoreFactory, type StoreHarness } from './harness.ts';

const T0 = 1_763_787_000_000;
const HOUR = 3_600_000;
const hash = () => createHash('sha256').update(randomBytes(32)).digest('hex');

function session(over: Partial<SessionRecord> = {}): SessionRecord {
  return {
    sessionId: `ses_${randomBytes(8).toString('hex')}`,
    tokenHash: hash(),
    workspaceId: 'ws_0000000000000001',
    createdAtMs: T0,
    lastSeenAtMs: T0,
    expiresAtMs: T0 + 8 * HOUR,
    revokedAtMs: 0,
    ...over,
  };
}

function sessionContract(name: string, factory: StoreFactory) {
  describe(`session store contract: ${name}`, function () {
    this.timeout(120_000);
    let h: StoreHarness;
    let s: Storage;
    before(async () => {
      h = await factory();
      s = h.storage;
    });
    after(() => h?.destroy());

    it('finds a session by its token hash, exactly as stored; an unknown hash is null', async () => {
      const a = session();
      await s.putSession(a);
      expect(await s.getSession(a.tokenHash)).to.deep.equal(a);
      expect(await s.getSession(hash())).to.equal(null);
    });

    it('a use moves lastSeen forward, never back', async () => {
      const a = session();
      await s.putSession(a);
      await s.touchSession(a, T0 + 60_000);
      expect((await s.getSession(a.tokenHash))!.lastSeenAtMs).to.equal(T0 + 60_000);
      await s.touchSession(a, T0 + 30_000); // an older use, recorded late
      expect((await s.getSession(a.tokenHash))!.lastSeenAtMs).to.equal(T0 + 60_000);
    });

    it('a revocation stands against a use recorded after it from a copy read before it (another collector)', async () => {
      const a = session();
      await s.putSession(a);
      const revoked = await s.revokeSession(a.sessionId, T0 + 1000);
      expect(revoked).to.deep.equal({ ...a, revokedAtMs: T0 + 1000 });
      await s.touchSession(a, T0 + 120_000); // `a` still says not revoked
      const now = await s.getSession(a.tokenHash);
      expect(now!.revokedAtMs).to.equal(T0 + 1000);
      // Revoked again: the first revocation time stays. Unknown ids: null.
      expect((await s.revokeSession(a.sessionId, T0 + 5000))!.revokedAtMs).to.equal(T0 + 1000);
      expect(await s.revokeSession('ses_ffffffffffffffff', T0)).to.equal(null);
    });

    it('lists the sessions not past their absolute expiry, newest first, of one workspace or all', async () => {
      const ws = `ws_${randomBytes(8).toString('hex')}`;
      const older = session({ workspaceId: ws, createdAtMs: T0 + 10 });
      const newer = session({ workspaceId: ws, createdAtMs: T0 + 20, revokedAtMs: T0 + 30 });
      const expired = session({ workspaceId: ws, createdAtMs: T0 + 30, expiresAtMs: T0 + 40 });
      for (const x of [older, newer, expired]) await s.putSession(x);
      const listed = await s.listSessions({ workspaceId: ws, nowMs: T0 + 100 });
      expect(listed.map((x) => x.sessionId)).to.deep.equal([newer.sessionId, older.sessionId]);
      expect(listed[0]).to.deep.equal(newer);
      const everyone = await s.listSessions({ nowMs: T0 + 100 });
      expect(everyone.map((x) => x.sessionId)).to.include.members([newer.sessionId, older.sessionId]);
      expect(everyone.map((x) => x.sessionId)).not.to.include(expired.sessionId);
    });

    it('a sign-in link is taken once, before it expires; unknown ones never', async () => {
      const link = {
        tokenHash: hash(),
        workspaceId: 'ws_0000000000000002',
        createdAtMs: T0,
        expiresAtMs: T0 + 600_000,
      };
      await s.putSignInLink(link);
      expect(await s.claimSignInLink(link.tokenHash, T0 + 1000)).to.deep.equal(link);
      expect(await s.claimSignInLink(link.tokenHash, T0 + 2000)).to.equal(null);
      const late = { ...link, tokenHash: hash() };
      await s.putSignInLink(late);
      expect(await s.claimSignInLink(late.tokenHash, T0 + 600_000)).to.equal(null);
      expect(await s.claimSignInLink(hash(), T0)).to.equal(null);
    });

    it('of many claims of one link at once, exactly one gets it', async () => {
      const link = {
        tokenHash: hash(),
        workspaceId: 'ws_0000000000000003',
        createdAtMs: T0,
        expiresAtMs: T0 + 600_000,
      };
      await s.putSignInLink(link);
      const got = await Promise.all(Array.from({ length: 8 }, () => s.claimSignInLink(link.tokenHash, T0 + 1)));
      // ClickHouse: claimers that all saw each other withdraw; then one later claim may still take it, once.
      const winners = got.filter((x) => x !== null).length;
      expect(winners).to.be.at.most(1);
      if (winners === 0) expect(await s.claimSignInLink(link.tokenHash, T0 + 2)).to.deep.equal(link);
      expect(await s.claimSignInLink(link.tokenHash, T0 + 3)).to.equal(null);
    });

    it('a session survives a restart', async () => {
      const a = session();
      await s.putSession(a);
      s = await h.reopen();
      expect(await s.getSession(a.tokenHash)).to.deep.equal(a);
    });
  });
}

for (const [name, factory] of CONTRACT_BACKENDS) sessionContract(name, factory);
