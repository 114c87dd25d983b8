// ClickHouse side of browser sessions and one-time sign-in links (schema: clickhouse-migrations.ts v13). ClickHouse
// has no transactions nor compare-and-set, and several collectors may share the tables, so:
// - a session is one ReplacingMergeTree row per token hash whose version decides which write stands: a use writes
//   its time as the version, a revocation REVOKED + its time, so a revocation outranks every use, whichever is
//   written last, and uses only move lastSeen forward;
// - a sign-in link is taken by a claim row; a claimer that then sees another live claim withdraws its own, so of
//   claims racing at most the one that checked while alone keeps the link (as putSettings does for settings).
import { randomUUID } from 'node:crypto';
import type { ClickHouseClient } from '@clickhouse/client';
import type { SessionRecord, SessionStore, SignInLinkRecord } from '../core/ports/storage.ts';
import { str } from './clickhouse-sql.ts';
import { insertTsv } from './clickhouse-tsv.ts';
import { count, wellFormed } from './codec.ts';

/** Versions at or above this are revocations (2^50: above any time in ms for millennia, a safe integer below 2^53). */
const REVOKED = 2 ** 50;

interface SessionRow {
  session_id: string;
  token_hash: string;
  workspace_id: string;
  created_at_ms: string;
  last_seen_ms: string;
  expires_at_ms: string;
  revoked_at_ms: string;
}

const SESSION_COLUMNS =
  'session_id, token_hash, workspace_id, created_at_ms, last_seen_ms, expires_at_ms, revoked_at_ms';

function fromRow(r: SessionRow): SessionRecord {
  return {
    sessionId: r.session_id,
    tokenHash: r.token_hash,
    workspaceId: r.workspace_id,
    createdAtMs: Number(r.created_at_ms),
    lastSeenAtMs: Number(r.last_seen_ms),
    expiresAtMs: Number(r.expires_at_ms),
    revokedAtMs: Number(r.revoked_at_ms),
  };
}

export class ClickHouseSessions implements SessionStore {
  private readonly client: ClickHouseClient;
  private readonly db: string;
  constructor(client: ClickHouseClient, db: string) {
    this.client = client;
    this.db = db;
  }

  private t(table: string): string {
    return `${this.db}.${table}`;
  }

  private async rows<T>(query: string): Promise<T[]> {
    return (await this.client.query({ query, format: 'JSONEachRow' })).json<T>();
  }

  private write(s: SessionRecord): Promise<void> {
    const version = s.revokedAtMs > 0 ? REVOKED + count(s.revokedAtMs) : count(s.lastSeenAtMs);
    return insertTsv(this.client, this.t('sessions'), [
      {
        session_id: wellFormed(s.sessionId),
        token_hash: wellFormed(s.tokenHash),
        workspace_id: wellFormed(s.workspaceId),
        created_at_ms: count(s.createdAtMs),
        last_seen_ms: count(s.lastSeenAtMs),
        expires_at_ms: count(s.expiresAtMs),
        revoked_at_ms: count(s.revokedAtMs),
        version,
      },
    ]);
  }

  private async sessions(where: string): Promise<SessionRecord[]> {
    const rows = await this.rows<SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM ${this.t('sessions')} FINAL WHERE ${where}
       ORDER BY created_at_ms DESC, session_id DESC`,
    );
    return rows.map(fromRow);
  }

  putSession(session: SessionRecord): Promise<void> {
    return this.write(session);
  }

  async getSession(tokenHash: string): Promise<SessionRecord | null> {
    const [s] = await this.sessions(`token_hash = ${str(wellFormed(tokenHash))}`);
    return s ?? null;
  }

  async touchSession(session: SessionRecord, atMs: number): Promise<void> {
    if (session.revokedAtMs > 0 || atMs <= session.lastSeenAtMs) return;
    await this.write({ ...session, lastSeenAtMs: atMs });
  }

  listSessions(q: { workspaceId?: string; nowMs: number }): Promise<SessionRecord[]> {
    const where = [`expires_at_ms > ${count(q.nowMs)}`];
    if (q.workspaceId !== undefined) where.push(`workspace_id = ${str(wellFormed(q.workspaceId))}`);
    return this.sessions(where.join(' AND '));
  }

  async revokeSession(sessionId: string, atMs: number): Promise<SessionRecord | null> {
    const [s] = await this.sessions(`session_id = ${str(wellFormed(sessionId))}`);
    if (!s) return null;
    if (s.revokedAtMs > 0) return s;
    const revoked = { ...s, revokedAtMs: Math.max(1, count(atMs)) };
    await this.write(revoked);
    return revoked;
  }

  async putSignInLink(link: SignInLinkRecord): Promise<void> {
    await insertTsv(this.client, this.t('signin_links'), [
      {
        token_hash: wellFormed(link.tokenHash),
        workspace_id: wellFormed(link.workspaceId),
        created_at_ms: count(link.createdAtMs),
        expires_at_ms: count(link.expiresAtMs),
      },
    ]);
  }

  async claimSignInLink(tokenHash: string, atMs: number): Promise<SignInLinkRecord | null> {
    const hash = str(wellFormed(tokenHash));
    const [link] = await this.rows<{ workspace_id: string; created_at_ms: string; expires_at_ms: string }>(
      `SELECT workspace_id, created_at_ms, expires_at_ms FROM ${this.t('signin_links')} FINAL WHERE token_hash = ${hash}`,
    );
    if (!link || Number(link.expires_at_ms) <= atMs) return null;
    const claim = {
      token_hash: wellFormed(tokenHash),
      claimer: randomUUID(),
      claimed_at_ms: count(atMs),
      withdrawn: 0,
    };
    await insertTsv(this.client, this.t('signin_claims'), [claim]);
    const live = await this.rows<{ claimer: string }>(
      `SELECT claimer FROM ${this.t('signin_claims')} FINAL WHERE token_hash = ${hash} AND withdrawn = 0`,
    );
    if (live.length !== 1 || live[0]!.claimer !== claim.claimer) {
      await insertTsv(this.client, this.t('signin_claims'), [{ ...claim, withdrawn: 1 }]);
      return null;
    }
    return {
      tokenHash,
      workspaceId: link.workspace_id,
      createdAtMs: Number(link.created_at_ms),
      expiresAtMs: Number(link.expires_at_ms),
    };
  }
}
