// The session cookie's pure parts: reading and setting it, the same-origin rule for requests that change state, and
// when a session is valid.
import { expect } from 'chai';
import {
  changesState,
  crossSiteReason,
  ownOrigin,
  sessionCookie,
  sessionToken,
} from '../../../collector/auth/session-cookie.ts';
import {
  defaultOrigin,
  endsAtMs,
  isToken,
  newSession,
  newToken,
  sessionState,
  sessionView,
  signInLink,
  tokenHash,
  touchEveryMs,
} from '../../../collector/workspaces/sessions.ts';

describe('session cookie', () => {
  it('is read from the Cookie header among others, the first one when repeated, quotes removed', () => {
    expect(sessionToken(undefined)).to.equal(null);
    expect(sessionToken('')).to.equal(null);
    expect(sessionToken('a=1; b=2')).to.equal(null);
    expect(sessionToken('a=1; tg_session=abc; b=2')).to.equal('abc');
    expect(sessionToken('tg_session=first; tg_session=second')).to.equal('first');
    expect(sessionToken('tg_session="quoted"')).to.equal('quoted');
    expect(sessionToken('xtg_session=no; tg_sessionx=no')).to.equal(null);
  });

  it('is set HttpOnly, SameSite=Strict, Path=/, for the session lifetime; Secure over TLS; removed with Max-Age=0', () => {
    expect(sessionCookie('tok', { secure: false, maxAgeSeconds: 28800 })).to.equal(
      'tg_session=tok; Path=/; HttpOnly; SameSite=Strict; Max-Age=28800',
    );
    expect(sessionCookie('tok', { secure: true, maxAgeSeconds: 60 })).to.equal(
      'tg_session=tok; Path=/; HttpOnly; SameSite=Strict; Max-Age=60; Secure',
    );
    expect(sessionCookie(null, { secure: false, maxAgeSeconds: 28800 })).to.equal(
      'tg_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0',
    );
  });

  it('tokens are 32 random bytes in base64url, stored as their SHA-256', () => {
    const t = newToken();
    expect(t).to.match(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(t, 'base64url')).to.have.length(32);
    expect(isToken(t)).to.equal(true);
    expect(isToken(`${t}=`)).to.equal(false);
    expect(isToken('short')).to.equal(false);
    expect(tokenHash('abc')).to.equal('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(newToken()).not.to.equal(t);
  });
});

describe('same-origin rule for cookie requests that change state', () => {
  const own = 'http://127.0.0.1:4318';
  it('GET, HEAD and OPTIONS change nothing; every other method does', () => {
    expect(['GET', 'HEAD', 'OPTIONS', 'get'].map(changesState)).to.deep.equal([false, false, false, false]);
    expect(['POST', 'PUT', 'PATCH', 'DELETE'].map(changesState)).to.deep.equal([true, true, true, true]);
  });

  it('Origin must be exactly this origin: scheme, host and port', () => {
    expect(crossSiteReason(own, undefined, own)).to.equal(null);
    expect(crossSiteReason('http://127.0.0.1:4319', undefined, own)).to.match(/not this server's origin/);
    expect(crossSiteReason('https://127.0.0.1:4318', undefined, own)).to.match(/not this server's origin/);
    expect(crossSiteReason('http://localhost:4318', undefined, own)).to.match(/not this server's origin/);
    expect(crossSiteReason('null', undefined, own)).to.match(/opaque/);
    expect(crossSiteReason('not a url', undefined, own)).to.match(/not this server's origin/);
    // Origin decides when both are there
    expect(crossSiteReason('http://evil.example', `${own}/ui/`, own)).to.match(/not this server's origin/);
  });

  it('without Origin, the Referer’s origin; without either, refused', () => {
    expect(crossSiteReason(undefined, `${own}/ui/workbench?x=1`, own)).to.equal(null);
    expect(crossSiteReason(undefined, 'http://evil.example/page', own)).to.match(/Referer/);
    expect(crossSiteReason(undefined, undefined, own)).to.match(/neither Origin nor Referer/);
    expect(crossSiteReason(own, undefined, null)).to.match(/no Host/);
  });

  it("this server's origin: TRACEGATE_PUBLIC_ORIGIN, else the request's scheme and Host (default ports dropped)", () => {
    expect(ownOrigin('https://tg.example.com', 'http', '10.0.0.5:4318')).to.equal('https://tg.example.com');
    expect(ownOrigin(undefined, 'http', '127.0.0.1:4318')).to.equal(own);
    expect(ownOrigin(undefined, 'http', 'LocalHost:80')).to.equal('http://localhost');
    expect(ownOrigin(undefined, 'https', 'example.com:443')).to.equal('https://example.com');
    expect(ownOrigin(undefined, 'http', '')).to.equal(null);
    expect(ownOrigin(undefined, 'http', 'bad host/x')).to.equal(null);
  });
});

describe('session lifetime', () => {
  const idle = 1800_000;
  const { record: s, token } = newSession('ws_1', { idleMs: idle, maxMs: 8 * 3600_000 }, 1_000_000);
  it('a new session: its id, its token hash, expiry after the maximum, active', () => {
    expect(s.sessionId).to.match(/^ses_[0-9a-f]{16}$/);
    expect(s.tokenHash).to.equal(tokenHash(token));
    expect(s.expiresAtMs).to.equal(1_000_000 + 8 * 3600_000);
    expect(sessionState(s, 1_000_000, idle)).to.equal('active');
  });

  it('ends when unused for the idle time, at the absolute expiry whatever its use, or when revoked', () => {
    expect(sessionState(s, 1_000_000 + idle - 1, idle)).to.equal('active');
    expect(sessionState(s, 1_000_000 + idle, idle)).to.equal('idle');
    const used = { ...s, lastSeenAtMs: s.expiresAtMs - 1 };
    expect(sessionState(used, s.expiresAtMs, idle)).to.equal('expired');
    expect(sessionState({ ...s, revokedAtMs: 5 }, 1_000_001, idle)).to.equal('revoked');
    expect(endsAtMs(s, idle)).to.equal(1_000_000 + idle);
    expect(endsAtMs(used, idle)).to.equal(s.expiresAtMs);
  });

  it('a use is recorded at most once a minute (a tenth of a short idle time)', () => {
    expect(touchEveryMs(1800_000)).to.equal(60_000);
    expect(touchEveryMs(60_000)).to.equal(6_000);
  });

  it('is shown without its token hash', () => {
    const v = sessionView(s, 1_000_000, idle);
    expect(v).to.deep.equal({
      id: s.sessionId,
      workspaceId: 'ws_1',
      state: 'active',
      createdAt: new Date(1_000_000).toISOString(),
      lastSeenAt: new Date(1_000_000).toISOString(),
      expiresAt: new Date(s.expiresAtMs).toISOString(),
      idleExpiresAt: new Date(1_000_000 + idle).toISOString(),
      revokedAt: null,
    });
    expect(JSON.stringify(v)).not.to.include(s.tokenHash);
  });

  it('sign-in links: the token in the fragment, at the public origin or this machine', () => {
    expect(signInLink('https://tg.example.com', 'T')).to.equal('https://tg.example.com/ui/signin#token=T');
    expect(defaultOrigin('0.0.0.0', 4318)).to.equal('http://localhost:4318');
    expect(defaultOrigin('::', 4318)).to.equal('http://localhost:4318');
    expect(defaultOrigin('10.0.0.5', 80)).to.equal('http://10.0.0.5:80');
    expect(defaultOrigin('::1', 4318)).to.equal('http://[::1]:4318');
  });
});
