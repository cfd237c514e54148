/**
 * hercules serve — run a Hercules server (embedded SQLite, or a cluster node with --nats).
 * hercules nats-dev — run a local NATS cluster for trying cluster mode.
 * hercules audit — check a room's history in a cluster's NATS streams.
 *
 *   hercules serve --machines ./machines.ts [--port 8787] [--host 127.0.0.1] [--data-dir ./data | --memory]
 *                  [--ack-timeout 2000] [--simulate-rtt 0] [--checkpoint-every 1000] [--commit-window 0]
 *                  [--log-level info] [--nats nats://a,nats://b,nats://c --node-id ID]
 */
import { parseArgs } from 'node:util';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Machine } from '@hercules/core';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Limits } from './server.ts';
import { MemoryStore } from './store/memory.ts';
import type { JwtOptions } from './auth.ts';

const HELP = `Usage: hercules serve --machines <module> [options]
       hercules nats-dev [--nodes 3] [--dir <dir>]
       hercules audit --nats <urls> --room <name> [--shards 64] [--nats-prefix hc]
       hercules --version

Runs a Hercules sync server: WebSocket on /?room=NAME, /healthz, /metrics.

Options:
  --machines <module>      module exporting the state machines (defineMachine); required.
                           JavaScript (.js, .mjs, .cjs) or TypeScript (.ts, .mts, .cts, run through tsx)
  --port <n>               TCP port (default 8787; 0 picks a free one)
  --host <addr>            interface to listen on (default 127.0.0.1)
  --data-dir <dir>         where the SQLite file lives (default ./data)
  --memory                 keep the rooms in memory, not on disk: nothing is written, and every room
                           is gone when the server stops (for trying things out and tests)
  --ack-timeout <ms>       drop a member from the visibility set after this long without an ack (default 2000)
  --heartbeat <ms>         ping interval; silent connections are dropped after two (default 5000)
  --simulate-rtt <ms>      delay every frame by half this each way, to see the views differ locally (default 0)
  --checkpoint-every <n>   write a room's checkpoint state at most every n ops (default 1000)
  --commit-window <ms>     group-commit batching: gather writes this long into one transaction
                           (default 0: one commit per event-loop turn)
  --log-level <level>      trace|debug|info|warn|error|silent (default info)

Cluster mode (needs @hercules/cluster installed; see docs/deployment.md):
  --nats <urls>            comma-separated NATS server URLs: run as a node of a cluster, rooms in
                           JetStream instead of SQLite (--data-dir is then unused)
  --node-id <id>           this node's id in the cluster (default host:port)
  --shards <n>             shards rooms hash to; every node and every restart must agree (default 64)
  --lease-ms <ms>          how long a dead node's rooms wait before another takes them (default 2000)
  --nats-replicas <n>      replicas of each stream (default 3; 1 for a single NATS server)
  --nats-prefix <name>     subject and stream prefix, for several clusters on one NATS (default hc)

hercules audit reads a room's claims, checkpoints and log records from the cluster's streams
(read-only), applies the replay rule and walks the chain; prints a JSON report and exits 1 if it
finds a problem (a log without a checkpoint, a broken chain, an op in the room twice).

hercules nats-dev starts <nodes> nats-server processes (the machine's binary) on free ports with
their data in <dir> (default: a temp directory) and prints the --nats value; Ctrl-C stops them.

Authentication (JWT; the user is the token's sub; one key source; see docs/security.md):
  --jwt-secret-file <path> HMAC secret (at least 32 bytes) read from a file, never from argv
  --jwt-public-key <path>  PEM public key file (RS*, PS*, ES*, EdDSA)
  --jwks-file <path>       JWKS file ({ "keys": [...] }), keys picked by kid
  --jwt-issuer <iss>       required issuer
  --jwt-audience <aud>     required audience

Limits (defaults in docs/security.md):
  --max-frame-bytes <n>    largest frame accepted (default 1048576)
  --ops-per-second <n>     sustained ops per second per connection (default 1000)
  --user-ops-per-second <n> sustained ops per second per authenticated user, all connections (default 2000)
  --bytes-per-second <n>   sustained bytes per second per connection (default 1048576)
  --max-connections <n>    connections per server (default 10000)
  --max-clients-per-room <n>  connections per room (default 256)
  --hello-timeout <ms>     close a connection that has not said hello within this (default 10000)
  --upgrade-timeout <ms>   close a connection whose upgrade request is not in within this of connecting (default 10000)
  --max-pending-connections <n>  connections without a complete request at once; past it the oldest is closed (default 1000)
  -v, --version            the version
  -h, --help               this text
`;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** A usage error (bad option or value): one line, exit 2. */
function fail(msg: string): never {
  console.error(`hercules: ${msg} (hercules --help lists every option)`);
  process.exit(2);
}

/** The arguments were fine but the server could not start (data directory, port): no usage. */
function cannotStart(msg: string): never {
  console.error(`hercules: ${msg}`);
  process.exit(1);
}

function version(): string {
  // package.json is one level above both src/cli.ts and dist/cli.js.
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/** Is this file an ES module as Node sees it: .mts/.mjs, or .ts/.js under "type": "module"? */
function isEsm(file: string): boolean {
  if (/\.m[jt]s$/.test(file)) return true;
  if (/\.c[jt]s$/.test(file)) return false;
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        return (JSON.parse(readFileSync(pkg, 'utf8')) as { type?: string }).type === 'module';
      } catch {
        return false;
      }
    }
    if (dirname(dir) === dir) return false;
  }
}

/**
 * Imports the user's machines module. JavaScript is imported as it is. TypeScript goes through
 * tsx, loaded only then, with its loader scoped to this module and its imports (nothing else in
 * the process changes): tsImport for an ES module; tsx's require for a CommonJS one (a .ts file
 * in a default `npm init` project), which keeps the module's own errors and their locations
 * readable. (In the CommonJS case tsx gives that module a CommonJS copy of @hercules/core; a
 * machine is plain data and functions, so the server's copy runs it the same.)
 */
async function loadModule(file: string): Promise<Record<string, unknown>> {
  if (!/\.[cm]?tsx?$/.test(file)) return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  process.setSourceMapsEnabled(true); // stack traces point into the .ts source
  if (isEsm(file)) {
    const { tsImport } = await import('tsx/esm/api');
    return (await tsImport(pathToFileURL(file).href, import.meta.url)) as Record<string, unknown>;
  }
  const tsx = await import('tsx/cjs/api');
  return tsx.require(file, import.meta.url) as Record<string, unknown>;
}

/** A load error as the module's author should see it. */
function loadError(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  // A TypeScript syntax error: esbuild's message names the file, line and column; its stack is
  // esbuild's own internals.
  if (e.name === 'TransformError' || /^Transform failed with/.test(e.message)) return e.message;
  return e.stack ?? e.message;
}

function num(name: string, v: string | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) fail(`--${name} must be a non-negative number, got ${JSON.stringify(v)}`);
  return n;
}

export async function main(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        machines: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        'data-dir': { type: 'string' },
        memory: { type: 'boolean' },
        'ack-timeout': { type: 'string' },
        heartbeat: { type: 'string' },
        'simulate-rtt': { type: 'string' },
        'checkpoint-every': { type: 'string' },
        'commit-window': { type: 'string' },
        'log-level': { type: 'string' },
        'jwt-secret-file': { type: 'string' },
        'jwt-public-key': { type: 'string' },
        'jwks-file': { type: 'string' },
        'jwt-issuer': { type: 'string' },
        'jwt-audience': { type: 'string' },
        'max-frame-bytes': { type: 'string' },
        'ops-per-second': { type: 'string' },
        'user-ops-per-second': { type: 'string' },
        'bytes-per-second': { type: 'string' },
        'max-connections': { type: 'string' },
        'max-clients-per-room': { type: 'string' },
        'hello-timeout': { type: 'string' },
        'upgrade-timeout': { type: 'string' },
        'max-pending-connections': { type: 'string' },
        nats: { type: 'string' },
        'node-id': { type: 'string' },
        shards: { type: 'string' },
        'lease-ms': { type: 'string' },
        'nats-replicas': { type: 'string' },
        'nats-prefix': { type: 'string' },
        nodes: { type: 'string' },
        dir: { type: 'string' },
        room: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
  } catch (e) {
    const unknown = /^Unknown option '([^']+)'/.exec((e as Error).message);
    fail(unknown ? `unknown option ${unknown[1]}` : (e as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.version) {
    console.log(version());
    return;
  }
  if (values.help || positionals[0] === 'help') {
    console.log(HELP);
    return;
  }
  if (positionals.length === 0) {
    console.error(HELP);
    process.exit(2);
  }
  if (positionals[0] === 'nats-dev') return natsDev(values.nodes, values.dir);
  if (positionals[0] === 'audit') return audit(values.nats, values.room, values.shards, values['nats-prefix']);
  if (positionals[0] !== 'serve') fail(`unknown command ${JSON.stringify(positionals[0])}`);
  if (positionals.length > 1) fail(`unexpected argument ${JSON.stringify(positionals[1])}`);
  if (!values.machines) fail('--machines is required');
  if (values['log-level'] !== undefined && !LOG_LEVELS.includes(values['log-level']))
    fail(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(values['log-level'])}`);
  const port = num('port', values.port, 8787);
  if (!Number.isInteger(port) || port > 65535) fail(`--port must be an integer from 0 to 65535, got ${JSON.stringify(values.port)}`);
  const machinesFile = resolve(values.machines);
  if (!existsSync(machinesFile)) fail(`--machines ${values.machines}: no such file`);
  let mod: Record<string, unknown>;
  try {
    mod = await loadModule(machinesFile);
  } catch (e) {
    // The module's own error (syntax error, a throw at import, a missing import), as Node or
    // tsx reports it: the stack says where.
    console.error(`hercules: cannot load --machines ${values.machines}:\n${loadError(e)}`);
    process.exit(1);
  }
  const machines = Object.values(mod).filter((m): m is Machine<any, any> => !!m && typeof m === 'object' && (m as Machine).opNames instanceof Set);
  if (machines.length === 0) cannotStart(`--machines ${values.machines} exports no machines (made with defineMachine)`);
  const read = (flag: string, path: string) => {
    try {
      return readFileSync(path, 'utf8');
    } catch (e) {
      return fail(`--${flag} ${path}: ${(e as Error).message}`);
    }
  };
  const keySources = ['jwt-secret-file', 'jwt-public-key', 'jwks-file'].filter((k) => values[k as 'jwks-file'] !== undefined);
  if (keySources.length > 1) fail(`give one of --jwt-secret-file, --jwt-public-key, --jwks-file (got ${keySources.join(', ')})`);
  if (keySources.length === 0 && (values['jwt-issuer'] || values['jwt-audience']))
    fail('--jwt-issuer and --jwt-audience need a key: --jwt-secret-file, --jwt-public-key or --jwks-file');
  const jwt: JwtOptions | undefined =
    keySources.length === 0
      ? undefined
      : {
          ...(values['jwt-secret-file'] ? { secret: read('jwt-secret-file', values['jwt-secret-file']).trim() } : {}),
          ...(values['jwt-public-key'] ? { publicKey: read('jwt-public-key', values['jwt-public-key']) } : {}),
          ...(values['jwks-file'] ? { jwksFile: resolve(values['jwks-file']) } : {}),
          ...(values['jwt-issuer'] ? { issuer: values['jwt-issuer'] } : {}),
          ...(values['jwt-audience'] ? { audience: values['jwt-audience'] } : {}),
        };
  const limits: Partial<Limits> = {};
  if (values['max-frame-bytes'] !== undefined)
    limits.maxFrameBytes = num('max-frame-bytes', values['max-frame-bytes'], 0) || fail('--max-frame-bytes must be positive');
  if (values['ops-per-second'] !== undefined)
    limits.opsPerSecond = num('ops-per-second', values['ops-per-second'], 0) || fail('--ops-per-second must be positive');
  if (values['user-ops-per-second'] !== undefined)
    limits.userOpsPerSecond = num('user-ops-per-second', values['user-ops-per-second'], 0) || fail('--user-ops-per-second must be positive');
  if (values['bytes-per-second'] !== undefined)
    limits.bytesPerSecond = num('bytes-per-second', values['bytes-per-second'], 0) || fail('--bytes-per-second must be positive');
  if (values['max-connections'] !== undefined)
    limits.maxConnections = num('max-connections', values['max-connections'], 0) || fail('--max-connections must be positive');
  if (values['max-clients-per-room'] !== undefined)
    limits.maxClientsPerRoom = num('max-clients-per-room', values['max-clients-per-room'], 0) || fail('--max-clients-per-room must be positive');
  if (values['hello-timeout'] !== undefined)
    limits.helloTimeoutMs = num('hello-timeout', values['hello-timeout'], 0) || fail('--hello-timeout must be positive');
  if (values['upgrade-timeout'] !== undefined)
    limits.upgradeTimeoutMs = num('upgrade-timeout', values['upgrade-timeout'], 0) || fail('--upgrade-timeout must be positive');
  if (values['max-pending-connections'] !== undefined)
    limits.maxPendingConnections = num('max-pending-connections', values['max-pending-connections'], 0) || fail('--max-pending-connections must be positive');
  const common = {
    ...(jwt ? { jwt } : {}),
    limits,
    machines,
    port,
    host: values.host ?? '127.0.0.1',
    ackTimeoutMs: num('ack-timeout', values['ack-timeout'], 2000) || 2000,
    heartbeatMs: num('heartbeat', values.heartbeat, 5000) || 5000,
    simulateRttMs: num('simulate-rtt', values['simulate-rtt'], 0),
    checkpointEvery: num('checkpoint-every', values['checkpoint-every'], 1000) || 1000,
    commitWindowMs: num('commit-window', values['commit-window'], 0),
    log: values['log-level'] ?? 'info',
  };
  const clusterFlags = ['node-id', 'shards', 'lease-ms', 'nats-replicas', 'nats-prefix'].filter((f) => values[f as 'shards'] !== undefined);
  if (!values.nats && clusterFlags.length) fail(`--${clusterFlags[0]} needs --nats (cluster mode)`);
  if (values.memory && values.nats) fail('--memory and --nats each say where the rooms live; give one');
  if (values.memory && values['data-dir'] !== undefined) fail('--memory writes nothing, so --data-dir has no use with it; give one');
  let server: { close(): Promise<void>; log: { info(o: object, m: string): void; error(o: object, m: string): void } };
  try {
    if (values.nats) {
      const nats = values.nats
        .split(',')
        .map((u) => u.trim())
        .filter(Boolean);
      if (nats.length === 0) fail('--nats must list at least one NATS URL');
      const int = (flag: string, v: string | undefined, d: number) => {
        const n = num(flag, v, d);
        if (!Number.isInteger(n) || n < 1) fail(`--${flag} must be a positive integer, got ${JSON.stringify(v)}`);
        return n;
      };
      const cluster = await loadCluster();
      const node = await cluster.createClusterNode({
        ...common,
        nats,
        ...(values['node-id'] ? { nodeId: values['node-id'] } : {}),
        shards: int('shards', values.shards, 64),
        leaseMs: int('lease-ms', values['lease-ms'], 2000),
        replicas: int('nats-replicas', values['nats-replicas'], 3),
        ...(values['nats-prefix'] ? { prefix: values['nats-prefix'] } : {}),
      });
      server = { close: () => node.close(), log: node.service.log };
    } else {
      server = await createServer(values.memory ? { ...common, store: new MemoryStore() } : { ...common, dataDir: resolve(values['data-dir'] ?? 'data') });
      if (values.memory) server.log.info({}, 'rooms are kept in memory only (--memory): they are gone when this server stops');
    }
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EADDRINUSE')
      cannotStart(`port ${port} on ${values.host ?? '127.0.0.1'} is already in use; stop what holds it or pick another with --port`);
    if (err.code === 'EADDRNOTAVAIL') cannotStart(`cannot listen on ${values.host}: no such local address (--host)`);
    cannotStart(err.message);
  }
  let stopping = false;
  const stop = async (sig: string) => {
    if (stopping) return;
    stopping = true;
    server.log.info({ sig }, 'shutting down');
    await server.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('uncaughtException', (e) => server.log.error({ err: e.stack }, 'uncaught exception (kept running)'));
  process.on('unhandledRejection', (e) => server.log.error({ err: String(e) }, 'unhandled rejection (kept running)'));
}

/** What the CLI uses of @hercules/cluster, loaded only in cluster mode (a package of its own: its NATS clients are not everyone's). */
interface ClusterModule {
  createClusterNode(
    opts: Record<string, unknown>,
  ): Promise<{ close(): Promise<void>; service: { log: { info(o: object, m: string): void; error(o: object, m: string): void } } }>;
  startNatsCluster(opts: { nodes?: number; dir?: string }): Promise<{ urls: string[]; dir: string; close(): Promise<void> }>;
  auditRoomOnNats(opts: { nats: string[]; room: string; prefix?: string; shards?: number }): Promise<{ problems: string[] }>;
}

async function loadCluster(): Promise<ClusterModule> {
  const name = '@hercules/cluster';
  try {
    return (await import(name)) as ClusterModule;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && String((e as Error).message).includes(name))
      cannotStart(`cluster mode needs the ${name} package: npm install ${name}`);
    throw e;
  }
}

async function audit(nats: string | undefined, room: string | undefined, shardsArg: string | undefined, prefix: string | undefined): Promise<void> {
  if (!nats) fail('audit needs --nats <urls>');
  if (room === undefined) fail('audit needs --room <name>');
  const shards = num('shards', shardsArg, 64);
  if (!Number.isInteger(shards) || shards < 1) fail(`--shards must be a positive integer, got ${JSON.stringify(shardsArg)}`);
  const cluster = await loadCluster();
  let report: { problems: string[] };
  try {
    report = await cluster.auditRoomOnNats({ nats: nats.split(',').map((u) => u.trim()), room, shards, ...(prefix ? { prefix } : {}) });
  } catch (e) {
    cannotStart((e as Error).message);
  }
  console.log(JSON.stringify(report, null, 2));
  process.exit(report.problems.length > 0 ? 1 : 0);
}

async function natsDev(nodesArg: string | undefined, dir: string | undefined): Promise<void> {
  const nodes = num('nodes', nodesArg, 3);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 9) fail(`--nodes must be an integer from 1 to 9, got ${JSON.stringify(nodesArg)}`);
  const cluster = await loadCluster();
  let c: Awaited<ReturnType<ClusterModule['startNatsCluster']>>;
  try {
    c = await cluster.startNatsCluster({ nodes, ...(dir ? { dir: resolve(dir) } : {}) });
  } catch (e) {
    cannotStart((e as Error).message);
  }
  console.log(
    `NATS cluster of ${nodes} running (data and logs in ${c.dir}). Start Hercules nodes with:\n  --nats ${c.urls.join(',')}${nodes === 1 ? ' --nats-replicas 1' : ''}\nCtrl-C stops it.`,
  );
  const stop = async () => {
    await c.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  await new Promise(() => {});
}

await main(process.argv.slice(2));
