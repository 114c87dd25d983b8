// Embedded store side of browser sessions and one-time sign-in links (schema: duckdb-migrations.ts v8). One process
// owns the file and its calls run one at a time (Serial), so a check and the update after it need no more than that.
import type { DuckDBConnection, DuckDBValue } from '@duckdb/node-api';
import type { SessionRecord, SessionStore, SignInLinkRecord } from '../core/ports/storage.ts';
import { count, wellFormed } from './codec.ts';
import type { Serial } from './duckdb-enrichment.ts';

type Params = Record<string, DuckDBValue>;

interface SessionRow {
  session_id: string;
  token_hash: string;
  workspace_id: string;
  created_at_ms: bigint;
  last_seen_ms: bigint;
  expires_at_ms: bigint;
  revoked_at_ms: bigint;
}

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

async function all<T>(c: DuckDBConnection, sql: string, params: Params = {}): Promise<T[]> {
  return (await c.runAndReadAll(sql, params)).getRowObjectsJS() as T[];
}

const ms = (n: number) => BigInt(count(n));

export class DuckDbSessions implements SessionStore {
  private readonly serial: Serial;
  constructor(serial: Serial) {
    this.serial = serial;
  }

  private async sessions(c: DuckDBConnection, where: string, params: Params): Promise<SessionRecord[]> {
    const rows = await all<SessionRow>(
      c,
      `SELECT * FROM sessions WHERE ${where} ORDER BY created_at_ms DESC, session_id DESC`,
      params,
    );
    return rows.map(fromRow);
  }

  async putSession(s: SessionRecord): Promise<void> {
    await this.serial((c) =>
      c.run('INSERT OR REPLACE INTO sessions VALUES ($id, $hash, $ws, $created, $seen, $expires, $revoked)', {
        id: wellFormed(s.sessionId),
        hash: wellFormed(s.tokenHash),
        ws: wellFormed(s.workspaceId),
        created: ms(s.createdAtMs),
        seen: ms(s.lastSeenAtMs),
        expires: ms(s.expiresAtMs),
        revoked: ms(s.revokedAtMs),
      }),
    );
  }

  async getSession(tokenHash: string): Promise<SessionRecord | null> {
    const [s] = await this.serial((c) => this.sessions(c, 'token_hash = $h', { h: wellFormed(tokenHash) }));
    return s ?? null;
  }

  async touchSession(session: SessionRecord, atMs: number): Promise<void> {
    await this.serial((c) =>
      c.run('UPDATE sessions SET last_seen_ms = $at WHERE token_hash = $h AND last_seen_ms < $at', {
        h: wellFormed(session.tokenHash),
        at: ms(atMs),
      }),
    );
  }

  listSessions(q: { workspaceId?: string; nowMs: number }): Promise<SessionRecord[]> {
    const params: Params = { now: ms(q.nowMs) };
    let where = 'expires_at_ms > $now';
    if (q.workspaceId !== undefined) {
      where += ' AND workspace_id = $ws';
      params.ws = wellFormed(q.workspaceId);
    }
    return this.serial((c) => this.sessions(c, where, params));
  }

  revokeSession(sessionId: string, atMs: number): Promise<SessionRecord | null> {
    return this.serial(async (c) => {
      const id = wellFormed(sessionId);
      await c.run('UPDATE sessions SET revoked_at_ms = $at WHERE session_id = $id AND revoked_at_ms = 0', {
        id,
        at: BigInt(Math.max(1, count(atMs))),
      });
      const [s] = await this.sessions(c, 'session_id = $id', { id });
      return s ?? null;
    });
  }

  async putSignInLink(link: SignInLinkRecord): Promise<void> {
    await this.serial((c) =>
      c.run('INSERT INTO signin_links VALUES ($h, $ws, $created, $expires, 0) ON CONFLICT DO NOTHING', {
        h: wellFormed(link.tokenHash),
        ws: wellFormed(link.workspaceId),
        created: ms(link.createdAtMs),
        expires: ms(link.expiresAtMs),
      }),
    );
  }

  claimSignInLink(tokenHash: string, atMs: number): Promise<SignInLinkRecord | null> {
    return this.serial(async (c) => {
      const h = wellFormed(tokenHash);
      const [link] = await all<{ workspace_id: string; created_at_ms: bigint; expires_at_ms: bigint }>(
        c,
        'SELECT workspace_id, created_at_ms, expires_at_ms FROM signin_links WHERE token_hash = $h AND claimed_at_ms = 0 AND expires_at_ms > $at',
        { h, at: ms(atMs) },
      );
      if (!link) return null;
      await c.run('UPDATE signin_links SET claimed_at_ms = $at WHERE token_hash = $h', {
        h,
        at: BigInt(Math.max(1, count(atMs))),
      });
      return {
        tokenHash,
        workspaceId: link.workspace_id,
        createdAtMs: Number(link.created_at_ms),
        expiresAtMs: Number(link.expires_at_ms),
      };
    });
  }
}
