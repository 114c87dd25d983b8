// Storage on a worker thread: the same interface, each call a message to storage/worker-host.ts.
// The server uses it so that inserts and queries run beside request handling, not inside it;
// the writer hands over spool segment paths, so records are never copied between threads.
import type { Config } from '../config/index.ts';
import { WorkerRpc } from '../platform/worker-rpc.ts';
import { markStorageOutage } from '../core/errors.ts';
import type { Storage } from '../core/ports/storage.ts';
import type { CallMessage } from './worker-host.ts';
import type { SpoolFilesResult } from './spool-files.ts';

type Method = Exclude<keyof Storage, 'kind' | 'init' | 'close'>;

export class WorkerStorage implements Storage {
  readonly kind: Storage['kind'];
  private readonly rpc: WorkerRpc;
  private initialized = false;
  private closing = false;

  constructor(config: Config) {
    this.kind = config.CLICKHOUSE_URL ? 'clickhouse' : 'duckdb';
    this.rpc = new WorkerRpc(
      new URL('./worker-host.ts', import.meta.url),
      config,
      'storage',
      config.WORKER_YOUNG_GEN_MB,
    );
  }

  /**
   * Errors keep their class and message; those that mean storage cannot be reached (refused, reset, timed out, the
   * worker gone, closed) are marked (core/errors.ts isStorageOutage), so callers answer them 503, not 500.
   */
  private async call<T>(method: string, ...args: unknown[]): Promise<T> {
    try {
      if (!this.rpc.running) {
        if (this.closing) throw new Error('storage is closed');
        // A replacement for a worker that died must open the backend again first.
        if (this.initialized && method !== 'init')
          await this.rpc.call({ method: 'init', args: [] } satisfies Omit<CallMessage, 'id'>);
      }
      return await this.rpc.call<T>({ method, args } satisfies Omit<CallMessage, 'id'>);
    } catch (err) {
      throw markStorageOutage(err);
    }
  }

  private fwd<K extends Method>(method: K, args: Parameters<Storage[K]>): ReturnType<Storage[K]> {
    return this.call(method, ...args) as ReturnType<Storage[K]>;
  }

  async init(): Promise<void> {
    await this.call('init');
    this.initialized = true;
  }
  async close(): Promise<void> {
    this.closing = true;
    if (!this.rpc.running) return;
    try {
      await this.call('close');
    } finally {
      await this.rpc.close();
    }
  }

  /** Insert sealed spool segments, read by the worker from disk (see storage/spool-files.ts). */
  insertSpoolFiles(paths: string[], maxRows: number, isolate = false): Promise<SpoolFilesResult> {
    return this.call('insertSpoolFiles', paths, maxRows, isolate);
  }

  ping() {
    return this.fwd('ping', []);
  }
  insertSpans(...a: Parameters<Storage['insertSpans']>) {
    return this.fwd('insertSpans', a);
  }
  getTrace(...a: Parameters<Storage['getTrace']>) {
    return this.fwd('getTrace', a);
  }
  getTracePart(...a: Parameters<Storage['getTracePart']>) {
    return this.fwd('getTracePart', a);
  }
  getTraces(...a: Parameters<Storage['getTraces']>) {
    return this.fwd('getTraces', a);
  }
  getSpans(...a: Parameters<Storage['getSpans']>) {
    return this.fwd('getSpans', a);
  }
  spanVersions(...a: Parameters<Storage['spanVersions']>) {
    return this.fwd('spanVersions', a);
  }
  listTraces(...a: Parameters<Storage['listTraces']>) {
    return this.fwd('listTraces', a);
  }
  countSpans(...a: Parameters<Storage['countSpans']>) {
    return this.fwd('countSpans', a);
  }
  hasProxyResponse(...a: Parameters<Storage['hasProxyResponse']>) {
    return this.fwd('hasProxyResponse', a);
  }
  createWorkspace(...a: Parameters<Storage['createWorkspace']>) {
    return this.fwd('createWorkspace', a);
  }
  getWorkspaceByName(...a: Parameters<Storage['getWorkspaceByName']>) {
    return this.fwd('getWorkspaceByName', a);
  }
  getWorkspace(...a: Parameters<Storage['getWorkspace']>) {
    return this.fwd('getWorkspace', a);
  }
  putApiKey(...a: Parameters<Storage['putApiKey']>) {
    return this.fwd('putApiKey', a);
  }
  getApiKey(...a: Parameters<Storage['getApiKey']>) {
    return this.fwd('getApiKey', a);
  }
  listApiKeys(...a: Parameters<Storage['listApiKeys']>) {
    return this.fwd('listApiKeys', a);
  }
  revokeApiKey(...a: Parameters<Storage['revokeApiKey']>) {
    return this.fwd('revokeApiKey', a);
  }
  getSettings(...a: Parameters<Storage['getSettings']>) {
    return this.fwd('getSettings', a);
  }
  putSettings(...a: Parameters<Storage['putSettings']>) {
    return this.fwd('putSettings', a);
  }
  publishKeys(...a: Parameters<Storage['publishKeys']>) {
    return this.fwd('publishKeys', a);
  }
  publishedKeys(...a: Parameters<Storage['publishedKeys']>) {
    return this.fwd('publishedKeys', a);
  }
  insertEnrichment(...a: Parameters<Storage['insertEnrichment']>) {
    return this.fwd('insertEnrichment', a);
  }
  listFindings(...a: Parameters<Storage['listFindings']>) {
    return this.fwd('listFindings', a);
  }
  getPolicyRecords(...a: Parameters<Storage['getPolicyRecords']>) {
    return this.fwd('getPolicyRecords', a);
  }
  listAudit(...a: Parameters<Storage['listAudit']>) {
    return this.fwd('listAudit', a);
  }
  auditPage(...a: Parameters<Storage['auditPage']>) {
    return this.fwd('auditPage', a);
  }
  hasAuditHash(...a: Parameters<Storage['hasAuditHash']>) {
    return this.fwd('hasAuditHash', a);
  }
  listAlerts(...a: Parameters<Storage['listAlerts']>) {
    return this.fwd('listAlerts', a);
  }
  getVerification(...a: Parameters<Storage['getVerification']>) {
    return this.fwd('getVerification', a);
  }
  verificationOfTraces(...a: Parameters<Storage['verificationOfTraces']>) {
    return this.fwd('verificationOfTraces', a);
  }
  verificationPage(...a: Parameters<Storage['verificationPage']>) {
    return this.fwd('verificationPage', a);
  }
  checkpointPage(...a: Parameters<Storage['checkpointPage']>) {
    return this.fwd('checkpointPage', a);
  }
  unverifiedTraces(...a: Parameters<Storage['unverifiedTraces']>) {
    return this.fwd('unverifiedTraces', a);
  }
  traceSizes(...a: Parameters<Storage['traceSizes']>) {
    return this.fwd('traceSizes', a);
  }
  spanSizes(...a: Parameters<Storage['spanSizes']>) {
    return this.fwd('spanSizes', a);
  }
  verificationRange(...a: Parameters<Storage['verificationRange']>) {
    return this.fwd('verificationRange', a);
  }
  chainState(...a: Parameters<Storage['chainState']>) {
    return this.fwd('chainState', a);
  }
  hasVerificationHash(...a: Parameters<Storage['hasVerificationHash']>) {
    return this.fwd('hasVerificationHash', a);
  }
  verificationWorkspaces() {
    return this.fwd('verificationWorkspaces', []);
  }
  usage(...a: Parameters<Storage['usage']>) {
    return this.fwd('usage', a);
  }
  findingsDaily(...a: Parameters<Storage['findingsDaily']>) {
    return this.fwd('findingsDaily', a);
  }
}
