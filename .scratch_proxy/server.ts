import { loadConfig } from '../config/index.ts';
import { startServer } from '../collector/server.ts';
const running = await startServer(loadConfig(process.env));
if (process.env.NOINGEST) running.pipeline.ingest = async () => ({ accepted: 1 });
process.on('SIGTERM', () => void running.close().then(() => process.exit(0)));
