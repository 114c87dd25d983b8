declare module 'inflation' {
  import type { IncomingMessage } from 'node:http';
  import type { Readable } from 'node:stream';
  export default function inflate(stream: IncomingMessage | Readable, options?: { encoding?: string }): Readable;
}
