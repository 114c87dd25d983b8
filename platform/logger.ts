import { pino, type Logger } from 'pino';

// Never log keys or prompt text at info level: redact the usual carriers too.
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'tracegate' },
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'key', 'apiKey'],
      censor: '[redacted]',
    },
  });
}
export type { Logger };
