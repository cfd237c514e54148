/**
 * hercules serve — run a Hercules server.
 *
 *   hercules serve --machines ./machines.ts [--port 8787] [--host 127.0.0.1] [--data-dir ./data]
 *                  [--ack-timeout 2000] [--simulate-rtt 0] [--checkpoint-every 1000] [--commit-window 0]
 *                  [--log-level info]
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Machine } from '@hercules/core';
import { readFileSync } from 'node:fs';
import { createServer, type Limits } from './server.ts';
import type { JwtOptions } from './auth.ts';

const HELP = `Usage: hercules serve --machines <module> [options]

Runs a Hercules sync server: WebSocket on /?room=NAME, /healthz, /metrics.

Options:
  --machines <module>      module exporting the state machines (defineMachine); required
  --port <n>               TCP port (default 8787; 0 picks a free one)
  --host <addr>            interface to listen on (default 127.0.0.1)
  --data-dir <dir>         where the SQLite file lives (default ./data)
  --ack-timeout <ms>       drop a member from the visibility set after this long without an ack (default 2000)
  --heartbeat <ms>         ping interval; silent connections are dropped after two (default 5000)
  --simulate-rtt <ms>      delay every frame by half this each way, to see the views differ locally (default 0)
  --checkpoint-every <n>   write a room's checkpoint state at most every n ops (default 1000)
  --commit-window <ms>     group-commit batching: gather writes this long into one transaction
                           (default 0: one commit per event-loop turn)
  --log-level <level>      trace|debug|info|warn|error|silent (default info)

Authentication (JWT; the user is the token's sub; one key source; see docs/security.md):
  --jwt-secret-file <path> HMAC secret (at least 32 bytes) read from a file, never from argv
  --jwt-public-key <path>  PEM public key file (RS*, PS*, ES*, EdDSA)
  --jwks-file <path>       JWKS file ({ "keys": [...] }), keys picked by kid
  --jwt-issuer <iss>       required issuer
  --jwt-audience <aud>     required audience

Limits (defaults in docs/security.md):
  --max-frame-bytes <n>    largest frame accepted (default 1048576)
  --ops-per-second <n>     sustained ops per second per connection (default 1000)
  --max-clients-per-room <n>  connections per room (default 256)
  -h, --help               this text
`;

/** A usage error: the message, then the usage. */
function fail(msg: string): never {
  console.error(`hercules: ${msg}\n\n${HELP}`);
  process.exit(2);
}

/** The arguments were fine but the server could not start (data directory, port): no usage. */
function cannotStart(msg: string): never {
  console.error(`hercules: ${msg}`);
  process.exit(1);
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
        'max-clients-per-room': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    fail((e as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length === 0) {
    console.log(HELP);
    return;
  }
  if (positionals[0] !== 'serve') fail(`unknown command ${JSON.stringify(positionals[0])}`);
  if (!values.machines) fail('--machines is required');
  let mod: Record<string, unknown>;
  try {
    mod = await import(pathToFileURL(resolve(values.machines)).href);
  } catch (e) {
    fail(`cannot load --machines ${values.machines}: ${(e as Error).message}`);
  }
  const machines = Object.values(mod).filter((m): m is Machine<any, any> => !!m && typeof m === 'object' && (m as Machine).opNames instanceof Set);
  if (machines.length === 0) fail(`${values.machines} exports no machines (made with defineMachine)`);
  const read = (flag: string, path: string) => {
    try { return readFileSync(path, 'utf8'); } catch (e) { return fail(`--${flag} ${path}: ${(e as Error).message}`); }
  };
  const keySources = ['jwt-secret-file', 'jwt-public-key', 'jwks-file'].filter((k) => values[k as 'jwks-file'] !== undefined);
  if (keySources.length > 1) fail(`give one of --jwt-secret-file, --jwt-public-key, --jwks-file (got ${keySources.join(', ')})`);
  if (keySources.length === 0 && (values['jwt-issuer'] || values['jwt-audience'])) fail('--jwt-issuer and --jwt-audience need a key: --jwt-secret-file, --jwt-public-key or --jwks-file');
  const jwt: JwtOptions | undefined = keySources.length === 0 ? undefined : {
    ...(values['jwt-secret-file'] ? { secret: read('jwt-secret-file', values['jwt-secret-file']).trim() } : {}),
    ...(values['jwt-public-key'] ? { publicKey: read('jwt-public-key', values['jwt-public-key']) } : {}),
    ...(values['jwks-file'] ? { jwksFile: resolve(values['jwks-file']) } : {}),
    ...(values['jwt-issuer'] ? { issuer: values['jwt-issuer'] } : {}),
    ...(values['jwt-audience'] ? { audience: values['jwt-audience'] } : {}),
  };
  const limits: Partial<Limits> = {};
  if (values['max-frame-bytes'] !== undefined) limits.maxFrameBytes = num('max-frame-bytes', values['max-frame-bytes'], 0) || fail('--max-frame-bytes must be positive');
  if (values['ops-per-second'] !== undefined) limits.opsPerSecond = num('ops-per-second', values['ops-per-second'], 0) || fail('--ops-per-second must be positive');
  if (values['max-clients-per-room'] !== undefined) limits.maxClientsPerRoom = num('max-clients-per-room', values['max-clients-per-room'], 0) || fail('--max-clients-per-room must be positive');
  let server;
  try {
    server = await createServer({
      ...(jwt ? { jwt } : {}),
      limits,
      machines,
      port: num('port', values.port, 8787),
      host: values.host ?? '127.0.0.1',
      dataDir: resolve(values['data-dir'] ?? 'data'),
      ackTimeoutMs: num('ack-timeout', values['ack-timeout'], 2000) || 2000,
      heartbeatMs: num('heartbeat', values.heartbeat, 5000) || 5000,
      simulateRttMs: num('simulate-rtt', values['simulate-rtt'], 0),
      checkpointEvery: num('checkpoint-every', values['checkpoint-every'], 1000) || 1000,
      commitWindowMs: num('commit-window', values['commit-window'], 0),
      log: values['log-level'] ?? 'info',
    });
  } catch (e) {
    cannotStart((e as Error).message);
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

await main(process.argv.slice(2));
