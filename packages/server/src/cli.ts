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
import { createServer } from './server.ts';

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
  -h, --help               this text
`;

function fail(msg: string): never {
  console.error(`hercules: ${msg}\n\n${HELP}`);
  process.exit(2);
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
  const server = await createServer({
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
