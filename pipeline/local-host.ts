// The processors and the spool on the calling thread (pipeline/processor-host.ts without a worker): what tests use to run a
// Pipeline in one thread, with the same batching as the processor thread (requests of one turn share a write).
import type { IngestContext, Processor } from '../core/ports/ingest.ts';
import type { IngestHost } from './ingest-host.ts';
import type { SpanRecord } from '../core/record.ts';
import { Spool, type Segment, type SpoolLogger, type SpoolState } from '../spool/spool.ts';
import { SpoolWriteError } from '../core/errors.ts';
import { ProcessorHost, type HostItem } from './processor-host.ts';

type Waiting = { item: HostItem; resolve: (r: { accepted: number; rows: number }) => void; reject: (e: Error) => void };

export class LocalHost implements IngestHost {
  readonly host: ProcessorHost;
  private waiting: Waiting[] = [];

  constructor(opts: { dir: string; fsync: boolean; logger?: SpoolLogger; processors?: Processor[] }) {
    this.host = new ProcessorHost({
      spool: new Spool({ dir: opts.dir, fsync: opts.fsync, logger: opts.logger }),
      processors: opts.processors ?? [],
    });
  }

  get state(): SpoolState {
    return this.host.state();
  }
  async open(): Promise<Segment[]> {
    return this.host.open();
  }

  process(spans: SpanRecord[], ctx: IngestContext | null): Promise<{ accepted: number; rows: number }> {
    return new Promise((resolve, reject) => {
      if (this.waiting.push({ item: { spans, ctx }, resolve, reject }) === 1)
        setImmediate(() => void this.processWaiting());
    });
  }

  async append(frame: Buffer, rows: number): Promise<void> {
    const out = await (await this.host.process([], [{ frame, rows }])).answer;
    if (out.frames[0]) throw new SpoolWriteError(out.frames[0]);
  }

  async seal(): Promise<Segment[]> {
    return this.host.seal();
  }
  async close(): Promise<void> {
    await this.host.close();
  }

  private async processWaiting(): Promise<void> {
    const batch = this.waiting;
    this.waiting = [];
    try {
      const out = await (await this.host.process(batch.map((w) => w.item))).answer;
      batch.forEach((w, i) => {
        const a = out.items[i]!;
        if ('accepted' in a) w.resolve(a);
        else w.reject(a.spool ? new SpoolWriteError(a.error) : new Error(a.error));
      });
    } catch (err) {
      for (const w of batch) w.reject(err as Error);
    }
  }
}
