// Storage on a worker thread: the same interface, each call a message to storage/worker-host.ts.
// The server uses it so that inserts and queries run beside request handling, not inside it;
// the writer hands over spool segment paths, so records are never copied between threads.
import { Worker } from 'node:worker_threads';
import type { Config } from '../config/index.ts';
import { HttpError } from '../collector/errors.ts';
import type { Storage } from './types.ts';
import type { CallMessage, ReplyMessage } from './worker-host.ts';
import type { SpoolFilesResult } from './spool-files.ts';

type Method = Exclude<keyof Storage, 'kind' | 'init' | 'close'>;
type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void };

export class WorkerStorage implements Storage {
  readonly kind: Storage['kind'];
  private readonly config: Config;
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private initialized = false;
  private closing = false;

  constructor(config: Config) {
    this.config = config;
    this.kind = config.CLICKHOUSE_URL ? 'clickhouse' : 'duckdb';
  }

  private spawn(): Worker {
    const w = new Worker(new URL('./worker-host.ts', import.meta.url), { workerData: this.config });
    w.on('message', (m: ReplyMessage) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.ok) p.resolve(m.value);
      else p.reject(revive(m.error));
    });
    // A crashed worker fails its calls; the next call starts a fresh one (and re-runs init).
    const fail = (err: Error) => {
      if (this.worker !== w) return;
      this.worker = null;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`storage worker exited (code ${code})`)));
    return w;
  }

  private async call<T>(method: string, ...args: unknown[]): Promise<T> {
    if (!this.worker) {
      if (this.closing) throw new Error('storage is closed');
      this.worker = this.spawn();
      if (this.initialized && method !== 'init') await this.send('init', []);
    }
    return this.send<T>(method, args);
  }

  private fwd<K extends Method>(method: K, args: Parameters<Storage[K]>): ReturnType<Storage[K]> {
    return this.call(method, ...args) as ReturnType<Storage[K]>;
  }

  private send<T>(method: string, args: unknown[]): Promise<T> {
    const w = this.worker!;
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      w.postMessage({ id, method, args } satisfies CallMessage);
    });
  }

  async init(): Promise<void> { await this.call('init'); this.initialized = true; }
  async close(): Promise<void> {
    this.closing = true;
    const w = this.worker;
    if (!w) return;
    try { await this.send('close', []); } finally { this.worker = null; await w.terminate(); }
  }

  /** Insert sealed spool segments, read by the worker from disk (see storage/spool-files.ts). */
  insertSpoolFiles(paths: string[], maxRows: number): Promise<SpoolFilesResult> { return this.call('insertSpoolFiles', paths, maxRows); }

  ping() { return this.fwd('ping', []); }
  insertSpans(...a: Parameters<Storage['insertSpans']>) { return this.fwd('insertSpans', a); }
  getTrace(...a: Parameters<Storage['getTrace']>) { return this.fwd('getTrace', a); }
  listTraces(...a: Parameters<Storage['listTraces']>) { return this.fwd('listTraces', a); }
  countSpans(...a: Parameters<Storage['countSpans']>) { return this.fwd('countSpans', a); }
  createWorkspace(...a: Parameters<Storage['createWorkspace']>) { return this.fwd('createWorkspace', a); }
  getWorkspaceByName(...a: Parameters<Storage['getWorkspaceByName']>) { return this.fwd('getWorkspaceByName', a); }
  getWorkspace(...a: Parameters<Storage['getWorkspace']>) { return this.fwd('getWorkspace', a); }
  putApiKey(...a: Parameters<Storage['putApiKey']>) { return this.fwd('putApiKey', a); }
  getApiKey(...a: Parameters<Storage['getApiKey']>) { return this.fwd('getApiKey', a); }
  listApiKeys(...a: Parameters<Storage['listApiKeys']>) { return this.fwd('listApiKeys', a); }
  revokeApiKey(...a: Parameters<Storage['revokeApiKey']>) { return this.fwd('revokeApiKey', a); }
  getSettings(...a: Parameters<Storage['getSettings']>) { return this.fwd('getSettings', a); }
  putSettings(...a: Parameters<Storage['putSettings']>) { return this.fwd('putSettings', a); }
  insertEnrichment(...a: Parameters<Storage['insertEnrichment']>) { return this.fwd('insertEnrichment', a); }
  listFindings(...a: Parameters<Storage['listFindings']>) { return this.fwd('listFindings', a); }
  getPolicyRecords(...a: Parameters<Storage['getPolicyRecords']>) { return this.fwd('getPolicyRecords', a); }
  listAudit(...a: Parameters<Storage['listAudit']>) { return this.fwd('listAudit', a); }
  auditChain(...a: Parameters<Storage['auditChain']>) { return this.fwd('auditChain', a); }
  listAlerts(...a: Parameters<Storage['listAlerts']>) { return this.fwd('listAlerts', a); }
  getVerification(...a: Parameters<Storage['getVerification']>) { return this.fwd('getVerification', a); }
  verificationChain(...a: Parameters<Storage['verificationChain']>) { return this.fwd('verificationChain', a); }
  verificationWorkspaces() { return this.fwd('verificationWorkspaces', []); }
  usage(...a: Parameters<Storage['usage']>) { return this.fwd('usage', a); }
  findingsDaily(...a: Parameters<Storage['findingsDaily']>) { return this.fwd('findingsDaily', a); }
}

const BUILTIN_ERRORS: Record<string, ErrorConstructor> = { RangeError, TypeError, SyntaxError };

/** The error as the backend threw it, as far as a message can carry it: HTTP errors and built-in classes. */
function revive(e: Extract<ReplyMessage, { ok: false }>['error']): Error {
  if (e.status) return new HttpError(e.status, e.code ?? 'error', e.message, e.details);
  const Ctor = BUILTIN_ERRORS[e.name];
  return Ctor ? new Ctor(e.message) : Object.assign(new Error(e.message), { name: e.name });
}
