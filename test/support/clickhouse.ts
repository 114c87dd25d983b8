// A throwaway ClickHouse server for tests: loopback only, free ports, everything in a temp dir.
// Set TRACEGATE_TEST_CLICKHOUSE_URL to use an existing server instead (nothing is started or stopped).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, closeSync } from 'node:fs';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { get as httpGet } from 'node:http';
import { delimiter, join } from 'node:path';
import { freePort, killNow, terminate, waitReady } from './process.ts';

export interface TestClickHouse {
  url: string;
  /** True when TRACEGATE_TEST_CLICKHOUSE_URL points at a server this helper does not control. */
  external: boolean;
  /** Graceful SIGTERM; the data dir is kept so restart() finds the same data. */
  stop(): Promise<void>;
  /** SIGKILL, as in a crash. */
  kill(): Promise<void>;
  /** Start again on the same ports and data dir (stops first if still running). */
  restart(): Promise<void>;
  /** SIGSTOP / SIGCONT: a server that accepts connections and answers nothing (hung), then carries on. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Kill and delete the temp dir. */
  dispose(): Promise<void>;
}

/** The server command: the split `clickhouse-server` binary (18.x Debian) or the `clickhouse` multi-binary. */
function serverCommand(): [string, string[]] {
  const override = process.env.TRACEGATE_TEST_CLICKHOUSE_BIN;
  if (override) return [override, override.endsWith('clickhouse') ? ['server'] : []];
  for (const p of ['/usr/sbin/clickhouse-server', '/usr/bin/clickhouse-server']) if (existsSync(p)) return [p, []];
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (existsSync(join(dir, 'clickhouse-server'))) return [join(dir, 'clickhouse-server'), []];
    if (existsSync(join(dir, 'clickhouse'))) return [join(dir, 'clickhouse'), ['server']];
  }
  throw new Error('clickhouse-server not found; install it or set TRACEGATE_TEST_CLICKHOUSE_URL');
}

function configXml(dir: string, httpPort: number, tcpPort: number, extra: string): string {
  // Only what a test server needs. No interserver port: nothing replicates.
  return `<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>${dir}/server.log</log>
    <errorlog>${dir}/error.log</errorlog>
    <console>0</console>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <path>${dir}/data/</path>
  <tmp_path>${dir}/tmp/</tmp_path>
  <user_files_path>${dir}/user_files/</user_files_path>
  <format_schema_path>${dir}/format_schemas/</format_schema_path>
  <users_config>${dir}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>67108864</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
  <!-- A graceful stop waits for open connections, idle keep-alive ones included: keep both short.
       3 s stays above the Node client's 2.5 s idle-socket TTL, so it never reuses a closed socket. -->
  <shutdown_wait_unfinished>1</shutdown_wait_unfinished>
  <keep_alive_timeout>3</keep_alive_timeout>
${extra}
</yandex>
`;
}

const USERS_XML = `<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>::1</ip><ip>127.0.0.1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default></default></quotas>
</yandex>
`;

/** GET /ping on a fresh connection: a pooled keep-alive socket would hold up a graceful shutdown. */
function pingOk(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = httpGet(`${url}/ping`, { agent: false, timeout: 1000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve(res.statusCode === 200 && body.trim() === 'Ok.'));
      res.on('error', () => resolve(false));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

export interface StartOptions {
  /** Fixed ports (a cluster's configs name each other's): one attempt, no retry on other ports. */
  ports?: { http: number; tcp: number };
  /** More server configuration (remote_servers). */
  extraConfig?: string;
}

export async function startClickHouse(opts: StartOptions = {}): Promise<TestClickHouse> {
  const externalUrl = process.env.TRACEGATE_TEST_CLICKHOUSE_URL;
  if (externalUrl && !opts.ports) {
    const unsupported = async () => {
      throw new Error('not supported with TRACEGATE_TEST_CLICKHOUSE_URL');
    };
    return {
      url: externalUrl.replace(/\/+$/, ''),
      external: true,
      stop: async () => {},
      dispose: async () => {},
      kill: unsupported,
      restart: unsupported,
      pause: unsupported,
      resume: unsupported,
    };
  }

  const [cmd, args] = serverCommand();
  const dir = await mkdtemp(join(tmpdir(), 'tracegate-ch-'));
  let httpPort = 0;
  let child: ChildProcess | null = null;

  const launch = async (): Promise<void> => {
    const out = openSync(join(dir, 'stdout.log'), 'a');
    try {
      child = spawn(cmd, [...args, `--config-file=${dir}/config.xml`], { cwd: dir, stdio: ['ignore', out, out] });
    } finally {
      closeSync(out); // the child has its own copy
    }
    const url = `http://127.0.0.1:${httpPort}`;
    await waitReady(child, () => pingOk(url), 'clickhouse-server', join(dir, 'error.log'));
  };

  await mkdir(join(dir, 'data'), { recursive: true });
  await writeFile(join(dir, 'users.xml'), USERS_XML);
  // Ports are picked free then released, so another process may grab one first: retry with new ones.
  for (let attempt = 1; ; attempt++) {
    httpPort = opts.ports?.http ?? (await freePort());
    const tcpPort = opts.ports?.tcp ?? (await freePort());
    await writeFile(join(dir, 'config.xml'), configXml(dir, httpPort, tcpPort, opts.extraConfig ?? ''));
    try {
      await launch();
      break;
    } catch (err) {
      if (child) await killNow(child);
      if (attempt >= 3 || opts.ports) {
        await rm(dir, { recursive: true, force: true });
        throw err;
      }
    }
  }

  const stop = async () => {
    if (child) await terminate(child);
  };
  return {
    url: `http://127.0.0.1:${httpPort}`,
    external: false,
    stop,
    kill: async () => {
      if (child) await killNow(child);
    },
    restart: async () => {
      await stop();
      await launch();
    },
    pause: async () => {
      (child as ChildProcess | null)?.kill('SIGSTOP');
    },
    resume: async () => {
      (child as ChildProcess | null)?.kill('SIGCONT');
    },
    // The data is deleted anyway, so no need to wait for a graceful shutdown.
    dispose: async () => {
      if (child) await killNow(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface TestClickHouseCluster {
  /** The cluster's name in every node's remote_servers. */
  name: string;
  /** One node per shard, each on its own ports and data dir. */
  nodes: TestClickHouse[];
  dispose(): Promise<void>;
}

/** `shards` throwaway servers that know each other as cluster `tracegate_test` (one node per shard, no ZooKeeper) and as
 * `tracegate_test_replicated` (one shard, each node a replica). */
export async function startClickHouseCluster(shards = 2): Promise<TestClickHouseCluster> {
  const name = 'tracegate_test';
  for (let attempt = 1; ; attempt++) {
    const used = new Set<number>();
    const port = async () => {
      for (;;) {
        const p = await freePort();
        if (!used.has(p)) {
          used.add(p);
          return p;
        }
      }
    };
    const ports: Array<{ http: number; tcp: number }> = [];
    for (let i = 0; i < shards; i++) ports.push({ http: await port(), tcp: await port() });
    const replica = (p: { tcp: number }) => `<replica><host>127.0.0.1</host><port>${p.tcp}</port></replica>`;
    const shardsXml = ports.map((p) => `<shard>${replica(p)}</shard>`).join('');
    // Also the same nodes as one shard's replicas, which tracegate must refuse (its tables are not Replicated).
    const extraConfig = `<remote_servers><${name}>${shardsXml}</${name}><${name}_replicated><shard>${ports.map(replica).join('')}</shard></${name}_replicated></remote_servers>`;
    const started = await Promise.allSettled(ports.map((p) => startClickHouse({ ports: p, extraConfig })));
    const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    if (nodes.length === ports.length)
      return {
        name,
        nodes,
        dispose: async () => {
          await Promise.all(nodes.map((n) => n.dispose()));
        },
      };
    await Promise.all(nodes.map((n) => n.dispose()));
    if (attempt >= 3) throw (started.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason;
  }
}
