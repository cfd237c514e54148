/** `hercules serve`: the options turned into a server (embedded SQLite, memory, or a cluster node), run until a signal. */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { JwtOptions } from '../auth.ts';
import { createServer, type Limits, type ServerOptions } from '../server.ts';
import { staticFiles } from '../static-files.ts';
import { MemoryStore } from '../store/memory.ts';
import { retentionSetting, type HistoryOption } from '../store/room-store.ts';
import type { WebhookOptions } from '../webhooks.ts';
import { cannotStart, fail, loadCluster, num, type ClusterModule } from './common.ts';
import { loadError, loadModule, machinesOf } from './machines-module.ts';
import type { Values } from './options.ts';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

type Str = (name: string) => string | undefined;

/** A secret from its file flag or, the twelve-factor way, from a variable holding it. */
function secret(str: Str, flag: string, envVar: string): string | undefined {
  const path = str(flag);
  if (path !== undefined && process.env[envVar]) fail(`give --${flag} or ${envVar}, not both`);
  if (path !== undefined) return readText(flag, path).trim();
  return process.env[envVar] || undefined;
}

function readText(flag: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    return fail(`--${flag} ${path}: ${(e as Error).message}`);
  }
}

function jwtOptions(str: Str): JwtOptions | undefined {
  const keySources = ['jwt-secret-file', 'jwt-public-key', 'jwks-file'].filter((k) => str(k) !== undefined);
  if (keySources.length > 1) fail(`give one of --jwt-secret-file, --jwt-public-key, --jwks-file (got ${keySources.join(', ')})`);
  if (keySources.length === 0 && (str('jwt-issuer') || str('jwt-audience') || str('jwt-clock-tolerance')))
    fail('--jwt-issuer, --jwt-audience and --jwt-clock-tolerance need a key: --jwt-secret-file, --jwt-public-key or --jwks-file');
  if (keySources.length === 0) return undefined;
  const tolerance = str('jwt-clock-tolerance');
  return {
    ...(str('jwt-secret-file') ? { secret: readText('jwt-secret-file', str('jwt-secret-file')!).trim() } : {}),
    ...(str('jwt-public-key') ? { publicKey: readText('jwt-public-key', str('jwt-public-key')!) } : {}),
    ...(str('jwks-file') ? { jwksFile: resolve(str('jwks-file')!) } : {}),
    ...(str('jwt-issuer') ? { issuer: str('jwt-issuer') } : {}),
    ...(str('jwt-audience') ? { audience: str('jwt-audience') } : {}),
    ...(tolerance !== undefined ? { clockToleranceSec: num('jwt-clock-tolerance', tolerance, 30) } : {}),
  };
}

const LIMIT_FLAGS: readonly [string, keyof Limits][] = [
  ['max-frame-bytes', 'maxFrameBytes'],
  ['ops-per-second', 'opsPerSecond'],
  ['user-ops-per-second', 'userOpsPerSecond'],
  ['bytes-per-second', 'bytesPerSecond'],
  ['max-connections', 'maxConnections'],
  ['max-clients-per-room', 'maxClientsPerRoom'],
  ['hello-timeout', 'helloTimeoutMs'],
  ['upgrade-timeout', 'upgradeTimeoutMs'],
  ['max-pending-connections', 'maxPendingConnections'],
];

function limitsOf(str: Str): Partial<Limits> {
  const limits: Partial<Limits> = {};
  for (const [flag, key] of LIMIT_FLAGS) {
    const v = str(flag);
    if (v !== undefined) limits[key] = num(flag, v, 0) || fail(`--${flag} must be positive`);
  }
  return limits;
}

/** The admin API and the webhook from their flags or variables; checked by createServer as any caller's. */
function adminAndWebhooks(str: Str): Pick<ServerOptions, 'admin' | 'webhooks'> {
  const token = secret(str, 'admin-token-file', 'HERCULES_ADMIN_TOKEN');
  const url = str('webhook-url');
  const whsec = secret(str, 'webhook-secret-file', 'HERCULES_WEBHOOK_SECRET');
  if (url === undefined && whsec !== undefined) fail('a webhook secret needs --webhook-url');
  if (url !== undefined && whsec === undefined) fail('--webhook-url needs a secret: --webhook-secret-file or HERCULES_WEBHOOK_SECRET');
  const webhooks: WebhookOptions[] = url !== undefined ? [{ url, secret: whsec! }] : [];
  return { ...(token !== undefined ? { admin: { token } } : {}), ...(webhooks.length ? { webhooks } : {}) };
}

async function machinesFrom(given: string | undefined) {
  if (!given) fail('--machines is required');
  const file = resolve(given);
  if (!existsSync(file)) fail(`--machines ${given}: no such file`);
  let mod: Record<string, unknown>;
  try {
    mod = await loadModule(file);
  } catch (e) {
    // The module's own error (syntax error, a throw at import, a missing import): where, then what.
    console.error(`hercules: cannot load --machines ${given}:\n${loadError(e, file)}`);
    process.exit(1);
  }
  const machines = machinesOf(mod);
  if (machines.length === 0) cannotStart(`--machines ${given} exports no machines (made with defineMachine)`);
  return machines;
}

/** The options every mode shares, from the flags (and variables). */
async function commonOptions(str: Str) {
  const level = str('log-level');
  if (level !== undefined && !LOG_LEVELS.includes(level)) fail(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
  const port = num('port', str('port'), 8787);
  if (!Number.isInteger(port) || port > 65535) fail(`--port must be an integer from 0 to 65535, got ${JSON.stringify(str('port'))}`);
  const jwt = jwtOptions(str);
  const limits = limitsOf(str);
  const web = adminAndWebhooks(str);
  const staticDir = str('static');
  const http = staticDir !== undefined ? staticHandler(staticDir) : undefined;
  const machines = await machinesFrom(str('machines'));
  return {
    ...(jwt ? { jwt } : {}),
    ...web,
    ...(http ? { http } : {}),
    limits,
    machines,
    port,
    host: str('host') ?? '127.0.0.1',
    ackTimeoutMs: num('ack-timeout', str('ack-timeout'), 2000) || 2000,
    heartbeatMs: num('heartbeat', str('heartbeat'), 5000) || 5000,
    simulateRttMs: num('simulate-rtt', str('simulate-rtt'), 0),
    checkpointEvery: num('checkpoint-every', str('checkpoint-every'), 1000) || 1000,
    commitWindowMs: num('commit-window', str('commit-window'), 0),
    history: historyOf(str),
    log: level ?? 'info',
  };
}

/** --history-ops and --history-days as the servers' `history` option (docs/history.md). */
function historyOf(str: Str): HistoryOption | undefined {
  const ops = str('history-ops'),
    days = str('history-days');
  if (ops !== undefined && !/^(0|[1-9][0-9]*)$/.test(ops)) fail(`--history-ops must be an integer >= 0, got ${JSON.stringify(ops)}`);
  if (days !== undefined && !(Number(days) > 0 && Number.isFinite(Number(days)))) fail(`--history-days must be a number > 0, got ${JSON.stringify(days)}`);
  if (ops === undefined && days === undefined) return undefined;
  return { ...(ops !== undefined ? { ops: Number(ops) } : {}), ...(days !== undefined ? { days: Number(days) } : {}) };
}

function staticHandler(dir: string) {
  try {
    return staticFiles(dir);
  } catch (e) {
    return fail(`--static ${dir}: no such directory (${(e as Error).message})`);
  }
}

type Running = { close(): Promise<void>; log: { info(o: object, m: string): void; error(o: object, m: string): void } };

async function startClusterNode(str: Str, common: Awaited<ReturnType<typeof commonOptions>>): Promise<Running> {
  const nats = str('nats')!
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  if (nats.length === 0) fail('--nats must list at least one NATS URL');
  const int = (flag: string, d: number) => {
    const n = num(flag, str(flag), d);
    if (!Number.isInteger(n) || n < 1) fail(`--${flag} must be a positive integer, got ${JSON.stringify(str(flag))}`);
    return n;
  };
  const batch = str('nats-batch');
  if (batch !== undefined && batch !== 'on' && batch !== 'off') fail(`--nats-batch must be on or off, got ${JSON.stringify(batch)}`);
  const cluster: ClusterModule = await loadCluster();
  // Without --heartbeat, the cluster node's own default (1 s, createClusterNode) applies.
  const { heartbeatMs, ...rest } = common;
  const node = await cluster.createClusterNode({
    ...rest,
    ...(str('heartbeat') !== undefined ? { heartbeatMs } : {}),
    nats,
    ...(str('node-id') ? { nodeId: str('node-id') } : {}),
    shards: int('shards', 64),
    leaseMs: int('lease-ms', 2000),
    replicas: int('nats-replicas', 3),
    ...(str('nats-prefix') ? { prefix: str('nats-prefix') } : {}),
    ...(batch !== undefined ? { batchAppends: batch === 'on' } : {}),
  });
  return { close: () => node.close(), log: node.service.log };
}

async function startEmbedded(str: Str, common: Awaited<ReturnType<typeof commonOptions>>, memory: boolean): Promise<Running> {
  const store = () => new MemoryStore({ retention: retentionSetting('hercules serve', common.history) });
  const server = await createServer(memory ? { ...common, store: store() } : { ...common, dataDir: resolve(str('data-dir') ?? 'data') });
  if (memory) server.log.info({}, 'rooms are kept in memory only (--memory): they are gone when this server stops');
  return server;
}

export async function serve(values: Values, positionals: string[]): Promise<void> {
  if (positionals.length > 1) fail(`unexpected argument ${JSON.stringify(positionals[1])}`);
  const str: Str = (name) => values[name] as string | undefined;
  const clusterFlags = ['node-id', 'shards', 'lease-ms', 'nats-replicas', 'nats-prefix', 'nats-batch'].filter((f) => str(f) !== undefined);
  if (!str('nats') && clusterFlags.length) fail(`--${clusterFlags[0]} needs --nats (cluster mode)`);
  if (values.memory && str('nats')) fail('--memory and --nats each say where the rooms live; give one');
  if (values.memory && str('data-dir') !== undefined) fail('--memory writes nothing, so --data-dir has no use with it; give one');
  const common = await commonOptions(str);
  let server: Running;
  try {
    server = str('nats') ? await startClusterNode(str, common) : await startEmbedded(str, common, values.memory === true);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EADDRINUSE') cannotStart(`port ${common.port} on ${common.host} is already in use; stop what holds it or pick another with --port`);
    if (err.code === 'EADDRNOTAVAIL') cannotStart(`cannot listen on ${common.host}: no such local address (--host)`);
    cannotStart(err.message);
  }
  runUntilSignal(server);
}

function runUntilSignal(server: Running): void {
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
