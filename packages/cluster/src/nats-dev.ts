/**
 * A local NATS cluster for development and tests: N `nats-server` processes (the machine's
 * binary) on free loopback ports, each with its own config and JetStream directory, routed to
 * each other. Nothing here touches a NATS service already running (on 4222 or elsewhere).
 *
 * Each server can be killed (SIGKILL), paused (SIGSTOP) and resumed, and started again on the
 * same ports and data: what the failover tests and the cluster soak do to it.
 */
import { HerculesError } from '@hercules/core';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

export interface NatsServerProcess {
  readonly name: string;
  /** The client URL, nats://127.0.0.1:port. */
  readonly url: string;
  readonly port: number;
  readonly monitorPort: number;
  /** The process id while it runs, undefined while it is stopped. */
  readonly pid: number | undefined;
  /** Send a signal: 'SIGKILL' to crash it, 'SIGSTOP' / 'SIGCONT' to pause and resume it. */
  signal(sig: NodeJS.Signals): void;
  /** Kill it (SIGKILL) and wait until it has exited. */
  kill(): Promise<void>;
  /** Start it again (after kill) on the same ports, config and data. */
  start(): Promise<void>;
  /** JSON from its monitoring endpoint, e.g. `jsz` or `varz`. */
  monitor(path: string): Promise<any>;
}

export interface NatsCluster {
  readonly servers: readonly NatsServerProcess[];
  /** Every server's client URL, for a client's server list. */
  readonly urls: string[];
  /** The directory holding the configs and data (removed by `close` unless `keep`). */
  readonly dir: string;
  /** Wait until JetStream has a meta leader that every running server knows. */
  ready(timeoutMs?: number): Promise<void>;
  /** Kill every server; remove the directory unless it was given. */
  close(): Promise<void>;
}

export interface NatsClusterOptions {
  nodes?: number;
  /** Where configs and data go (kept on close). Default: a fresh temp directory (removed on close). */
  dir?: string;
  /** The nats-server binary. Default: $NATS_SERVER, then `nats-server` on PATH or in /usr/sbin. */
  binary?: string;
  /** The cluster's name (default `hercules-dev`). */
  name?: string;
  /** Write each server's log to `<dir>/<name>.log` (default true). */
  log?: boolean;
}

/** Find the nats-server binary, or throw saying how to install it. */
export function findNatsServer(binary?: string): string {
  const candidates = [
    binary,
    process.env.NATS_SERVER,
    ...(process.env.PATH ?? '').split(delimiter).map((d) => join(d, 'nats-server')),
    '/usr/sbin/nats-server',
    '/usr/bin/nats-server',
  ];
  for (const c of candidates) if (c && existsSync(c)) return c;
  throw new HerculesError(
    'bad-argument',
    "nats-server is not installed: install it (Debian: 'sudo apt-get install -y nats-server'; or https://github.com/nats-io/nats-server/releases) or set NATS_SERVER to its path",
  );
}

/** The server's version, e.g. "2.9.10". */
export function natsServerVersion(binary = findNatsServer()): string {
  const out = execFileSync(binary, ['--version'], { encoding: 'utf8' });
  return /v?(\d+\.\d+\.\d+)/.exec(out)?.[1] ?? out.trim();
}

/**
 * A free loopback port below the kernel's ephemeral range when there is room there: a port from
 * that range can be taken meanwhile by any outgoing connection's local end, and a server started
 * again (after kill) must find its own port free. `taken` holds ports already handed out.
 */
async function freePort(taken: Set<number>): Promise<number> {
  const [low] = ephemeralRange();
  for (let tries = 0; low > 11_000 && tries < 50; tries++) {
    const port = 10_000 + Math.floor(Math.random() * (low - 10_000));
    if (taken.has(port)) continue;
    if (await canListen(port)) {
      taken.add(port);
      return port;
    }
  }
  for (;;) {
    const s = createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const port = (s.address() as { port: number }).port;
    await new Promise((r) => s.close(r));
    if (!taken.has(port)) {
      taken.add(port);
      return port;
    }
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** Linux's ephemeral port range; elsewhere the IANA default. */
function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (lo > 0 && hi >= lo) return [lo, hi];
  } catch {
    /* not Linux */
  }
  return [49152, 65535];
}

/** A server that exited before it listened: its log's last lines say why (a port in use, most often). */
class NatsServerExitedError extends Error {}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Start an N-node cluster (default 3) and wait until JetStream is ready on it. A server that
 * exits before it listens (another process took a port between the check and its bind) makes
 * the whole cluster start again on fresh ports, up to three times.
 */
export async function startNatsCluster(opts: NatsClusterOptions = {}): Promise<NatsCluster> {
  const n = opts.nodes ?? 3;
  if (!Number.isInteger(n) || n < 1) throw new HerculesError('bad-argument', `nodes must be a positive integer, got ${n}; pass nodes: 1 or more`);
  const binary = findNatsServer(opts.binary);
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts, n, binary);
    } catch (e) {
      if (!(e instanceof NatsServerExitedError) || attempt === 3) throw e;
    }
  }
}

async function startOnce(opts: NatsClusterOptions, n: number, binary: string): Promise<NatsCluster> {
  const owned = opts.dir === undefined;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'hercules-nats-'));
  mkdirSync(dir, { recursive: true });
  const clusterName = opts.name ?? 'hercules-dev';
  const taken = new Set<number>();
  const ports: ServerPorts[] = [];
  for (let i = 0; i < n; i++) ports.push({ client: await freePort(taken), route: await freePort(taken), monitor: await freePort(taken) });
  const routes = ports.map((p) => `nats-route://127.0.0.1:${p.route}`).join(', ');
  const children = new Set<ChildProcess>();
  const servers = ports.map((p, i): NatsServerProcess => {
    const name = `n${i + 1}`;
    const conf = writeServerConfig(dir, name, p, n > 1 ? { name: clusterName, routes } : undefined, opts.log !== false);
    return natsServer({ name, conf, dir, ports: p, binary, children, log: opts.log !== false });
  });
  const killAll = () => {
    for (const c of children) {
      try {
        c.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
  };
  process.once('exit', killAll);
  const cluster: NatsCluster = {
    servers,
    urls: servers.map((s) => s.url),
    dir,
    ready: (timeoutMs = 20_000) => clusterReady(servers, n, timeoutMs),
    async close() {
      process.removeListener('exit', killAll);
      await Promise.all(servers.map((s) => s.kill()));
      if (owned) rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(servers.map((s) => s.start()));
    await cluster.ready();
  } catch (e) {
    await cluster.close();
    throw e;
  }
  return cluster;
}

interface ServerPorts {
  client: number;
  route: number;
  monitor: number;
}

/** Writes `<dir>/<name>.conf` (and makes its JetStream directory); returns the config's path. */
function writeServerConfig(dir: string, name: string, p: ServerPorts, cluster: { name: string; routes: string } | undefined, log: boolean): string {
  const conf = join(dir, `${name}.conf`);
  const data = join(dir, name);
  mkdirSync(data, { recursive: true });
  writeFileSync(
    conf,
    [
      `server_name: ${name}`,
      `listen: 127.0.0.1:${p.client}`,
      `http: 127.0.0.1:${p.monitor}`,
      `jetstream { store_dir: "${data}", max_memory_store: 256MB, max_file_store: 4GB }`,
      cluster ? `cluster { name: ${cluster.name}, listen: 127.0.0.1:${p.route}, routes: [${cluster.routes}] }` : '',
      log ? `log_file: "${join(dir, `${name}.log`)}"` : '',
      '',
    ].join('\n'),
  );
  return conf;
}

interface ServerSpec {
  name: string;
  conf: string;
  dir: string;
  ports: ServerPorts;
  binary: string;
  /** The cluster's running processes: a server adds its process while it runs. */
  children: Set<ChildProcess>;
  /** Whether it logs to `<dir>/<name>.log` (else to stderr). */
  log: boolean;
}

/** One server of the cluster, not started yet. */
function natsServer(spec: ServerSpec): NatsServerProcess {
  const { name, ports: p } = spec;
  let child: ChildProcess | undefined;
  const server: NatsServerProcess = {
    name,
    url: `nats://127.0.0.1:${p.client}`,
    port: p.client,
    monitorPort: p.monitor,
    get pid() {
      return child?.exitCode === null && child.signalCode === null ? child.pid : undefined;
    },
    signal(sig) {
      if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) child.kill(sig);
    },
    async kill() {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGCONT'); // a paused process dies too, but say so
      c.kill('SIGKILL');
      await exited;
    },
    async start() {
      if (server.pid !== undefined) return;
      const spawned = spawnServer(spec);
      child = spawned.proc; // at once: a kill() or close() while it starts reaches it
      await listening(spec, spawned, server);
    },
    async monitor(path) {
      const res = await fetch(`http://127.0.0.1:${p.monitor}/${path}`, { signal: AbortSignal.timeout(2000) });
      if (!res.ok) throw new HerculesError('unreachable', `${name} /${path}: HTTP ${res.status}; check that the server is up (see its log)`);
      return res.json();
    },
  };
  return server;
}

/** A server's process, and the last 2,000 characters of its stderr so far. */
interface Spawned {
  proc: ChildProcess;
  stderrTail(): string;
}

/** Spawns a server's process, keeping the tail of its stderr for the error if it exits before it listens. */
function spawnServer(spec: ServerSpec): Spawned {
  // Its own process group: a signal to the test runner's group (Ctrl-C, `timeout`) does not reach it; close() does.
  const c = spawn(spec.binary, ['-c', spec.conf], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  // What it says before its log file is open (a bad config, a missing binary's wrapper):
  // the last of it, for the error if it exits before it listens. Read always, so a server
  // that logs to stderr (log: false) never blocks on a full pipe.
  let stderrTail = '';
  c.stderr?.setEncoding('utf8').on('data', (d: string) => {
    stderrTail = (stderrTail + d).slice(-2000);
  });
  spec.children.add(c);
  c.once('exit', () => spec.children.delete(c));
  return { proc: c, stderrTail: () => stderrTail };
}

/** Whether the client port answers with a NATS INFO line naming `name` (another process on the port does not). */
function clientInfoNames(port: number, name: string): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = netConnect({ host: '127.0.0.1', port });
    let got = '';
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(2000, () => done(false));
    sock.on('error', () => done(false));
    sock.setEncoding('utf8').on('data', (d: string) => {
      got += d;
      const nl = got.indexOf('\n');
      if (nl < 0) return;
      const m = /^INFO\s+(\{.*\})\s*$/.exec(got.slice(0, nl));
      try {
        done(m !== null && JSON.parse(m[1]).server_name === name);
      } catch {
        done(false);
      }
    });
    sock.on('close', () => done(false));
  });
}

/** Resolves once `c` listens (its monitor port answers with its own name and port); throws NatsServerExitedError if it exits first. */
async function listening(spec: ServerSpec, { proc: c, stderrTail }: Spawned, server: NatsServerProcess): Promise<void> {
  const { name, conf, dir, ports: p } = spec;
  await waitFor(
    () => {
      if (c.exitCode !== null || c.signalCode !== null) {
        // (Its stderr may still be draining: the error waits for the pipe to close, a second at most.)
        const drained = c.stderr && !c.stderr.closed ? Promise.race([new Promise((r) => c.stderr!.once('close', r)), sleep(1000)]) : Promise.resolve();
        return drained.then(() => {
          const log = (spec.log ? tail(join(dir, `${name}.log`), 3) : '') || stderrTail().trim().split('\n').slice(-3).join(' | ');
          throw new NatsServerExitedError(`${name} (nats-server -c ${conf}) exited (${c.exitCode ?? c.signalCode}) before it listened${log ? `: ${log}` : ''}`);
        });
      }
      // Its own id: a monitor port answered by another process would not pass. Then its client
      // port's INFO: the server answers its monitor port before it binds the client port, so
      // with that port taken (the port-race test, at a load average of 30) the monitor alone said
      // "listening" in the moment before the server exited.
      return server.monitor('varz').then(
        (v) => v?.server_name === name && v?.port === p.client && clientInfoNames(p.client, name),
        () => false,
      );
    },
    10_000,
    `${name} to listen`,
  );
}

/** Waits until every running server names the same JetStream meta leader (a single server: until JetStream answers). */
async function clusterReady(servers: readonly NatsServerProcess[], n: number, timeoutMs: number): Promise<void> {
  await waitFor(
    async () => {
      const running = servers.filter((s) => s.pid !== undefined);
      if (running.length === 0) return false;
      const leaders = await Promise.all(
        running.map((s) =>
          s.monitor('jsz').then(
            (j) => (n > 1 ? j?.meta_cluster?.leader : 'standalone'),
            () => undefined,
          ),
        ),
      );
      return leaders.every((l) => typeof l === 'string' && l.length > 0 && l === leaders[0]);
    },
    timeoutMs,
    'the NATS cluster to elect a JetStream meta leader',
  );
}

/** The last `lines` lines of a file, joined by ' | ' ('' if it cannot be read). */
function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join(' | ');
  } catch {
    return '';
  }
}

async function waitFor(fn: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > end) throw new HerculesError('timeout', `timed out after ${ms} ms waiting for ${what}; the machine may be loaded, try again`);
    await sleep(50);
  }
}
